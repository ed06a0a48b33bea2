"""Run the l0mem command line: ``python -m l0mem``.

What it may import: :mod:`l0mem._entry` only.
"""

from l0mem._entry import main

if __name__ == "__main__":
    main()
