"""`amrita_sense.logging`: a private loguru logger configured as 1.1.3 configures it.

What a process prints is checked in fresh interpreters (the default sink is the
`sys.stdout` of the moment the module is imported).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| (?P<level>[A-Z]+) *\| (?P<where>\S+) \| (?P<message>.*)$")

SCRIPT = textwrap.dedent(
    """
    import amrita_sense.logging as sense_logging
    from amrita_sense.logging import logger
    logger.trace("t-line")
    logger.debug("d-line")
    logger.info("i-line")
    logger.success("s-line")
    logger.warning("w-line")
    logger.bind(user="u").error("e-line")
    try:
        raise ValueError("boom")
    except ValueError as err:
        logger.opt(exception=err).error("tool failed")
    sense_logging.debug_log("quiet-debug-log")
    sense_logging.debug = True
    sense_logging.debug_log("loud-debug-log")
    """
)


def _run(code: str, log_level: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LOG_LEVEL"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    if log_level is not None:
        env["LOG_LEVEL"] = log_level
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def _messages(stdout: str) -> list[tuple[str, str]]:
    return [(m["level"], m["message"]) for m in map(LINE.match, stdout.splitlines()) if m]


def test_logger_is_a_private_loguru_logger():
    import loguru

    from amrita_sense.logging import logger, logger_id

    assert isinstance(logger, type(loguru.logger)) and logger is not loguru.logger
    assert isinstance(logger_id.value, int)


def test_default_sink_prints_info_and_above_to_stdout_in_1_1_3s_format():
    done = _run(SCRIPT)
    assert done.returncode == 0, done.stderr
    assert _messages(done.stdout) == [
        ("INFO", "i-line"),
        ("SUCCESS", "s-line"),
        ("WARNING", "w-line"),
        ("ERROR", "e-line"),
        ("ERROR", "tool failed"),
    ]
    first = LINE.match(done.stdout.splitlines()[0])
    assert first["where"] == "__main__:<module>:6"
    assert "Traceback (most recent call last):" in done.stdout and "ValueError: boom" in done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("TRACE", ["t-line", "d-line", "i-line", "s-line", "w-line", "e-line", "tool failed", "loud-debug-log"]),
        ("DEBUG", ["d-line", "i-line", "s-line", "w-line", "e-line", "tool failed", "loud-debug-log"]),
        ("SUCCESS", ["s-line", "w-line", "e-line", "tool failed"]),
        ("ERROR", ["e-line", "tool failed"]),
        ("warning", ["w-line", "e-line", "tool failed"]),
        ("30", ["w-line", "e-line", "tool failed"]),
    ],
)
def test_log_level_accepts_loguru_level_names_and_numbers(level, expected):
    done = _run(SCRIPT, level)
    assert done.returncode == 0, done.stderr
    assert [message for _, message in _messages(done.stdout)] == expected


def test_an_unknown_log_level_means_info_with_one_warning():
    done = _run(SCRIPT, "LOUD")
    assert done.returncode == 0, done.stderr
    assert [message for _, message in _messages(done.stdout)][:2] == ["i-line", "s-line"]
    assert done.stderr.count("LOG_LEVEL='LOUD' is not a log level") == 1


def test_log_level_is_read_when_a_record_is_emitted():
    code = "import os\nfrom amrita_sense.logging import logger\nlogger.debug('before')\nos.environ['LOG_LEVEL'] = 'DEBUG'\nlogger.debug('after')"
    assert [m for _, m in _messages(_run(code).stdout)] == ["after"]


def test_applications_replace_the_default_sink_by_its_id():
    code = textwrap.dedent(
        """
        import sys
        from amrita_sense.logging import logger, logger_id
        logger.remove(logger_id.value)
        logger.info("dropped")
        logger.add(sys.stderr, format="{level}:{message}:{extra}")
        logger.bind(chat="c1").info("kept")
        """
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == "INFO:kept:{'chat': 'c1'}\n"


def test_the_library_logs_through_its_own_logger_not_the_global_one():
    code = "import loguru, amrita_sense\nfrom amrita_sense.logging import logger\nlogger.info('mine')\n"
    done = _run(code)
    assert [m for _, m in _messages(done.stdout)] == ["mine"] and done.stderr == ""


def test_stdlib_records_forwarded_through_loguru_handler_keep_their_caller():
    code = textwrap.dedent(
        """
        import logging
        from amrita_sense.logging import LoguruHandler
        log = logging.getLogger("app")
        log.addHandler(LoguruHandler())
        log.warning("from %s", "stdlib")
        """
    )
    lines = [LINE.match(line) for line in _run(code).stdout.splitlines()]
    assert [(m["level"], m["where"], m["message"]) for m in lines if m] == [
        ("WARNING", "__main__:<module>:6", "from stdlib")
    ]


def test_engine_debug_lines_are_built_only_when_a_sink_can_take_them(monkeypatch):
    from amrita_sense.logging import engine_debug_enabled, logger

    monkeypatch.delenv("LOG_LEVEL", raising=False)
    assert not engine_debug_enabled()
    monkeypatch.setenv("LOG_LEVEL", "DEBUG")
    assert engine_debug_enabled()
    monkeypatch.setenv("LOG_LEVEL", "INFO")
    assert not engine_debug_enabled()
    quiet = logger.add(lambda _message: None, level="INFO")
    loud = logger.add(lambda _message: None, level="DEBUG")
    try:
        assert engine_debug_enabled()
        logger.remove(loud)
        assert not engine_debug_enabled()
    finally:
        logger.remove(quiet)
