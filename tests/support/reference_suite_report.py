"""A pytest plugin for `test_reference_suite.py`: the outcome of every test of the run it is loaded
into (`-p _reference_suite_report`), and the `amrita_sense` that run imported, written as JSON to
the file AMRITA_SENSE_REF_REPORT names when the session ends."""

from __future__ import annotations

import json
import os

_outcomes: dict[str, str] = {}
_failures: dict[str, str] = {}


def pytest_runtest_logreport(report):
    if report.outcome == "passed" and report.when != "call":
        return
    if _outcomes.get(report.nodeid) in (None, "passed"):  # a failed setup or teardown wins
        _outcomes[report.nodeid] = report.outcome
    if report.failed:
        _failures[report.nodeid] = report.longreprtext[-1500:]


def pytest_collectreport(report):
    if report.failed:
        _outcomes[report.nodeid or "<collection>"] = "error"
        _failures[report.nodeid or "<collection>"] = report.longreprtext[-1500:]


def pytest_sessionfinish(session):
    import amrita_sense

    found = {
        "outcomes": _outcomes,
        "failures": _failures,
        "package": amrita_sense.__file__,
        "implementation": getattr(amrita_sense, "IMPLEMENTATION", None),
    }
    with open(os.environ["AMRITA_SENSE_REF_REPORT"], "w", encoding="utf-8") as out:
        json.dump(found, out)
