"""Install the requirements of this project's extras (`python .ci/test_requirements.py test bench`) into
the running Python, leaving out on a free-threaded interpreter the ones that publish no free-threaded
wheels (no environment marker can tell that build apart yet; PEP 780 is a draft).

psycopg's binary build is one: there its tests skip (tests/support/postgres_cluster.py), and every other
job runs them. Used by the hosted free-threaded jobs (.github/workflows/ci.yml, wheels.yml)."""

import pathlib
import subprocess
import sys
import sysconfig

NO_FREE_THREADED_WHEELS = ("psycopg[binary]",)

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "tomli"], check=True)
    import tomli as tomllib


def requirements(extras: list[str]) -> list[str]:
    project = tomllib.loads((pathlib.Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
    wanted = [req for extra in extras for req in project["optional-dependencies"][extra]]
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        wanted = [req for req in wanted if not req.startswith(NO_FREE_THREADED_WHEELS)]
    return wanted


if __name__ == "__main__":
    subprocess.run([sys.executable, "-m", "pip", "install", *requirements(sys.argv[1:])], check=True)
