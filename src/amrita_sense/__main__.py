"""`python -m amrita_sense`: which runtime and core are loaded, from where and why, the installed
distributions, and a warning for each broken mix found (see `amrita_sense_turbo.report`)."""

import sys

from amrita_sense_turbo.report import main

if __name__ == "__main__":  # package walkers import __main__ modules too
    sys.exit(main())
