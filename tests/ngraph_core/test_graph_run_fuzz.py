"""Fuzzing decode + compile + run: crafted graph documents never crash the interpreter (see ``graph_run_fuzz``).

The mutants are made here (seeded: a graph per ``OpType`` from ``test_serialize.GRAPHS``, one int of one
op's arg changed, the declared lengths adjusted to match) and run in a child process with
``NG_KERNELS=numba``, so every compiled kernel that supports an op runs it. The child must exit
normally (a SIGSEGV is exit -11) and every document must end refused, typed or with its results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fuzzing import budget
from graph_run_fuzz import extra_seeds, mutants
from test_serialize_fuzz import SEEDS

HERE = Path(__file__).resolve().parent


def run_children(texts: list[str], tmp_path: Path, timeout: float) -> list[dict]:
    path = tmp_path / "mutants.json"
    path.write_text(json.dumps(texts))
    env = dict(os.environ, NG_KERNELS="numba", PYTHONPATH=os.pathsep.join([str(HERE), str(HERE.parents[1])]))
    done = subprocess.run([sys.executable, str(HERE / "graph_run_fuzz.py"), str(path)], capture_output=True,
                          text=True, timeout=timeout, env=env)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    where = texts[len(lines)][:300] if len(lines) < len(texts) else ""
    assert done.returncode == 0, f"child exit {done.returncode} at mutant {len(lines)}: {where}\n{done.stderr[-1500:]}"
    return lines


@pytest.mark.fuzz
def test_mutated_documents_decode_compile_and_run_without_crashing(tmp_path: Path) -> None:
    texts = mutants(SEEDS + extra_seeds(), budget(60), seed=int(os.environ.get("NG_FUZZ_SEED", "0")))
    lines = run_children(texts, tmp_path, timeout=600)
    raw = [(line["i"], line["outcome"], texts[line["i"]][:200]) for line in lines if line["outcome"].startswith("raw")]
    assert not raw, raw
    outcomes = [line["outcome"] for line in lines]
    assert outcomes.count("refused") and outcomes.count("ok"), outcomes  # both ends of the contract are reached
