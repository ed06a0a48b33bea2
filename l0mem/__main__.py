"""Run the l0mem command line: ``python -m l0mem``.

What it may import: :mod:`l0mem.cli` only.
"""

from l0mem.cli import main

if __name__ == "__main__":
    main()
