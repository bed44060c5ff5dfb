"""The inspector's page in a real headless Chromium (Selenium), for the browser test and
`scripts/inspector_screenshots.py`.

`chromium(browser, driver)` starts Debian's `chromium` through its `chromedriver` (both paths
given: Selenium never looks for or downloads a driver) with the performance log on, so that
`requested_urls(driver)` can list every request the page made (`Network.requestWillBeSent`).
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

WINDOW = (1400, 1000)
WAIT = 60


@contextlib.contextmanager
def chromium(browser: str, driver: str) -> Iterator[Any]:
    """A headless Chromium session, closed after."""
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    try:
        session.set_page_load_timeout(WAIT)
        yield session
    finally:
        session.quit()


def wait_for(session: Any, css: str) -> Any:
    """The element `css` selects, once it is there."""
    return WebDriverWait(session, WAIT).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css)))


def pick_run(session: Any, run_id: str) -> Any:
    """Click the run's link in the list; the run's section once the new page shows it."""
    rows = session.find_elements(By.CSS_SELECTOR, "#run-list tr.run-row")
    row = next(row for row in rows if row.get_attribute("data-run-id") == run_id)
    row.find_element(By.CSS_SELECTOR, "a.run-link").click()
    WebDriverWait(session, WAIT).until(
        lambda s: any(e.get_attribute("data-run-id") == run_id for e in s.find_elements(By.CSS_SELECTOR, "section#run"))
    )
    return session.find_element(By.CSS_SELECTOR, "section#run")


def requested_urls(session: Any) -> list[str]:
    """Every URL the browser requested since the last call (from the performance log)."""
    urls = []
    for entry in session.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def screenshots(session: Any, url: str, out_dir: Path, run_id: str = "parked") -> tuple[Path, Path]:
    """The run list and the run `run_id` with its graph, as `inspector-runs.png` / `inspector-run.png`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    session.get(url)
    wait_for(session, "#run-list")
    runs = out_dir / "inspector-runs.png"
    session.save_screenshot(str(runs))
    pick_run(session, run_id)
    wait_for(session, "figure#graph svg")
    run = out_dir / "inspector-run.png"
    run.write_bytes(full_page_png(session))
    return runs, run


def full_page_png(session: Any) -> bytes:
    """The whole page as PNG bytes, beyond the window's height (Chrome DevTools' capture)."""
    width, height = session.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
    )
    clip = {"x": 0, "y": 0, "width": int(width), "height": int(height), "scale": 1}
    shot = session.execute_cdp_cmd("Page.captureScreenshot", {"captureBeyondViewport": True, "clip": clip})
    return base64.b64decode(shot["data"])
