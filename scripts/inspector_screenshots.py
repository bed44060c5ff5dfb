"""Regenerate docs/images/inspector-runs.png and docs/images/inspector-run.png.

    PYTHONPATH=src python scripts/inspector_screenshots.py [OUT_DIR]

Fills a throwaway SQLite store with the runs of the inspector's tests
(`tests/support/inspector_programs.py`), serves it with `python -m amrita_sense inspect`, and
photographs the run list and a parked run with its graph in headless Chromium (Debian's
`chromium` and `chromium-driver`, Selenium, Graphviz and the `[inspect]` extra are needed).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.inspector_browser import chromium, screenshots  # noqa: E402
from support.inspector_support import GRAPH_TARGET, running_inspector, sqlite_store  # noqa: E402


def main(argv: list[str]) -> int:
    out_dir = Path(argv[0]) if argv else ROOT / "docs" / "images"
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or driver is None:
        sys.stderr.write("needs Chromium and its driver: apt-get install chromium chromium-driver\n")
        return 2
    with tempfile.TemporaryDirectory() as work:
        path, _ = sqlite_store(Path(work))
        with running_inspector("--store", path, "--graph", GRAPH_TARGET) as url, chromium(browser, driver) as session:
            for shot in screenshots(session, url, out_dir):
                print(shot)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
