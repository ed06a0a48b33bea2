# %% [markdown]
# # Host memory around your own allocations
#
# A notebook in the percent format (open it with Jupyter's jupytext, or VS
# Code's "Run Cell"; `python examples/host_cost_notebook.py` runs it whole).
# It measures what one's own Level Zero allocations cost the host, with
# `l0mem.probe.host_cost`, the way `l0mem audit` does for the paths it knows:
# a positive cost is memory taken from the host, the same sign for every
# signal.
#
# It needs two Level Zero devices. Without an Intel GPU, run it on l0mem's
# simulated driver (its numbers are the simulator's, never a hardware
# result), as `l0mem demo` does: in a checkout,
# `ZE_ENABLE_ALT_DRIVERS=$(python -c 'from tests.support import sim; print(sim.build())') ZESIM_DEVICES=2 ZESIM_MIRROR=peer-resident python examples/host_cost_notebook.py`.

# %%
import statistics
import sys

from l0mem.backends import NoDeviceError, open_backend
from l0mem.estimate import median_interval
from l0mem.probe import host_cost

SIZE = 256 << 20  # one allocation of 256 MiB
REPEATS = 7

try:
    backend = open_backend("l0", [0, 1])  # one context holding both devices
except NoDeviceError as exc:
    sys.exit(f"host_cost_notebook: needs two Level Zero devices (see the first cell): {exc}")
print(f"allocating on {backend.device_name(0)}, made resident on {backend.device_name(1)}")

# %% [markdown]
# ## One block
#
# Everything in the `with` block is measured: the allocation, and the
# residency on the peer that some driver stacks back with pinned host pages.
# Every other process's memory that moved meanwhile is in it too.

# %%
with host_cost() as cost:
    buf = backend.allocate(0, SIZE)
    backend.make_resident(buf, 1)
print(f"host.available: {cost.per_gib(SIZE):.0f} MiB per GiB of device memory")
print(f"Shmem:          {cost.per_gib(SIZE, 'meminfo.Shmem'):.0f} MiB per GiB")
buf.close()

# %% [markdown]
# ## Repeated, with an interval
#
# On a busy machine one block is one window that a neighbour may have
# disturbed. Repeat it, undoing it in between, and take the median with a
# distribution-free interval: a neighbour moves a few of the blocks, not the
# median. The same with and without the residency call shows which step pays.


# %%
def per_gib(resident: bool) -> list[float]:
    """Return the host's cost of one allocation (and its residency), MiB per GiB, REPEATS times."""
    out = []
    for _ in range(REPEATS):
        with host_cost() as cost:
            buf = backend.allocate(0, SIZE)
            if resident:
                backend.make_resident(buf, 1)
        buf.close()
        value = cost.per_gib(SIZE)
        if value is not None:
            out.append(value)
    return out


for resident in (True, False):
    costs = per_gib(resident)
    iv = median_interval(costs, 0.95)
    what = "allocate + make resident" if resident else "allocate only"
    print(
        f"{what}: median {iv.median:.0f} MiB/GiB ({iv.low:.0f} to {iv.high:.0f} at "
        f"{iv.coverage:.0%}), spread {statistics.pstdev(costs):.0f}"
    )

# %%
backend.close()
