"""`python -m amrita_sense_turbo`: the runtime report, whichever runtime `amrita_sense` selects."""

import sys

from amrita_sense_turbo.report import main

if __name__ == "__main__":  # package walkers import __main__ modules too
    sys.exit(main())
