"""CI: check a release wheel of amrita-sense-turbo (python .ci/check_wheel.py WHEEL [--pure]).

Compiled wheel: manylinux-tagged; the compiled core, its .pyi stub and .pxd in the runtime's own
directory; the core stripped (no symbol table, no debug sections), under MAX_CORE_BYTES, with no
RUNPATH/RPATH of the build machine. Either wheel: the import hook, no generated C, nothing under
amrita-sense's own directory, the console script and the pytest plugin's entry point.
Needs pyelftools (an auditwheel dependency) for the compiled wheel.
"""

import io
import sys
import zipfile

RUNTIME = "amrita_sense_turbo/runtime/amrita_sense/"
MAX_CORE_BYTES = 1_000_000  # stripped: about 0.45 MB; with debug information: about 2.9 MB


def fail(message: str) -> None:
    sys.exit(f"check_wheel: {message}")


def check_common(names: list[str], read) -> None:
    if "amrita_sense_turbo.pth" not in names:
        fail("the wheel holds no import hook")
    if [n for n in names if n.endswith(".c")]:
        fail("generated C sources leaked into the wheel")
    shared = [n for n in names if n.startswith("amrita_sense/")]
    if shared:
        fail(f"the wheel writes into amrita-sense's directory: {shared}")
    points = read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
    for wanted in (
        "amrita-sense-bench = amrita_sense.bench.runner:main",
        "amrita_sense_bench = amrita_sense_turbo.pytest_plugin",
    ):
        if wanted not in points:
            fail(f"entry point missing: {wanted}")
    if RUNTIME + "bench/_worker.py" not in names:
        fail("the benchmark worker script is not in the wheel")
    peer_files = ("__init__", "venvs", "langgraph_peer", "pydantic_graph_peer", "burr_peer", "llamaindex_peer")
    missing = [f for f in peer_files if f"{RUNTIME}bench/peers/{f}.py" not in names]
    if missing:
        fail(f"the benchmark's peers are not all in the wheel: {missing} missing")


def check_core(data: bytes, name: str) -> None:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    sections = [s.name for s in elf.iter_sections()]
    unstripped = [s for s in sections if s == ".symtab" or s.startswith(".debug")]
    if unstripped:
        fail(f"{name} is not stripped: {unstripped}")
    if len(data) > MAX_CORE_BYTES:
        fail(f"{name} is {len(data)} bytes (more than {MAX_CORE_BYTES})")
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            paths = [
                t.runpath if t.entry.d_tag == "DT_RUNPATH" else t.rpath
                for t in section.iter_tags()
                if t.entry.d_tag in ("DT_RUNPATH", "DT_RPATH")
            ]
            if any(not p.startswith("$ORIGIN") for p in paths):
                fail(f"{name} has a run-time search path of the build machine: {paths}")
    print(f"compiled core {name}: {len(data)} bytes, stripped, no RUNPATH")


def main() -> None:
    wheel, pure = sys.argv[1], "--pure" in sys.argv[2:]
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    check_common(names, lambda n: archive.read(n).decode())
    cores = [n for n in names if n.startswith(RUNTIME + "core/_sense_core.") and n.endswith((".so", ".pyd"))]
    if pure:
        if cores or not wheel.endswith("-py3-none-any.whl"):
            fail(f"a pure wheel must be py3-none-any without a compiled core: {wheel}, {cores}")
        print(f"pure wheel ok: {wheel}")
        return
    if "-manylinux" not in wheel:
        fail(f"not manylinux-tagged: {wheel}")
    if not cores:
        fail(f"the wheel holds no compiled core in {RUNTIME}")
    for part in (
        "_state",
        "_structures",
        "_checks",
        "_async_pin",
        "_events",
    ):  # the core's other compiled parts (core.COMPILED_PARTS)
        if not any(n.startswith(f"{RUNTIME}core/{part}.") and n.endswith((".so", ".pyd")) for n in names):
            fail(f"the wheel holds no compiled core/{part} in {RUNTIME}")
    for stem in (
        "_sense_core",
        "_state",
        "_structures",
        "_checks",
        "_async_pin",
        "_events",
    ):  # each part's one source, and its pure build
        pure = "pure" if stem == "_sense_core" else f"pure{stem}"
        for typed in (f"core/{stem}.py", f"core/{pure}.py"):
            if RUNTIME + typed not in names:
                fail(f"{typed} is not in the wheel beside the compiled core")
    # the save path's compiled parts (setup.py's SAVE_MODULES), each with its one source and its pure build
    for folder, stem in (("durable/snapshots", "_plain_snapshot"), ("durable/checkpointing", "_save_at_once")):
        if not any(n.startswith(f"{RUNTIME}{folder}/{stem}.") and n.endswith((".so", ".pyd")) for n in names):
            fail(f"the wheel holds no compiled {folder}/{stem} in {RUNTIME}")
        for typed in (f"{folder}/{stem}.py", f"{folder}/pure{stem}.py"):
            if RUNTIME + typed not in names:
                fail(f"{typed} is not in the wheel beside the compiled save path")
    if RUNTIME + "py.typed" not in names:
        fail("py.typed is not in the wheel")
    if any(n.endswith((".pyx", ".pxd", ".c")) for n in names):
        fail("the wheel ships Cython or C sources")
    check_core(archive.read(cores[0]), cores[0])
    print(f"compiled wheel ok: {wheel}")


if __name__ == "__main__":
    main()
