"""`python -m amrita_sense.bench`: the comparison runner (see `amrita_sense.bench.runner`)."""

import sys

from amrita_sense.bench.runner import main

if __name__ == "__main__":  # package walkers import __main__ modules too
    sys.exit(main())
