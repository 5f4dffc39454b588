"""Two real ranks: ``workers/worker.py`` under the venv's ``mpiexec -n 2``; each rank writes ``rank<r>.json``.

Checked: collectives against NumPy on rank-dependent data, a data-parallel training step
against the single-process full batch, and failures: a rank that hangs (the other times
out and aborts the run) and a rank that dies (mpiexec stops the run).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import mlp
import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
WORKER = HERE / "workers" / "worker.py"
MPIEXEC = Path(sys.prefix) / "bin" / "mpiexec"
ROOT = HERE.parents[2]

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None,
                       reason="mpi4py is not installed (pip install -e '.[distributed]')"),
    pytest.mark.skipif(not MPIEXEC.exists(), reason=f"no mpiexec at {MPIEXEC} (pip install -e '.[distributed]')"),
]


def _launch(mode: str, ranks: int = 2, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    command = [str(MPIEXEC), "-n", str(ranks), sys.executable, str(WORKER), mode] if ranks else \
        [sys.executable, str(WORKER), mode]
    results = tempfile.mkdtemp(prefix="ng_dist_")
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "NG_RESULT_DIR": results, **env}
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=environ)
    proc.result_dir = results  # type: ignore[attr-defined]
    return proc


def _results(proc: subprocess.CompletedProcess, ranks: int = 2) -> list[dict]:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    found = [json.loads(p.read_text()) for p in sorted(Path(proc.result_dir).glob("rank*.json"))]
    assert sorted(r["rank"] for r in found) == list(range(ranks)), proc.stdout
    return sorted(found, key=lambda r: r["rank"])


def test_collectives_match_numpy_on_each_rank() -> None:
    base = np.arange(12.0).reshape(3, 4)
    values = [base + 100.0 * r for r in range(2)]
    for r in _results(_launch("collectives")):
        assert r["size"] == 2
        for optimize in ("optimize=False", "optimize=True"):
            got = r["graphs"][optimize]
            np.testing.assert_array_equal(got["mean"], sum(values) / 2)
            np.testing.assert_array_equal(got["sum"], 2 * sum(values))
            np.testing.assert_array_equal(got["broadcast"], values[1])
        assert "allreduce" in r["graphs"]["optimize=False"]["kinds"]
        assert {"allreduce_start", "allreduce_wait"} <= set(r["graphs"]["optimize=True"]["kinds"])
        assert "allreduce" not in r["graphs"]["optimize=True"]["kinds"]
        assert r["max"] == [2.0] * 5 and r["root"] == [14.0, 14.0]
        assert r["gathered"] == [{"rank": 0, "loss": 0.0}, {"rank": 1, "loss": 0.5}]


def test_data_parallel_step_equals_the_full_batch_step() -> None:
    ranks = _results(_launch("train"))
    xs, ys = mlp.batch()
    grads, weights = mlp.step(xs, ys)  # one process, the whole batch
    for r in ranks:
        for got, want in zip(r["grads"] + r["weights"], grads + weights):
            np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=0)
    assert ranks[0]["weights"] == ranks[1]["weights"]  # bit-identical on every rank after the step


def test_a_hung_rank_makes_the_other_time_out_and_abort_the_run() -> None:
    proc = _launch("timeout", timeout=30, NG_DIST_TIMEOUT="3")
    assert proc.returncode != 0, proc.stdout
    assert "[rank 0] " in proc.stderr and "DistributedTimeoutError" in proc.stderr, proc.stderr
    assert "rank 0 of 2 waited 3 s" in proc.stderr and "raise NG_DIST_TIMEOUT" in proc.stderr
    assert not list(Path(proc.result_dir).glob("rank*.json"))  # no rank got past the failure


def test_a_killed_rank_stops_the_run() -> None:
    proc = _launch("kill", timeout=45, NG_DIST_TIMEOUT="20")
    assert proc.returncode != 0, proc.stdout
    assert not list(Path(proc.result_dir).glob("rank*.json"))  # no rank got past the failure


def test_init_outside_mpiexec_is_a_world_of_one() -> None:
    (r,) = _results(_launch("single", ranks=0, NG_DIST_TIMEOUT="42"), ranks=1)
    assert r == {"rank": 0, "size": 1, "initialized": True, "same": True, "timeout": 42.0}
