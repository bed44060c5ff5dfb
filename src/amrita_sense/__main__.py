"""`python -m amrita_sense`: which runtime and core are loaded, from where and why, the installed
distributions, and a warning for each broken mix found (see `amrita_sense_turbo.report`)."""

import sys

from amrita_sense_turbo.report import main

sys.exit(main())
