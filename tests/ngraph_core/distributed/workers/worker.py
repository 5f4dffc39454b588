"""A worker run by tests/ngraph_core/distributed/test_dist_mpi.py under ``mpiexec -n 2`` (or alone).

Usage: ``python worker.py MODE``; each rank writes ``$NG_RESULT_DIR/rank<r>.json``.

* ``collectives``: graph allreduce (mean, sum; plain and bucketed), broadcast from rank 1,
  the communicator's own allreduce_/broadcast_/allgather_object/barrier, on rank-dependent data;
* ``train``: one data-parallel SGD step of a small MLP, each rank on its half of a fixed batch;
  prints the averaged gradients and the weights after the step;
* ``timeout``: rank 1 sleeps in Python instead of joining the allreduce (rank 0 must time out);
* ``kill``: rank 1 kills itself with SIGKILL before the allreduce;
* ``single``: ``init()`` in a process not started by mpiexec (a world of one).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import mlp  # noqa: E402 - the shared model of the train test, next to the tests

import ngraph_core as ng  # noqa: E402


def report(**values) -> None:
    """One JSON file per rank in ``NG_RESULT_DIR`` (the ranks' stdout lines can interleave mid-line)."""
    with open(os.path.join(os.environ["NG_RESULT_DIR"], f"rank{values['rank']}.json"), "w") as f:
        json.dump(values, f)


def collectives(comm: ng.distributed.Communicator) -> None:
    C, N = ng.make_axis(3, "C"), ng.make_axis(4, "N")
    x = ng.placeholder([C, N], name="x")
    value = np.arange(12.0).reshape(3, 4) + 100.0 * comm.rank
    graph = [ng.distributed.allreduce(x, "mean"), ng.distributed.allreduce(x * 2.0, "sum"),
             ng.distributed.broadcast(x, root=1)]
    out = {}
    for optimize in (False, True):
        with ng.transformers.make_transformer(optimize=optimize) as t:
            f = t.computation(graph, x)
            kinds = {op.op.value for op in f.graph.order}
            mean, total, bcast = f(value)
            out[f"optimize={optimize}"] = {"mean": mean.tolist(), "sum": total.tolist(), "broadcast": bcast.tolist(),
                                           "kinds": sorted(kinds)}
    raw = np.full(5, comm.rank + 1.0)
    comm.allreduce_(raw, op="max")
    root = np.full(2, 7.0 * (comm.rank + 1))
    comm.broadcast_(root, root=1)
    comm.barrier()
    report(rank=comm.rank, size=comm.size, graphs=out, max=raw.tolist(), root=root.tolist(),
           gathered=comm.allgather_object({"rank": comm.rank, "loss": 0.5 * comm.rank}))


def train(comm: ng.distributed.Communicator) -> None:
    xs, ys = mlp.batch()
    half = xs.shape[1] // comm.size
    mine = slice(comm.rank * half, (comm.rank + 1) * half)
    grads, weights = mlp.step(xs[:, mine], ys[:, mine], distributed=True, bucket_bytes=200)
    report(rank=comm.rank, grads=[g.tolist() for g in grads], weights=[w.tolist() for w in weights])


def main() -> None:
    mode = sys.argv[1]
    comm = ng.distributed.init()
    if mode == "collectives":
        collectives(comm)
    elif mode == "train":
        train(comm)
    elif mode in ("timeout", "kill"):
        C = ng.make_axis(3, "C")
        x = ng.placeholder([C])
        with ng.transformers.make_transformer() as t:
            f = t.computation(ng.distributed.allreduce(x), x)
            if comm.rank == 1:
                if mode == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(120)  # never joins: rank 0 must give up after NG_DIST_TIMEOUT
            f(np.ones(3))
            report(rank=comm.rank, unexpected="the allreduce completed")
    elif mode == "single":
        report(rank=comm.rank, size=comm.size, initialized=ng.distributed.is_initialized(),
               same=ng.distributed.init() is comm, timeout=comm.timeout)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
