"""What a remedy costs (l0mem.audit.costs): settings the runtime reads, ranking, the advice."""

from __future__ import annotations

import os

from l0mem.audit.costs import RemedyCost, advice, ranked, settings_known

RESTRICT = "SYCL_UR_L0_RESTRICT_USM_RESIDENCY_TO_P2P"


def test_the_adapter_the_runtime_loads_decides_whether_a_setting_is_read() -> None:
    env = dict(os.environ)
    # The pinned 2025.3 runtime: only its v1 adapter reads UR_L0_USM_RESIDENT,
    # and neither adapter knows the newer restrict-to-P2P setting.
    v1 = {**env, "SYCL_UR_USE_LEVEL_ZERO_V2": "0"}
    v2 = {**env, "SYCL_UR_USE_LEVEL_ZERO_V2": "1"}
    assert settings_known({"UR_L0_USM_RESIDENT": "1"}, v1) == {"UR_L0_USM_RESIDENT": True}
    assert settings_known({"UR_L0_USM_RESIDENT": "1"}, v2) == {"UR_L0_USM_RESIDENT": False}
    assert settings_known({RESTRICT: "1"}, env) == {RESTRICT: False}
    # A switch is left out; a variable no library names by itself cannot be told.
    assert settings_known({"NEOReadDebugKeys": "1", "ZESIM_MIRROR": "none"}, env) == {
        "ZESIM_MIRROR": None
    }


def _cost(
    name: str,
    route: dict[str, str],
    gbps: float | None,
    ok: bool = True,
    known: dict[str, bool | None] | None = None,
) -> RemedyCost:
    return RemedyCost(
        "l0-peer-resident",
        name,
        {name.upper(): "1"},
        known or {},
        routes=route,
        direct_gbps=gbps,
        copies_ok=ok,
    )


DIRECT = {"0>1": "direct", "1>0": "direct"}
STAGED = {"0>1": "staged", "1>0": "staged"}


def test_ranking_puts_direct_copies_first_and_ignores_noise_in_bandwidth() -> None:
    costs = [
        _cost("hide", {}, None),
        _cost("host", STAGED, None),
        _cost("slow", DIRECT, 10.0),
        _cost("fast", DIRECT, 11.0),  # within 15% of slow: noise, the order they came in stands
        _cost("broken", DIRECT, 30.0, ok=False),
        _cost("unread", DIRECT, 50.0, known={"X": False}),
    ]
    names = [c.remedy for c in ranked([c.remedy or "" for c in costs], costs)]
    assert names == ["slow", "fast", "broken", "host", "hide"]
    faster = [*costs, _cost("faster", DIRECT, 20.0)]
    assert ranked([c.remedy or "" for c in faster], faster)[0].remedy == "faster"


def test_the_advice_names_the_remedy_and_its_cost() -> None:
    default = RemedyCost("l0-peer-resident", None, {}, {}, routes=DIRECT, direct_gbps=10.0)
    best = _cost("slow", DIRECT, 9.0)
    assert advice(best, default) == (
        "Use slow (SLOW=1) for l0-peer-resident: it removes the mirror and keeps peer copies "
        "direct (0.90x the default's bandwidth)."
    )
    assert "through host memory" in (advice(_cost("host", STAGED, None), default) or "")
    assert advice(None, default) is None
