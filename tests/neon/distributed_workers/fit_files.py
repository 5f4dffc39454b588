"""Worker: a distributed ``fit`` with files, validation metrics and a resume from a perturbed checkpoint.

Run as ``mpiexec -n 2 python fit_files.py OUT``. Each rank:

1. fits 2 epochs with a sharded training set, a sharded validation set of an odd size (so the
   ranks hold 13 and 12 samples) and the writing callbacks, each given a path that names the
   rank (``ckpt_rank<r>.h5``...): only rank 0's may appear;
2. evaluates the full validation set by itself (no averaging) with the final weights;
3. loads rank 0's checkpoint; rank 1 then perturbs its weights; ``broadcast_variables`` must
   bring rank 0's back;
4. saves a perturbed copy (rank 1) of the checkpoint and resumes ``fit`` from its own file:
   ``fit``'s broadcast after the restore must start both ranks from rank 0's values;
5. fits a set with one NaN sample, in rank 1's second batch: both ranks must stop there.

It writes ``OUT/results/rank<r>.json`` (the history, the full-set evaluation) and
``OUT/results/rank<r>.npz`` (weights after each stage) for the tests to compare.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import mlp, problem, save_arrays, snapshot  # noqa: E402

from neon import distributed  # noqa: E402
from neon.callbacks import Callback, Checkpoint, EpochPrinter, MetricHistory, TerminateOnNaN  # noqa: E402
from neon.costs import CrossEntropyMulti  # noqa: E402
from neon.data import ArrayIterator  # noqa: E402
from neon.metrics import Accuracy  # noqa: E402
from neon.optimizers import GradientDescentMomentum  # noqa: E402


class StartRecorder(Callback):
    """The weights ``fit`` starts training from (after any restore and broadcast)."""

    def on_train_begin(self, logs: dict) -> None:
        self.arrays = snapshot(self.model)


def main(out: Path) -> None:
    comm = distributed.init()
    rank = comm.rank
    files, results = out / "files", out / "results"
    X, y = problem(64, seed=0)
    Xv, yv = problem(25, seed=1)
    train = distributed.shard(ArrayIterator(X, y, nclass=3, batch_size=8, shuffle=True))
    valid = distributed.shard(ArrayIterator(Xv, yv, nclass=3, batch_size=4))
    model = mlp(seed=3 + rank)
    optimizer = distributed.DistributedOptimizer(GradientDescentMomentum(0.1, momentum_coef=0.9))
    history_files = {"json_path": files / f"history_rank{rank}.json", "csv_path": files / f"history_rank{rank}.csv"}
    callbacks = [Checkpoint(files / f"ckpt_rank{rank}.h5"), EpochPrinter(), MetricHistory(**history_files)]
    files.mkdir(parents=True, exist_ok=True)
    history = model.fit(train, CrossEntropyMulti(), optimizer, num_epochs=2, valid_set=valid, metric=Accuracy(),
                        callbacks=callbacks, progress=True)
    arrays = {f"fit|{k}": v for k, v in snapshot(model).items()}
    full = model._evaluate(ArrayIterator(Xv, yv, nclass=3, batch_size=25), CrossEntropyMulti(), [Accuracy()])
    comm.barrier()  # rank 0's checkpoint is complete

    checkpoint = files / "ckpt_rank0.h5"
    model.load_params(checkpoint)
    arrays.update({f"loaded|{k}": v for k, v in snapshot(model).items()})
    if rank == 1:
        for var in model.variables:
            model.transformer.write_variable(var, model.transformer.read_variable(var) + 1.0)
    distributed.broadcast_variables(model)
    arrays.update({f"broadcast|{k}": v for k, v in snapshot(model).items()})

    if rank == 1:  # rank 1 resumes from a file whose weights differ from rank 0's
        for var in model.variables:
            model.transformer.write_variable(var, model.transformer.read_variable(var) * 0.5)
        own = out / "rank1_perturbed.h5"
        model.save_params(own)
    else:
        own = checkpoint
    comm.barrier()
    start = StartRecorder()
    model.fit(train, CrossEntropyMulti(), optimizer, num_epochs=3, callbacks=[start], resume_from=own,
              progress=False)
    arrays.update({f"resumed|{k}": v for k, v in start.arrays.items()})
    arrays.update({f"after|{k}": v for k, v in snapshot(model).items()})
    save_arrays(results / f"rank{rank}.npz", arrays)

    X[17, 0] = float("nan")  # unshuffled, rank 1 holds rows 1, 3, 5...: row 17 is in its second batch of 8
    stop = TerminateOnNaN()
    nan_history = mlp(seed=3).fit(distributed.shard(ArrayIterator(X, y, nclass=3, batch_size=8)), CrossEntropyMulti(),
                                  optimizer, num_epochs=2, callbacks=[stop], progress=False)
    (results / f"rank{rank}.json").write_text(json.dumps({
        "history": history.as_dict(), "full": full, "train_batches": len(train),
        "nan_stopped_at": stop.stopped_at, "nan_epochs": len(nan_history["epoch"])}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
