"""The inspector's page driven in a real headless Chromium: pick a run, see its graph and its
history; every request the page makes goes to 127.0.0.1."""

from __future__ import annotations

import pytest

from amrita_sense.pictures import picture_of
from support import inspector_programs
from support.inspector_support import GRAPH_TARGET, require_browser, running_inspector, sqlite_store
from support.pictures_support import require_dot


@pytest.fixture(scope="module")
def browser_paths():
    return require_browser()


@pytest.fixture
def page(browser_paths, tmp_path):
    """`(session, url, EXPECTED)`: Chromium over an inspector serving a filled SQLite store."""
    from support.inspector_browser import chromium

    require_dot()
    path, expected = sqlite_store(tmp_path)
    with running_inspector("--store", path, "--graph", GRAPH_TARGET) as url, chromium(*browser_paths) as session:
        yield session, url, expected


def test_pick_a_run_see_its_graph_and_history_all_from_127_0_0_1(page, tmp_path):
    from selenium.webdriver.common.by import By

    from support.inspector_browser import pick_run, requested_urls, screenshots, wait_for

    session, url, expected = page
    session.get(url)
    rows = wait_for(session, "#run-list").find_elements(By.CSS_SELECTOR, "tr.run-row")
    assert {row.get_attribute("data-run-id") for row in rows} == set(expected)

    section = pick_run(session, "parked")
    node = picture_of(inspector_programs.GRAPH).node_for((3,))
    assert node is not None
    figure = wait_for(session, "figure#graph")
    assert figure.get_attribute("data-pointer-node") == node.id
    marked = figure.find_element(By.XPATH, f".//*[local-name()='g'][*[local-name()='title'][text()='{node.id}']]")
    assert "=> pointer" in marked.text and "gamma" in marked.text
    assert "NodeSuspend::gamma" in section.find_element(By.ID, "position").text

    pick_run(session, "with-history")
    entries = session.find_elements(By.CSS_SELECTOR, "table#history a.history-link")
    assert len(entries) == expected["with-history"].history
    entries[0].click()
    wait_for(session, "table#history tr.current[data-version='1']")
    assert "version 1" in session.find_element(By.CSS_SELECTOR, "#run h2").text

    hostile = pick_run(session, inspector_programs.HOSTILE_ID)  # no alert: the id is text
    assert hostile.find_element(By.TAG_NAME, "h2").text.startswith(inspector_programs.HOSTILE_ID)
    pick_run(session, "panicked")
    assert inspector_programs.PANIC_MESSAGE in session.find_element(By.ID, "traceback").text

    runs_png, run_png = screenshots(session, url, tmp_path / "shots")
    assert runs_png.stat().st_size > 10_000 and run_png.stat().st_size > 10_000

    urls = requested_urls(session)
    assert any(u.endswith("/static/inspector.css") for u in urls)
    foreign = [u for u in urls if not u.startswith(url) and not u.startswith("data:")]
    assert url.startswith("http://127.0.0.1:") and not foreign, foreign
