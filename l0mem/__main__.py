"""Run the l0mem command line: ``python -m l0mem``."""

from l0mem.cli import main

if __name__ == "__main__":
    main()
