"""What a remedy costs: peer access, the route peer copies take, their speed and their bytes.

A remedy that removes the mirror may do it by giving up direct peer copies
(``ForceZeDeviceCanAccessPerReturnValue=0`` sends them through host memory)
or keep them (``EnableDeferBacking=0``). For the default environment and for
every remedy that removed or reduced a mirror, :func:`measure_cost` runs
``python -m l0mem.audit.costs`` in that environment over the set-up's devices:
``zeDeviceCanAccessPeer`` per ordered pair, the route l0mem's copies take,
the direct copy's bandwidth (withheld without hardware, as ``p2p`` does) and
every route checked byte for byte (:mod:`l0mem.bench.integrity`).

:func:`settings_known` says whether the runtime in use reads each setting a
remedy gives: a setting's name must appear in the library that would read it
(the SYCL runtime's Level Zero adapter for ``SYCL_*``/``UR_*``, the Level
Zero driver for its debug keys and ``ZE_*``). A remedy whose setting the
runtime does not read is "not applicable", not "no effect". :func:`ranked`
orders the remedies that removed a mirror by what they cost peer copies.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import mmap
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from l0mem.driverenv import is_neo_key

COST_SIZE = 16 << 20  # the direct copy timed per pair
CHECK_SIZES = (4097, (2 << 20) + 3)  # odd sizes across a page and a 2 MiB boundary
# Switches that only enable other settings: what they enable is what is judged.
_SWITCHES = frozenset({"NEOReadDebugKeys"})
_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")


@dataclasses.dataclass(frozen=True)
class RemedyCost:
    """Peer access, routes, direct bandwidth and copy checks in one environment of one set-up."""

    setup: str
    remedy: str | None  # None: the default environment
    env: dict[str, str]
    known: dict[str, bool | None]  # setting -> the runtime reads it (None: cannot tell)
    peer_access: dict[str, bool | None] = dataclasses.field(default_factory=dict)  # "s>d"
    routes: dict[str, str] = dataclasses.field(default_factory=dict)  # "s>d" -> direct|staged
    direct_gbps: float | None = None  # median over the pairs with a direct route
    copies_ok: bool | None = None  # every route checked moved the right bytes
    failures: list[str] = dataclasses.field(default_factory=list)
    error: str | None = None  # why nothing was measured

    @property
    def applicable(self) -> bool:
        """Return False when the runtime in use does not read one of the remedy's settings."""
        return all(v is not False for v in self.known.values())

    @property
    def route(self) -> str | None:
        """Return how peer copies go: "direct", "through host", "mixed", or None without pairs."""
        kinds = set(self.routes.values())
        if not kinds:
            return None
        if kinds == {"direct"}:
            return "direct"
        return "through host" if kinds == {"staged"} else "mixed"

    def to_dict(self) -> dict[str, Any]:
        """Return the cost as plain JSON data (report ``remedy_costs[]``)."""
        return {**dataclasses.asdict(self), "applicable": self.applicable, "route": self.route}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RemedyCost:
        """Return the cost written by :meth:`to_dict` (derived keys are recomputed)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


# ------------------------------------------------------------------ settings


def _contains(path: str, needle: bytes) -> bool:
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(needle) >= 0
    except (OSError, ValueError):
        return False


def _readers(key: str, env: Mapping[str, str]) -> list[str]:
    """Return the library files that would read ``key`` in ``env`` (may be empty)."""
    dirs = [os.path.join(sys.prefix, "lib"), *env.get("LD_LIBRARY_PATH", "").split(":"), *_LIB_DIRS]
    if key.startswith(("SYCL_", "UR_")):
        # The adapter the runtime will load: v1 or v2 when the environment says
        # which (SYCL_UR_USE_LEVEL_ZERO_V2), either one otherwise (it depends on the device).
        v2 = env.get("SYCL_UR_USE_LEVEL_ZERO_V2")
        patterns = {
            "0": ["libur_adapter_level_zero.so*"],
            "1": ["libur_adapter_level_zero_v2.so*"],
        }.get(v2 or "", ["libur_adapter_level_zero*.so*"])
    else:
        patterns = ["libze_intel_gpu.so*", "libze_loader.so*"]
    found = [p for d in dirs if d for pat in patterns for p in glob.glob(os.path.join(d, pat))]
    if not key.startswith(("SYCL_", "UR_")):
        # A driver named on the loader's list is the one that reads its keys.
        found += [p for p in env.get("ZE_ENABLE_ALT_DRIVERS", "").split(",") if os.path.isfile(p)]
    return sorted(set(found))


def settings_known(settings: Mapping[str, str], env: Mapping[str, str]) -> dict[str, bool | None]:
    """Return, per setting, whether a library that would read it names it (None: none found)."""
    out: dict[str, bool | None] = {}
    for key in settings:
        if key in _SWITCHES:
            continue
        if not (key.startswith(("SYCL_", "UR_", "ZE_")) or is_neo_key(key)):
            out[key] = None  # no library to ask (a variable read under a built-up name)
            continue
        libs = _readers(key, env)
        out[key] = None if not libs else any(_contains(p, key.encode()) for p in libs)
    return out


# ------------------------------------------------------------------ measuring


def _sycl_devices(spec: str | None) -> list[str]:
    """Return a filter per device of ``spec``'s backend and type ("level_zero:gpu:0": every GPU).

    The set-up's default context spans every device of the platform: so do its costs.
    """
    parts = (spec or "").split(":")
    if len(parts) < 2:
        return [spec] if spec else []
    from l0mem.sycl import load_dpctl

    backend, kind = parts[0], parts[1]
    spec = f"{backend}:{kind}"
    found = load_dpctl().get_devices(backend=backend, device_type=kind)
    return [f"{spec}:{i}" for i in range(len(found))] or [spec]


def measure_here(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Measure peer access, routes, direct bandwidth and copy checks over ``spec``'s devices."""
    from l0mem.backends import NoDeviceError, open_backend
    from l0mem.bench.copies import measure_copies, peer_matrix
    from l0mem.bench.integrity import OFFSETS, verify_copies

    kind = spec["backend"]
    devices = (
        list(spec.get("l0_devices") or [])
        if kind == "l0"
        else _sycl_devices(spec.get("sycl_filter"))
    )
    # A remedy may hide devices (ZE_AFFINITY_MASK): cost what is left, as its run did.
    while True:
        try:
            backend = open_backend(kind, devices)
            break
        except NoDeviceError:
            if kind != "l0" or len(devices) <= 1:
                raise
            devices = devices[:-1]
    with backend as b:
        peers = peer_matrix(b)
        timings = measure_copies(b, sizes=[COST_SIZE], reps=3, warmup=1, kinds=("direct",))
        measured = sorted(t.measured.gbps for t in timings if t.measured is not None)
        checks = verify_copies(b, sizes=list(CHECK_SIZES), offsets=OFFSETS[-1:])
        made = [c for c in checks if not c.skipped]
        return {
            "peer_access": {f"{p.src}>{p.dst}": p.can_access for p in peers},
            "routes": {f"{p.src}>{p.dst}": p.route for p in peers},
            "direct_gbps": measured[len(measured) // 2] if measured else None,
            "copies_ok": all(c.ok for c in made) if made else None,
            "failures": [c.describe() for c in checks if not c.ok],
        }


def measure_cost(
    setup: str,
    remedy: str | None,
    spec: Mapping[str, Any],
    extra_env: Mapping[str, str],
    unset: Sequence[str] = (),
    *,
    python: str = sys.executable,
    timeout: float = 300.0,
) -> RemedyCost:
    """Return the cost of one environment, measured in a child process (never raises)."""
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(extra_env)
    known = settings_known(extra_env, env)
    base = RemedyCost(setup, remedy, dict(extra_env), known)
    try:
        proc = subprocess.run(
            [python, "-m", "l0mem.audit.cost_child"],
            input=json.dumps(dict(spec)),
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return dataclasses.replace(base, error=f"no answer within {timeout:.0f} s")
    except OSError as exc:
        return dataclasses.replace(base, error=f"cannot start the measurement: {exc}")
    try:
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        lines = proc.stderr.strip().splitlines()
        return dataclasses.replace(base, error=lines[-1] if lines else f"exit {proc.returncode}")
    if "error" in got:
        return dataclasses.replace(base, error=str(got["error"]))
    return dataclasses.replace(
        base,
        peer_access=got["peer_access"],
        routes=got["routes"],
        direct_gbps=got["direct_gbps"],
        copies_ok=got["copies_ok"],
        failures=list(got["failures"]),
    )


# ------------------------------------------------------------------ ranking


def ranked(removed: Iterable[str], costs: Sequence[RemedyCost]) -> list[RemedyCost]:
    """Return the costs of the remedies in ``removed``, least costly to peer copies first.

    Keeping every pair direct comes first, then some pairs direct, then copies
    through the host, last a remedy that leaves no pair at all (it hid devices);
    then copies that check out, then the direct bandwidth (higher first, in
    15% steps: closer is noise, and equals keep the order they came in). A
    remedy the runtime does not read is left out.
    """
    names = set(removed)
    pool = [c for c in costs if c.remedy in names and c.applicable and c.error is None]

    best = max((c.direct_gbps or 0.0 for c in pool), default=0.0)

    def key(c: RemedyCost) -> tuple[int, int, int]:
        # Bandwidth in 15% steps below the best: closer than that is timing noise.
        bw = c.direct_gbps
        steps = math.floor(math.log(best / bw) / math.log(1.15)) if bw and best else 10**6
        return (
            {"direct": 0, "mixed": 1, "through host": 2}.get(c.route or "", 3),
            0 if c.copies_ok is not False else 1,
            steps,
        )

    return sorted(pool, key=key)


def advice(best: RemedyCost | None, default: RemedyCost | None) -> str | None:
    """Return one sentence a user can act on: the remedy to use and what it costs, or None."""
    if best is None:
        return None
    setting = " ".join(f"{k}={v}" for k, v in best.env.items())
    if best.route == "direct":
        cost = "keeps peer copies direct"
        if best.direct_gbps and default is not None and default.direct_gbps:
            cost += f" ({best.direct_gbps / default.direct_gbps:.2f}x the default's bandwidth)"
    elif best.route is None:
        cost = "but leaves no two devices to copy between"
    else:
        cost = "but sends peer copies through host memory"
    if best.copies_ok is False:
        cost += "; its copies did not check out byte for byte"
    return f"Use {best.remedy} ({setting}) for {best.setup}: it removes the mirror and {cost}."


def remedy_advice(report: Any) -> str | None:
    """Return :func:`advice` for an audit report: the least costly remedy that removed a mirror."""
    from l0mem.audit.analysis import remedy_effects

    costs = {(c.setup, c.remedy): c for c in map(RemedyCost.from_dict, report.remedy_costs)}
    if not any(c.error is None for c in costs.values()):
        return None
    # Only a remedy on a set-up whose mirror it removed: the same remedy may only
    # have reduced another set-up's.
    removed = {(e.setup, e.remedy) for e in remedy_effects(report) if e.removed}
    pool = [c for key, c in costs.items() if key in removed]
    order = ranked({remedy for _, remedy in removed}, pool)
    best = order[0] if order else None
    return advice(best, None if best is None else costs.get((best.setup, None)))


def collect(
    report: Any, plans: Sequence[Any], python: str = sys.executable, timeout: float = 300.0
) -> list[RemedyCost]:
    """Return the costs of every remedy run of ``report`` (``plans``: the runs' SetupPlans).

    Every remedy gets whether the runtime reads its settings; those that removed
    or reduced a mirror, and the default environment of their set-up, are measured.
    """
    from l0mem.audit.analysis import remedy_effects

    by_key = {(p.setup, None if p.remedy is None else p.remedy.name): p for p in plans}
    out: list[RemedyCost] = []
    defaults: dict[str, RemedyCost] = {}
    for e in remedy_effects(report):
        plan = by_key.get((e.setup, e.remedy))
        if plan is None:
            continue
        spec = {
            "backend": plan.backend,
            "l0_devices": list(plan.l0_devices),
            "sycl_filter": plan.sycl_filter,
        }
        helped = e.removed or (e.verdict == "partial" and e.baseline_verdict == "mirror")
        if not helped:
            env = {k: v for k, v in os.environ.items() if k not in plan.env_unset}
            env.update(e.env)
            out.append(
                RemedyCost(
                    e.setup,
                    e.remedy,
                    dict(e.env),
                    settings_known(e.env, env),
                    error="not measured: it did not remove the mirror",
                )
            )
            continue
        if e.setup not in defaults:
            defaults[e.setup] = measure_cost(
                e.setup, None, spec, {}, plan.env_unset, python=python, timeout=timeout
            )
            out.append(defaults[e.setup])
        out.append(
            measure_cost(
                e.setup, e.remedy, spec, e.env, plan.env_unset, python=python, timeout=timeout
            )
        )
    return out
