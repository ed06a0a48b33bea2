"""``python -m l0mem.audit.cost_child``: measure one environment's remedy costs (l0mem.audit.costs).

A module of its own, which the package does not import, so that running it
with ``-m`` loads it once.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    """Measure the costs for the spec on stdin; print one JSON line (an error too)."""
    from l0mem.audit.costs import measure_here

    try:
        spec = json.loads(sys.stdin.read())
        out = measure_here(spec)
    except Exception as exc:  # the parent reports it in the cost, in one line
        out = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
