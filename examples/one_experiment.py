"""Run one l0mem experiment through the library API and print its verdict.

    python examples/one_experiment.py                       # l0-peer-resident, 1 GiB
    python examples/one_experiment.py --setup sycl --size-mib 512

The experiment runs in a child process (as in ``l0mem audit``), guarded so
that MemAvailable never falls below the default floor. The last line printed
is ``<set-up>: <verdict> <slope> +/-<uncertainty> MiB/GiB by <signal>``.
"""

from __future__ import annotations

import argparse
import sys

from l0mem.audit import AuditOptions, Guard, analyze_run, discover, plan_audit, run_setup
from l0mem.audit.model import Sample
from l0mem.audit.remedies import ALL_SETUPS


def main(argv: list[str] | None = None) -> int:
    """Run the chosen set-up once; return 0, or 3 when it cannot run here."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", choices=ALL_SETUPS, default="l0-peer-resident")
    parser.add_argument("--size-mib", type=int, default=1024, help="device memory to allocate")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--settle", type=float, default=0.05, help="seconds to wait per step")
    args = parser.parse_args(argv)

    options = AuditOptions(
        setups=(args.setup,), size_bytes=args.size_mib << 20, steps=args.steps, settle_s=args.settle
    )
    guard = Guard.for_host()  # floor: the larger of 2 GiB and 10% of MemTotal
    inventory = discover(options)
    (plan,) = plan_audit(options, inventory, guard.floor_bytes)
    if plan.skip_reason is not None:
        print(f"{plan.setup}: cannot run here: {plan.skip_reason}", file=sys.stderr)
        return 3

    def show(sample: Sample) -> None:
        if sample.phase == "alloc":
            print(f"  {sample.device_bytes >> 20:6d} MiB allocated", flush=True)

    run = run_setup(plan, guard=guard, on_sample=show)
    result = analyze_run(run)
    if run.simulated:
        print("(simulated Level Zero driver: simulator numbers, not hardware results)")
    elif run.host_memory:
        print("(device memory is host memory here: about 1024 MiB/GiB is expected)")
    if run.reason:
        print(f"{run.status}: {run.reason}")
    for name, why in result.passed_over.items():
        print(f"  passed over {name}: {why}")
    fit = result.fit(result.deciding_signal) if result.deciding_signal else None
    slope = "-" if fit is None or fit.slope is None else f"{fit.slope:.0f}"
    error = "-" if fit is None or fit.uncertainty is None else f"{fit.uncertainty:.0f}"
    print(f"{run.setup}: {result.verdict} {slope} +/-{error} MiB/GiB by {result.deciding_signal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
