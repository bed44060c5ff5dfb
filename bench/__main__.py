"""`python -m bench`: the comparison runner (see `bench.runner`)."""

import sys

from bench.runner import main

sys.exit(main())
