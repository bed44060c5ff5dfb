"""`python -m amrita_sense`: which runtime and core are loaded, from where and why, the installed
distributions, and a warning for each broken mix found (see `amrita_sense_turbo.report`).

`python -m amrita_sense graph ...` draws a rendered graph instead (`amrita_sense.pictures.cli`);
`python -m amrita_sense inspect ...` serves the read-only run inspector (`amrita_sense.inspector.cli`);
`python -m amrita_sense worker ...` resumes waiting runs as they become due (`amrita_sense.durable.waits.cli`)."""

import sys

from amrita_sense_turbo.report import main

if __name__ == "__main__":  # package walkers import __main__ modules too
    if sys.argv[1:2] == ["graph"]:
        from amrita_sense.pictures import cli

        sys.exit(cli.main(sys.argv[1:]))
    if sys.argv[1:2] == ["inspect"]:
        from amrita_sense.inspector import cli as inspect_cli

        sys.exit(inspect_cli.main(sys.argv[1:]))
    if sys.argv[1:2] == ["worker"]:
        from amrita_sense.durable.waits import cli as worker_cli

        sys.exit(worker_cli.main(sys.argv[1:]))
    sys.exit(main())
