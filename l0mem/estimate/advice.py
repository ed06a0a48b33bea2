"""What to do next when a run is inconclusive: the noise seen, and what would decide it.

From what the run measured: how far the deciding total moved per window
beside the run's own steps, how many step windows (and how many seconds of
allocate/free cycles at the run's pace) or what size would give an interval
that separates the verdicts at that noise, and which component signals the
machine lacks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from l0mem.estimate.climbs import against, disputed
from l0mem.estimate.fits import step_slopes
from l0mem.estimate.model import AnalysisConfig, NextSteps, Sample, SignalFit
from l0mem.estimate.steps import windows, windows_needed
from l0mem.estimate.verdicts import separated
from l0mem.units import fixed

# Sizes are advised in whole steps of this many bytes.
SIZE_ALIGN = 64 << 20


def next_steps(
    samples: Sequence[Sample],
    total: SignalFit | None,
    by_name: Mapping[str, SignalFit],
    config: AnalysisConfig,
    unavailable: Mapping[str, str],
    more: str,
    *,
    untouched: int = 0,
    why: str | None = None,
) -> NextSteps:
    """Return what an inconclusive run measured and what would decide it.

    ``why`` is why the total did not decide (its ``passed_over`` entry).
    """
    missing = {
        name: unavailable.get(name) or unavailable.get(name.partition(".")[0]) or "not read"
        for name in config.priority
        if name not in config.totals and name not in by_name and not name.startswith("drm.")
    }
    if untouched:
        text = (
            f"{untouched} allocation(s) never showed the fill: the driver did not execute it, "
            "so no size or repeat decides; check the driver (l0mem info)"
        )
        return NextSteps(text, None, None, 0, None, None, missing, None)
    if not any(s.device_bytes for s in samples):
        # The host was read; the cost had nothing to be divided by.
        text = (
            "no device memory was seen while the host was sampled: there is nothing to divide "
            f"its cost by; {more}"
        )
        return NextSteps(text, None, None, 0, None, None, missing, None)
    if total is None or total.slope is None:
        text = (
            "no total of the host's memory (host.available, MemAvailable) was read in enough "
            f"samples to judge; {more}"
        )
        return NextSteps(
            text, None, None, 0 if total is None else total.points, None, None, missing, None
        )
    if why is not None and disputed(why):
        return _moved_between(samples, total, config, missing)
    slope = total.slope
    low, high = total.interval or (slope, slope)
    bounds = (config.clean_threshold * 1024.0, config.mirror_threshold * 1024.0)
    distance = min(abs(slope - b) for b in bounds)
    max_device = max((s.device_bytes for s in samples), default=0)
    half = max(slope - low, high - slope)
    need: int | None = None
    seconds: float | None = None
    if total.method == "steps":
        grow, _ = step_slopes(samples, total.signal, config)
        if grow is not None:
            need = windows_needed(grow, distance, config.confidence)
        found = windows(samples, total.signal)
        if need is not None and len(found) >= 2:
            # A cycle is an allocation window and a free window, at this run's pace.
            pace = (max(w.t for w in found) - min(w.t - w.seconds for w in found)) / len(found)
            seconds = round(2 * pace * max(need - total.points, 0), 1)
    size = None
    if distance > 0 and half > 0 and max_device:
        # The noise is MiB per window whatever the size: the ratio's spread shrinks with it.
        size = math.ceil(max_device * half / distance / SIZE_ALIGN) * SIZE_ALIGN
    noise = total.noise_mib
    seen = f"about {fixed(noise)} MiB" if noise is not None else "an unknown amount"
    at = "windows" if total.method == "steps" else "samples"
    parts = [
        f"{total.signal} moved by {seen} per measurement beside this run's own steps "
        f"(other processes' memory); its slope {fixed(slope)} MiB/GiB lies between {fixed(low)} and "
        f"{fixed(high)}"
        + (f" ({why})" if why and "spans two verdicts" not in why else ", which spans two verdicts")
    ]
    if distance <= 0:
        parts.append("the slope sits on a verdict's threshold: no repeat separates it")
    else:
        wanted = []
        if need is not None:
            pace_text = "" if seconds is None else f", about {seconds:.0f} s more of cycles"
            wanted.append(f"about {need} step {at} (this run had {total.points}{pace_text})")
        if size is not None:
            wanted.append(f"a size of {size >> 20} MiB")
        if wanted:
            parts.append(" or ".join(wanted) + " would decide at that noise")
    gone = [n for n in missing if n.startswith(("meminfo.GPU", "vmstat.nr_gpu"))]
    if gone:
        parts.append(
            "no component signal could stand in (" + ", ".join(gone) + " absent: kernel < 7.1)"
        )
    parts.append(more)
    return NextSteps(
        text="; ".join(parts),
        signal=total.signal,
        noise_mib=noise,
        windows=total.points,
        windows_needed=need,
        size_needed_bytes=size,
        missing=missing,
        seconds_needed=seconds,
    )


def _where(samples: Sequence[Sample], total: SignalFit, sign: float | None) -> str:
    """Return where the climb's motion (``sign``: its way against the windows; None: unknown) lay.

    Between the windows, or also in windows set aside as disturbed: those may
    hold the run's own lump as well as another process's.
    """
    found = {w.step: w for w in windows(samples, total.signal)}
    aside = [found[s] for s in total.rejected if s in found and found[s].device_bytes > 0]
    held = sum(w.cost_mib for w in aside)
    if sign is None or not aside or sign * held <= 0:
        return "between the windows, not in them"
    return (
        f"outside the windows that agree: {len(aside)} set aside as disturbed held "
        f"{fixed(held)} MiB of it, the rest came between the windows"
    )


def _moved_between(
    samples: Sequence[Sample],
    total: SignalFit,
    config: AnalysisConfig,
    missing: dict[str, str],
) -> NextSteps:
    """Return the advice where the windows decided but the climb contradicts them.

    More windows of the same kind do not help then: the memory moved between
    them, not in them, and only another climb (or a quieter machine) tells
    another process from a driver that makes its host pages after the calls.
    """
    assert total.slope is not None
    verdict = separated(total, config)
    found = None if verdict is None else against(samples, total, verdict, config)
    climbed = None if found is None else found[0].line.slope
    level = "a different level" if found is None else f"{fixed(climbed or 0.0)} MiB/GiB"
    where = _where(samples, total, None if climbed is None else climbed - total.slope)
    text = (
        f"{total.signal}: its step windows say {fixed(total.slope)} MiB/GiB, but the level the "
        f"host reached over the whole climb says {level}: memory moved {where} "
        "(another process's, or a driver that makes its host pages after its "
        "calls, as deferred backing does); more or larger steps do not tell these apart; "
        "allocating and freeing again does (l0mem audit climbs again until its climbs agree), "
        "or measuring when the machine is quieter"
    )
    return NextSteps(text, total.signal, total.noise_mib, total.points, None, None, missing, None)


__all__ = ["SIZE_ALIGN", "next_steps"]
