"""Known workarounds for host-memory mirroring, kept as data the audit can try.

Each :class:`Remedy` is an environment to run a set-up under again, the
set-ups it can affect, and where it was reported (docs/field notes). A set-up
that mirrored is rerun once per applicable remedy and the report says which
remedies removed the mirror. Users add their own with ``--env KEY=VALUE``
(:func:`custom_remedy`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

L0_SETUPS = ("l0", "l0-multi", "l0-peer-resident", "l0-dmabuf")
SYCL_SETUPS = ("sycl", "sycl-single")
ALL_SETUPS = L0_SETUPS + SYCL_SETUPS

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclasses.dataclass(frozen=True)
class Remedy:
    """A named environment that may remove a mirror, and the set-ups it applies to."""

    name: str
    env: Mapping[str, str]
    setups: tuple[str, ...]
    source: str  # where the workaround was reported
    note: str = ""  # what it changes, in one sentence

    def __post_init__(self) -> None:
        """Reject names and variables that cannot be used in a report or an environment."""
        if not _NAME.match(self.name):
            raise ValueError(f"remedy name {self.name!r}: use letters, digits and . _ + -")
        if not self.env:
            raise ValueError(f"remedy {self.name!r} sets no environment variable")
        for key, value in self.env.items():
            check_env_pair(key, value)
        unknown = [s for s in self.setups if s not in ALL_SETUPS]
        if unknown or not self.setups:
            raise ValueError(f"remedy {self.name!r}: unknown or missing set-ups {unknown}")
        object.__setattr__(self, "env", dict(self.env))

    def applies_to(self, setup: str) -> bool:
        """Return True when this remedy can change the outcome of ``setup``."""
        return setup in self.setups

    def to_dict(self) -> dict[str, Any]:
        """Return the remedy as plain JSON data."""
        return {
            "name": self.name,
            "env": dict(self.env),
            "setups": list(self.setups),
            "source": self.source,
            "note": self.note,
        }


def check_env_pair(key: str, value: str) -> None:
    """Raise ValueError unless ``key=value`` is a valid environment assignment."""
    if not _ENV_KEY.match(key):
        raise ValueError(f"not an environment variable name: {key!r}")
    if "\0" in value:
        raise ValueError(f"environment value of {key} contains a NUL byte")


KNOWN_REMEDIES: tuple[Remedy, ...] = (
    Remedy(
        name="affinity-mask-0",
        env={"ZE_AFFINITY_MASK": "0"},
        setups=("l0-multi", "l0-peer-resident", "sycl"),
        source="field notes: reported workaround (llama.cpp PR 21597 thread, intel/llvm 22873)",
        note="only device 0 is visible, so no context has a peer to mirror for",
    ),
    Remedy(
        name="no-peer-access",
        env={"NEOReadDebugKeys": "1", "ForceZeDeviceCanAccessPerReturnValue": "0"},
        setups=("l0-peer-resident", "sycl"),
        source="field notes: compute-runtime debug key (intel/compute-runtime 968, 980)",
        note="zeDeviceCanAccessPeer reports false, so runtimes make nothing resident on peers",
    ),
    Remedy(
        name="no-defer-backing",
        env={"NEOReadDebugKeys": "1", "EnableDeferBacking": "0"},
        setups=ALL_SETUPS,
        source="field notes: compute-runtime debug key (intel/compute-runtime 953)",
        note="device memory is backed at allocation instead of on first use",
    ),
    Remedy(
        name="ur-resident-own-device",
        env={"SYCL_UR_USE_LEVEL_ZERO_V2": "0", "UR_L0_USM_RESIDENT": "0x001"},
        setups=("sycl",),
        source="field notes: SYCL Level Zero adapter setting (intel/llvm usm.cpp, issue 21395)",
        note=(
            "the v1 adapter makes device allocations resident on their own device only "
            "(the v2 adapter ignores UR_L0_USM_RESIDENT)"
        ),
    ),
    Remedy(
        name="ur-residency-p2p-only",
        env={"SYCL_UR_L0_RESTRICT_USM_RESIDENCY_TO_P2P": "1"},
        setups=("sycl",),
        source="field notes: SYCL Level Zero adapter setting (intel/llvm PR 22796, opt-in since July 2026)",
        note=(
            "the adapter makes device allocations resident only on peers that have peer access "
            "enabled (runtimes before it do not read the setting)"
        ),
    ),
)


def parse_env_assignments(items: Iterable[str]) -> dict[str, str]:
    """Return ``{KEY: VALUE}`` from ``KEY=VALUE`` strings; raise ValueError on a malformed one."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        check_env_pair(key, value)
        if key in out and out[key] != value:
            raise ValueError(f"{key} is given twice with different values")
        out[key] = value
    return out


def custom_remedy(env: Mapping[str, str], name: str = "custom") -> Remedy:
    """Return a remedy made of the user's ``--env`` assignments, applying to every set-up."""
    return Remedy(
        name=name,
        env=env,
        setups=ALL_SETUPS,
        source="user (--env)",
        note=" ".join(f"{k}={v}" for k, v in env.items()),
    )


def remedies_for(setup: str, remedies: Sequence[Remedy] = KNOWN_REMEDIES) -> list[Remedy]:
    """Return the remedies among ``remedies`` that apply to ``setup``, in order."""
    return [r for r in remedies if r.applies_to(setup)]
