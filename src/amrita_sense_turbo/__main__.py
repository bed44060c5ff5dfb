"""`python -m amrita_sense_turbo`: the runtime report, whichever runtime `amrita_sense` selects."""

import sys

from amrita_sense_turbo.report import main

sys.exit(main())
