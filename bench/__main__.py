"""`python -m bench` in a checkout: the same runner as `python -m amrita_sense.bench`."""

import sys

from amrita_sense.bench.runner import main

if __name__ == "__main__":
    sys.exit(main())
