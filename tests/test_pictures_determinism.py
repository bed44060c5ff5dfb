"""The pictures are the same bytes in every run, every process (whatever the hash seed) and on
both builds: the compiled core and the pure one (`AMRITA_SENSE_NO_EXTENSIONS=1`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amrita_sense.pictures import picture_of, to_dot, to_mermaid
from support.dual import compiled_core_importable
from support.pictures_support import KIND_PROGRAMS, random_program
from support.runtime_path import RUNTIME_DIR
from support.sampling import sized

TESTS_DIR = str(Path(__file__).resolve().parent)
SEEDS = sized(150)

SCRIPT = f"""
import hashlib, json, sys
from amrita_sense.pictures import picture_of, to_dot, to_mermaid
from support.pictures_support import KIND_PROGRAMS, random_program
graphs = [KIND_PROGRAMS[k]() for k in sorted(KIND_PROGRAMS)] + [random_program(s) for s in range({SEEDS})]
texts = []
for graph in graphs:
    picture = picture_of(graph)
    texts += [to_mermaid(picture), to_dot(picture)]
import amrita_sense
sys.stdout.write(json.dumps({{"core": amrita_sense.IMPLEMENTATION, "texts": texts}}))
"""


def _run(hash_seed: str, pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMRITA_SENSE_")}
    env["PYTHONPATH"] = os.pathsep.join([RUNTIME_DIR, TESTS_DIR])
    env["PYTHONHASHSEED"] = hash_seed
    if pure:
        env["AMRITA_SENSE_NO_EXTENSIONS"] = "1"
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def _in_process() -> list[str]:
    graphs = [KIND_PROGRAMS[k]() for k in sorted(KIND_PROGRAMS)] + [random_program(s) for s in range(SEEDS)]
    texts = []
    for graph in graphs:
        picture = picture_of(graph)
        texts += [to_mermaid(picture), to_dot(picture)]
    return texts


def _first_difference(a: list[str], b: list[str]) -> str:
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"text {index} differs:\n{x}\n---\n{y}"
    return f"lengths differ: {len(a)} != {len(b)}"


def test_two_processes_with_other_hash_seeds_draw_the_same_bytes():
    pure = os.environ.get("AMRITA_SENSE_NO_EXTENSIONS", "") not in ("", "0")
    one, two = _run("1", pure), _run("4242", pure)
    assert one["texts"] == two["texts"], _first_difference(one["texts"], two["texts"])
    here = _in_process()
    assert one["texts"] == here, _first_difference(one["texts"], here)


def test_the_compiled_and_the_pure_build_draw_the_same_bytes():
    if not compiled_core_importable():
        pytest.skip("the compiled core is not built (setup.py build_ext --inplace)")
    compiled, pure = _run("7", False), _run("7", True)
    assert (compiled["core"], pure["core"]) == ("cython", "python")
    assert compiled["texts"] == pure["texts"], _first_difference(compiled["texts"], pure["texts"])


def test_drawing_twice_in_one_process_gives_the_same_bytes():
    assert _in_process() == _in_process()
