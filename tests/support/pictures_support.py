"""Programs and tools for the picture tests (`tests/test_pictures_*.py`).

- `KIND_PROGRAMS`: one small rendered graph per instruction kind (the golden pictures);
- `random_program(seed)`: a random program using every instruction kind, nested;
- `require_dot()` / `require_mermaid()`: the external parsers, skipped with a reason when
  missing, a failure instead when AMRITA_SENSE_REQUIRE_PICTURES=1;
- `parse_dot(texts)` / `parse_mermaid(texts)`: each text parsed by Graphviz / Mermaid's own
  parser (in node), batched, one error (or None) per text;
- `check_golden(name, text)`: compare with `tests/golden/pictures/<name>`, rewritten when
  AMRITA_SENSE_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amrita_sense import NodeCompose
from amrita_sense.instructions import (
    ALIAS,
    ARCHIVED_NODES,
    BATCH_RUN,
    BREAK_LOOP,
    CALL,
    DO,
    FN,
    FUN_BLOCK,
    IF,
    INT,
    INTER_FN,
    INVOKE,
    JMP,
    NATIVE_DO,
    NATIVE_IF,
    NATIVE_WHILE,
    NOP,
    RESET,
    SUSPEND,
    WHILE,
    Try,
)
from amrita_sense.node.wrapper import Node

HERE = Path(__file__).resolve().parent
GOLDEN_DIR = HERE.parent / "golden" / "pictures"
MERMAID_SCRIPT = HERE / "mermaid_parse.mjs"
MERMAID_VERSION = "11.12.0"
JSDOM_VERSION = "26.1.0"
MERMAID_DIR = Path(
    os.environ.get("AMRITA_SENSE_MERMAID_DIR") or Path.home() / ".cache" / "amrita-sense-tests" / "mermaid"
)
"""Where `mermaid` and `jsdom` are installed for the tests (`npm install --prefix`)."""

REQUIRE_ENV = "AMRITA_SENSE_REQUIRE_PICTURES"
UPDATE_ENV = "AMRITA_SENSE_UPDATE_GOLDEN"
DOT_BATCH = 200
MERMAID_BATCH = 250
MERMAID_WORKERS = 2


def _required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def missing(reason: str) -> None:
    """Skip the test for `reason`, or fail it when the picture tools are required."""
    if _required():
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
    pytest.skip(reason)


# ----- nodes ---------------------------------------------------------------------------------


@Node()
def fetch() -> None:
    """A plain step."""


@Node()
def store() -> None:
    """Another plain step."""


@Node()
def ready() -> bool:
    """A condition."""
    return False


@Node()
def handle() -> None:
    """A handler."""


@Node(tag='say "hi" <b>&amp;</b> | #x; [ok] {x}\nnext line: ünï 😀 \\ `tick` %% end')
def odd_tag() -> None:
    """A node whose tag holds every character the exporters must escape."""


WEIRD_TAGS = [
    "plain",
    'quote"d',
    "brack[et]s",
    "pipe|bar",
    "hash#1;",
    "<html>&amp;",
    "new\nline",
    "tab\tand\x07bell",
    "ünïcödé ✓ 漢字",
    "emoji 😀",
    "back\\slash",
    "end",
    "graph",
    "subgraph",
    "style",
    "%% comment",
    "a --> b",
    "`md`",
    "fa:fa-car",
    "-->|x|",
    "{curly}",
    "(paren)",
    "semi;colon",
    "x\ud800y",
]
"""Tags for random nodes: the characters and words Mermaid and DOT treat specially."""


def _tagged(tag: str) -> Any:
    def work() -> None:
        return None

    return Node(tag=tag)(work)


def _cond(tag: str = "cond") -> Any:
    def test() -> bool:
        return False

    return Node(tag=tag)(test)


# ----- one program per instruction kind ---------------------------------------------------------


def _sequence() -> Any:
    return NodeCompose(fetch, store, handle).render()


def _if_elif_else() -> Any:
    return NodeCompose(fetch, IF(ready, store).ELIF(ready, handle).ELSE(fetch), store).render()


def _while() -> Any:
    return NodeCompose(fetch, WHILE(ready).ACTION(store), handle).render()


def _do_while() -> Any:
    return NodeCompose(DO(store).WHILE(ready), handle).render()


def _native_while() -> Any:
    return NodeCompose(NATIVE_WHILE(ready).ACTION(NodeCompose(fetch, BREAK_LOOP(), store))).render()


def _native_do() -> Any:
    return NodeCompose(NATIVE_DO(NodeCompose(fetch, store)).WHILE(ready), handle).render()


def _native_if() -> Any:
    return NodeCompose(
        NATIVE_IF(ready, NodeCompose(fetch, store)).ELIF(ready, handle).ELSE(NodeCompose(store))
    ).render()


def _jumps() -> Any:
    return NodeCompose(fetch, JMP("done"), store, ALIAS(handle, "done"), JMP([0])).render()


def _call_ret() -> Any:
    return NodeCompose(fetch, CALL("routine"), store, FN("routine", NodeCompose(handle, fetch))).render()


def _interrupt() -> Any:
    return NodeCompose(fetch, INT("isr"), store, INTER_FN("isr", handle)).render()


def _try() -> Any:
    block = Try(fetch).CATCH(ValueError, handle).CATCH((KeyError, TypeError), store).THEN(store).FINALLY(handle)
    return NodeCompose(block, fetch).render()


def _invoke() -> Any:
    return NodeCompose(INVOKE("helper"), fetch, ARCHIVED_NODES(ALIAS(handle, "helper"), store)).render()


def _fun_block() -> Any:
    inner = NodeCompose(fetch, IF(ready, store)).render()
    return NodeCompose(fetch, FUN_BLOCK(inner), handle).render()


def _batch_run() -> Any:
    return NodeCompose(BATCH_RUN(fetch, NodeCompose(store, handle), WHILE(ready).ACTION(fetch)), store).render()


def _segments() -> Any:
    return NodeCompose(fetch, NodeCompose(store, NodeCompose(handle), NodeCompose()), SUSPEND, RESET).render()


def _escaping() -> Any:
    return NodeCompose(odd_tag, ALIAS(_tagged("x"), 'al"i<a>s'), JMP('al"i<a>s')).render()


KIND_PROGRAMS: dict[str, Callable[[], Any]] = {
    "sequence": _sequence,
    "if_elif_else": _if_elif_else,
    "while": _while,
    "do_while": _do_while,
    "native_while": _native_while,
    "native_do": _native_do,
    "native_if": _native_if,
    "jumps": _jumps,
    "call_ret": _call_ret,
    "interrupt": _interrupt,
    "try": _try,
    "invoke": _invoke,
    "fun_block": _fun_block,
    "batch_run": _batch_run,
    "segments": _segments,
    "escaping": _escaping,
}
"""One small graph per instruction kind (a fresh render each call)."""


# ----- random programs -------------------------------------------------------------------------


class _RandomProgram:
    """Builds one random source compose; aliases are unique, jumps name aliases that exist."""

    def __init__(self, rng: random.Random, depth: int = 3):
        self.rng = rng
        self.depth = depth
        self.aliases: list[str] = []
        self.routines: list[str] = []
        self.isrs: list[str] = []
        self.archived: list[str] = []

    def node(self) -> Any:
        rng = self.rng
        choice = rng.random()
        if choice < 0.5:
            return _tagged(rng.choice(WEIRD_TAGS))
        if choice < 0.7:
            return rng.choice([fetch, store, handle, odd_tag])
        return _cond(rng.choice(WEIRD_TAGS))

    def fresh_name(self) -> str:
        return f"a{len(self.aliases) + len(self.routines) + len(self.isrs) + len(self.archived)}"

    def body(self, depth: int, size: int | None = None) -> NodeCompose:
        count = size if size is not None else self.rng.randint(1, 4)
        return NodeCompose(*(self.item(depth) for _ in range(count)))

    def item(self, depth: int) -> Any:
        rng = self.rng
        if depth <= 0:
            return self.node()
        maker = rng.choice(self.MAKERS)
        return maker(self, depth - 1)

    def _plain(self, depth: int) -> Any:
        return self.node()

    def _if(self, depth: int) -> Any:
        clause: Any = IF(_cond(), self.node())
        for _ in range(self.rng.randint(0, 2)):
            clause = clause.ELIF(_cond(), self.node())
        return clause.ELSE(self.node()) if self.rng.random() < 0.5 else clause

    def _while(self, depth: int) -> Any:
        return WHILE(_cond()).ACTION(self.node())

    def _do(self, depth: int) -> Any:
        return DO(self.node()).WHILE(_cond())

    def _native_while(self, depth: int) -> Any:
        body = self.body(depth)
        if self.rng.random() < 0.4:
            body = body >> BREAK_LOOP()
        return NATIVE_WHILE(_cond()).ACTION(body)

    def _native_do(self, depth: int) -> Any:
        return NATIVE_DO(self.body(depth)).WHILE(_cond())

    def _native_if(self, depth: int) -> Any:
        clause = NATIVE_IF(_cond(), self.body(depth) if self.rng.random() < 0.5 else self.node())
        for _ in range(self.rng.randint(0, 2)):
            clause = clause.ELIF(_cond(), self.body(depth))
        return clause.ELSE(self.body(depth)) if self.rng.random() < 0.5 else clause

    def _try(self, depth: int) -> Any:
        block = Try(self.node())
        for _ in range(self.rng.randint(0, 2)):
            block = block.CATCH(self.rng.choice([ValueError, KeyError, (TypeError, OSError)]), self.node())
        if self.rng.random() < 0.5:
            block = block.THEN(self.node())
        if self.rng.random() < 0.5 or not block._catch_then:
            block = block.FINALLY(self.node())
        return block

    def _segment(self, depth: int) -> Any:
        return self.body(depth, self.rng.randint(0, 4))

    def _alias(self, depth: int) -> Any:
        name = self.fresh_name()
        self.aliases.append(name)
        return ALIAS(self.node(), name)

    def _archived(self, depth: int) -> Any:
        name = self.fresh_name()
        self.archived.append(name)
        return ARCHIVED_NODES(ALIAS(self.node(), name), self.node())

    def _routine(self, depth: int) -> Any:
        name = self.fresh_name()
        if self.rng.random() < 0.7:
            self.routines.append(name)
            return FN(name, self.body(depth))
        self.isrs.append(name)
        return INTER_FN(name, self.body(depth))

    def _fun_block(self, depth: int) -> Any:
        inner = _RandomProgram(self.rng, depth).compose(self.rng.randint(1, 3))
        return FUN_BLOCK(inner.render())

    def _batch(self, depth: int) -> Any:
        inner = _RandomProgram(self.rng, depth)  # its names live in its own graphs
        parts = [inner.node() if self.rng.random() < 0.5 else inner.body(depth) for _ in range(self.rng.randint(1, 3))]
        return BATCH_RUN(*parts)

    MAKERS = [
        _plain,
        _plain,
        _if,
        _while,
        _do,
        _native_while,
        _native_do,
        _native_if,
        _try,
        _segment,
        _alias,
        _archived,
        _routine,
        _fun_block,
        _batch,
    ]

    def references(self) -> list[Any]:
        """JMP / CALL / INT / INVOKE of the names the program defined, in random places."""
        rng = self.rng
        found: list[Any] = [JMP(name) for name in self.aliases if rng.random() < 0.7]
        found += [CALL(name) for name in self.routines]
        found += [INT(name) for name in self.isrs]
        found += [INVOKE(name) for name in self.archived]
        return found

    def compose(self, size: int) -> NodeCompose:
        items = [self.item(self.depth) for _ in range(size)]
        for reference in self.references():
            items.insert(self.rng.randint(0, len(items)), reference)
        if self.rng.random() < 0.2:
            items.append(self.rng.choice([SUSPEND, RESET, NOP]))
        return NodeCompose(*items)


def random_program(seed: int) -> Any:
    """A random rendered program (the same one for the same seed, in every process)."""
    rng = random.Random(seed)
    return _RandomProgram(rng, rng.randint(1, 3)).compose(rng.randint(1, 6)).render()


# ----- golden files ------------------------------------------------------------------------------


def check_golden(name: str, text: str) -> None:
    """`text` must equal the golden file `name` (rewritten instead when AMRITA_SENSE_UPDATE_GOLDEN=1)."""
    path = GOLDEN_DIR / name
    if os.environ.get(UPDATE_ENV, "") not in ("", "0"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
        return
    assert path.is_file(), f"no golden file {path}: run with {UPDATE_ENV}=1 to write it"
    expected = path.read_bytes().decode("utf-8")
    assert text == expected, f"{name} differs from its golden file (regenerate with {UPDATE_ENV}=1 if intended)"


# ----- Graphviz ----------------------------------------------------------------------------------


def require_dot() -> str:
    """The path of Graphviz's `dot` (skips, or fails when required, without it)."""
    program = shutil.which("dot")
    if program is None:
        missing("Graphviz's `dot` is not installed (apt-get install graphviz)")
    return program


def _dot_errors(program: str, texts: list[str]) -> list[str | None]:
    """Each text through `dot -Tcanon` at once; on a failure, each one alone to find it."""
    joined = "\n".join(texts).encode("utf-8")
    done = subprocess.run([program, "-Tcanon"], input=joined, capture_output=True, timeout=300, check=False)
    if done.returncode == 0 and not done.stderr.strip():
        return [None] * len(texts)
    if len(texts) == 1:
        return [done.stderr.decode("utf-8", "replace") or f"exit code {done.returncode}"]
    half = len(texts) // 2
    return _dot_errors(program, texts[:half]) + _dot_errors(program, texts[half:])


def parse_dot(texts: list[str]) -> list[str | None]:
    """Graphviz's verdict on each DOT text: None (it parsed, without a warning) or its message."""
    program = require_dot()
    version = subprocess.run([program, "-V"], capture_output=True, timeout=60, check=False).stderr

    def parse(unknown: list[str]) -> list[str | None]:
        found: list[str | None] = []
        for start in range(0, len(unknown), DOT_BATCH):
            found += _dot_errors(program, unknown[start : start + DOT_BATCH])
        return found

    return remembered_verdicts(ACCEPTED_DIR / "dot", version, texts, parse)


# ----- Verdicts already given --------------------------------------------------------------------

ACCEPTED_DIR = Path(
    os.environ.get("AMRITA_SENSE_ACCEPTED_DIR") or Path.home() / ".cache" / "amrita-sense-tests" / "accepted"
)
"""Texts a parser accepted, one empty file per text, named by the digest of the parser and the text."""


def remembered_verdicts(
    where: Path, parser: bytes, texts: list[str], parse: Callable[[list[str]], list[str | None]]
) -> list[str | None]:
    """`parse(texts)`, asking the parser only about texts it has not accepted before.

    A parser is deterministic: the same parser (`parser`: its version and harness, as bytes) gives
    the same verdict on the same bytes, so a text it accepted once, in this run or an earlier one (the
    other build's pass draws the same bytes), is accepted again without a call. Refusals are never
    remembered: a failing text is parsed again every time, and its message is fresh."""
    where.mkdir(parents=True, exist_ok=True)
    keys = [hashlib.sha256(parser + b"\0" + text.encode("utf-8", "surrogatepass")).hexdigest() for text in texts]
    unknown = [index for index, key in enumerate(keys) if not (where / key).exists()]
    verdicts: list[str | None] = [None] * len(texts)
    for index, verdict in zip(unknown, parse([texts[index] for index in unknown]) if unknown else []):
        verdicts[index] = verdict
        if verdict is None:
            (where / keys[index]).touch()
    return verdicts


# ----- Mermaid -----------------------------------------------------------------------------------


def _mermaid_installed(prefix: Path) -> bool:
    modules = prefix / "node_modules"
    return (modules / "mermaid" / "dist" / "mermaid.core.mjs").is_file() and (modules / "jsdom").is_dir()


@contextlib.contextmanager
def _install_lock(prefix: Path):
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test sessions (one per build) may install at once
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def install_mermaid(prefix: Path = MERMAID_DIR) -> Path:
    """`npm install --prefix <prefix> mermaid@<pinned> jsdom@<pinned>` unless already there."""
    if _mermaid_installed(prefix):
        return prefix
    npm = shutil.which("npm")
    if npm is None:
        missing("npm is not installed (needed once to install mermaid for the tests)")
    with _install_lock(prefix):
        if not _mermaid_installed(prefix):
            command = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund"]
            command += [f"mermaid@{MERMAID_VERSION}", f"jsdom@{JSDOM_VERSION}"]
            done = subprocess.run(command, capture_output=True, timeout=600, check=False)
            if done.returncode != 0 or not _mermaid_installed(prefix):
                message = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
                missing(f"`npm install mermaid@{MERMAID_VERSION}` failed: {message[0]}")
    return prefix


def require_mermaid() -> tuple[str, Path]:
    """`(node, prefix)`: the node program and the folder mermaid is installed in."""
    node = shutil.which("node")
    if node is None:
        missing("node is not installed (Mermaid's parser runs in node)")
    return node, install_mermaid()


def _start_mermaid(node: str, prefix: Path, batch: list[str]) -> subprocess.Popen:
    stream = tempfile.TemporaryFile()
    stream.write(json.dumps(batch).encode("utf-8", "surrogatepass"))
    stream.seek(0)
    command = [node, str(MERMAID_SCRIPT), str(prefix)]
    process = subprocess.Popen(command, stdin=stream, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stream.close()  # the child holds its own descriptor
    return process


def _mermaid_verdicts(process: subprocess.Popen) -> list[str | None]:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err.decode("utf-8", "replace")
    return json.loads(out)


def parse_mermaid(texts: list[str]) -> list[str | None]:
    """Mermaid's parser's verdict on each text: None (it parsed) or its error message. The texts
    are parsed in batches, `MERMAID_WORKERS` node processes at a time."""
    node, prefix = require_mermaid()

    def parse(unknown: list[str]) -> list[str | None]:
        batches = [unknown[start : start + MERMAID_BATCH] for start in range(0, len(unknown), MERMAID_BATCH)]
        found: list[str | None] = []
        for first in range(0, len(batches), MERMAID_WORKERS):
            running = [_start_mermaid(node, prefix, batch) for batch in batches[first : first + MERMAID_WORKERS]]
            for process in running:
                found += _mermaid_verdicts(process)
        return found

    parser = f"mermaid {MERMAID_VERSION} jsdom {JSDOM_VERSION}\n".encode() + MERMAID_SCRIPT.read_bytes()
    return remembered_verdicts(ACCEPTED_DIR / "mermaid", parser, texts, parse)


__all__ = [
    "GOLDEN_DIR",
    "KIND_PROGRAMS",
    "MERMAID_DIR",
    "check_golden",
    "install_mermaid",
    "missing",
    "parse_dot",
    "parse_mermaid",
    "random_program",
    "require_dot",
    "require_mermaid",
]
