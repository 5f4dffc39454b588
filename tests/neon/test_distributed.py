"""neon.distributed without MPI: sharded iterators, DistributedOptimizer on a world of one, metric
averaging with a stand-in communicator, and the rank-0-only writers of ``fit``."""

from __future__ import annotations

import argparse
import importlib

import numpy as np
import pytest
from fit_helper import datasets, mlp, weights

import neon.model
import neon.training
import ngraph_core as ng
from neon import distributed
from neon.callbacks import Callback, Checkpoint, MetricHistory
from neon.cli.common import UsageError
from neon.cli.neon_main import build_parser
from neon.cli.zoo import recipe_parser, train_arguments
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator, DataError, ImageIterator
from neon.optimizers import Adam, GradientDescentMomentum, OptimizerError


def epoch_rows(iterator: ArrayIterator, epoch: int = 0) -> list[list[int]]:
    """The row numbers of each batch of ``epoch`` (X's first feature encodes the row number)."""
    iterator.set_epoch(epoch)
    return [x[0].astype(int).tolist() for x, _ in iterator]


def numbered(n: int, batch_size: int, shard=None, shuffle=True) -> ArrayIterator:
    X = np.arange(n, dtype=np.float32)[:, None] * np.ones((1, 2), dtype=np.float32)
    return ArrayIterator(X, np.arange(n) % 2, nclass=2, batch_size=batch_size, shuffle=shuffle, seed=5, shard=shard)


# -- sharding ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,size,batch", [(10, 3, 2), (64, 2, 8), (7, 7, 1), (9, 2, 4)])
def test_shards_partition_each_epoch_with_equal_batch_counts(n, size, batch):
    shards = [numbered(n, batch, shard=(r, size)) for r in range(size)]
    for epoch in (0, 3):
        per_rank = [epoch_rows(it, epoch) for it in shards]
        rows = [row for batches in per_rank for batch_rows in batches for row in batch_rows]
        assert len(rows) == len(set(rows)) == n - n % size  # disjoint; the remainder (< size) is dropped
        assert len({len(batches) for batches in per_rank}) == 1  # every rank takes the same number of steps
        assert [len(b) for b in per_rank[0]] == [len(b) for b in per_rank[-1]]
        assert len(per_rank[0]) == len(shards[0]) == shards[0].nbatches
        order = numbered(n, batch).order(epoch)
        kept = order[:n - n % size]
        assert set(rows) == set(kept.tolist())  # a slice of the epoch's own order: the same seed everywhere


def test_size_ranks_of_batch_b_see_the_rows_of_one_process_of_batch_size_times_b():
    single = epoch_rows(numbered(60, 16), epoch=1)
    ranks = [epoch_rows(numbered(60, 8, shard=(r, 2)), epoch=1) for r in range(2)]
    assert [sorted(a + b) for a, b in zip(*ranks, strict=True)] == [sorted(batch) for batch in single]


def test_in_order_of_shards_covers_every_row_once():
    shards = [numbered(11, 4, shard=(r, 3), shuffle=False) for r in range(3)]
    rows = [x[0].astype(int).tolist() for it in shards for x, _ in it.in_order()]
    assert sorted(r for batch in rows for r in batch) == list(range(11))  # nothing dropped for evaluation
    assert [x[0].astype(int).tolist() for x, _ in shards[1].in_order()] == [[1, 4, 7, 10]]


def test_image_iterator_shards_and_augments_per_rank():
    X = np.random.default_rng(0).integers(0, 255, (12, 3, 8, 8)).astype(np.uint8)
    y = np.arange(12) % 10
    its = [ImageIterator(X, y, nclass=10, batch_size=3, shuffle=True, seed=1, crop_padding=2, flip=True)
           for _ in range(2)]
    for r, it in enumerate(its):
        it.set_shard(r, 2)
    batches = [list(it) for it in its]
    assert [len(b) for b in batches] == [2, 2] and all(x.shape == (3, 8, 8, 3) for b in batches for x, _ in b)
    labels = [int(np.argmax(t[:, i])) for b in batches for _, t in b for i in range(t.shape[1])]
    assert sorted(labels) == sorted(y.tolist())  # the 12 images split between the ranks


def test_shard_errors_name_the_problem():
    with pytest.raises(DataError, match=r"0 <= rank < size, received \(2, 2\)"):
        numbered(10, 2, shard=(2, 2))
    with pytest.raises(DataError, match="needs the same seed on every rank"):
        ArrayIterator(np.zeros((10, 2)), batch_size=2, shuffle=True, shard=(0, 2))
    with pytest.raises(DataError, match="cannot shard 3 rows over 4 ranks"):
        numbered(3, 1, shard=(0, 4))
    with pytest.raises(distributed.DistributedError, match="expected an ArrayIterator"):
        distributed.shard([(np.zeros((2, 1)), None)])


def test_shard_in_a_world_of_one_keeps_the_whole_set():
    it = distributed.shard(ArrayIterator(np.zeros((10, 2)), batch_size=4, shuffle=True))  # OS seed is fine
    assert it.shard == (0, 1) and len(it) == 3 and sum(x.shape[-1] for x, _ in it) == 10


# -- DistributedOptimizer on a world of one ----------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: GradientDescentMomentum(0.1, momentum_coef=0.9, gradient_clip_norm=0.3, wdecay=1e-3),
    lambda: Adam(0.01, groups={".bias": {"lr": 0.001}}),
])
def test_distributed_optimizer_alone_steps_as_the_wrapped_optimizer(make):
    results = []
    for wrap in (False, True):
        train, _ = datasets(batch_size=16)
        model = mlp(seed=2)
        optimizer = distributed.DistributedOptimizer(make()) if wrap else make()
        model.fit(train, CrossEntropyMulti(), optimizer, num_epochs=2, progress=False)
        params, opt = model.checkpoint_keys()
        results.append(({k: model.transformer.read_variable(v) for k, v in {**params, **opt}.items()},
                        list(model.history["train_cost"])))
    (plain, plain_cost), (wrapped, wrapped_cost) = results
    assert plain.keys() == wrapped.keys() and any(k.endswith("/t") or "velocity" in k for k in plain)
    for key in plain:
        np.testing.assert_allclose(wrapped[key], plain[key], rtol=1e-6, atol=1e-7, err_msg=key)
    assert wrapped_cost == pytest.approx(plain_cost, rel=1e-6)


def test_distributed_optimizer_is_the_wrapped_optimizer_in_all_but_the_step():
    inner = GradientDescentMomentum(0.1, momentum_coef=0.9, name="sgd")
    opt = distributed.DistributedOptimizer(inner, bucket_mb=4)
    model = mlp()
    model.build((4,), 2)
    opt.build(model.variables)
    assert opt.state_variables == inner.state_variables and len(inner.state_variables) == 4
    assert opt.lr_variable is inner.lr_variable and opt.get_config() == inner.get_config()
    assert opt.learning_rates_at(3) == inner.learning_rates_at(3)
    opt.learning_rate = 0.5  # attributes are written through to the wrapped optimizer
    assert inner.learning_rate == 0.5 and opt.bucket_mb == 4.0
    assert repr(opt).startswith("DistributedOptimizer(GradientDescentMomentum(")


def test_distributed_optimizer_puts_an_allreduce_before_clipping():
    w = ng.variable([ng.make_axis(3, "F")], initial_value=1.0, name="w")
    cost = ng.sum(ng.square(w - 2.0))
    update = distributed.DistributedOptimizer(GradientDescentMomentum(0.1, gradient_clip_norm=1.0), bucket_mb=2,
                                              average=False)(cost, [w])
    reduces = list(ng.select(update, "allreduce"))
    assert len(reduces) == 1 and reduces[0].arg.reduction == "sum" and reduces[0].arg.bucket_bytes == 2 << 20
    # the clip's global norm (a sqrt) is computed from the reduced gradient, never the other way round
    assert len(ng.select(update, "sqrt << allreduce")) == 1 and len(ng.select(update, "allreduce << sqrt")) == 0


def test_distributed_optimizer_errors():
    with pytest.raises(OptimizerError, match="bucket_mb to be a finite number > 0, received 0"):
        distributed.DistributedOptimizer(Adam(0.1), bucket_mb=0)
    with pytest.raises(OptimizerError, match="received a DistributedOptimizer"):
        distributed.DistributedOptimizer(distributed.DistributedOptimizer(Adam(0.1)))
    with pytest.raises(OptimizerError, match="received str"):
        distributed.DistributedOptimizer("sgd")
    w = ng.variable([ng.make_axis(3, "F")], initial_value=1.0, name="w")
    with pytest.raises(OptimizerError, match=r"DistributedOptimizer\(Adam\): expected a scalar cost"):
        distributed.DistributedOptimizer(Adam(0.1))(w * 2.0, [w])


# -- agreement: broadcast and averages ---------------------------------------------------------------------
class PeerComm:
    """A stand-in two-rank communicator: the other rank contributes ``peer`` to every sum."""

    rank, size = 0, 2

    def __init__(self, peer: list[float], names=None) -> None:
        self.peer, self.names = np.asarray(peer, dtype=np.float64), names

    def allgather_object(self, obj):
        return [obj, obj if self.names is None else self.names]

    def allreduce_(self, array, op="sum"):
        array += self.peer
        return array


def test_average_metrics_weights_each_rank_by_its_samples():
    # rank 1 (the peer): cost 0.5 over 100 samples, accuracy 0.8 -> sums 50, 80 and weight 100
    averaged = distributed.average_metrics({"cost": 0.2, "accuracy": 0.9, "lr": None}, weight=300,
                                           comm=PeerComm([50.0, 80.0, 100.0]))
    assert averaged == {"cost": pytest.approx((0.2 * 300 + 50) / 400), "accuracy": pytest.approx((270 + 80) / 400),
                        "lr": None}
    with pytest.raises(distributed.DistributedError, match="same names on every rank"):
        distributed.average_metrics({"cost": 1.0}, comm=PeerComm([1.0, 1.0], names=["loss"]))
    with pytest.raises(distributed.DistributedError, match="weight to be a finite number >= 0"):
        distributed.average_metrics({"cost": 1.0}, weight=-1, comm=PeerComm([1.0, 1.0]))


def test_agreement_helpers_in_a_world_of_one():
    assert distributed.average_metrics({"a": 1.5}, weight=7) == {"a": 1.5}
    assert distributed.sum_across_ranks([1, 2.5]) == [1.0, 2.5]
    assert (distributed.rank(), distributed.size(), distributed.is_writer(), distributed.is_distributed()) == \
        (0, 1, True, False)
    model = mlp()
    model.build((4,), 2)
    before = weights(model)
    assert distributed.broadcast_variables(model) == len(model.variables)
    assert all(np.array_equal(a, b) for a, b in zip(before, weights(model), strict=True))
    with pytest.raises(distributed.DistributedError, match=r"root in \[0, 1\), received 1"):
        distributed.broadcast_variables(model, root=1)
    with pytest.raises(distributed.DistributedError, match="needs transformer"):
        distributed.broadcast_variables(model.variables)


# -- rank-0-only writers -------------------------------------------------------------------------------------
class Counter(Callback):
    def __init__(self) -> None:
        self.epochs = 0

    def on_epoch_end(self, epoch, logs):
        self.epochs += 1


@pytest.mark.parametrize("writer", [True, False])
def test_fit_runs_writing_callbacks_on_the_writer_rank_only(tmp_path, monkeypatch, writer):
    monkeypatch.setattr(neon.training, "is_writer", lambda: writer)
    train, _ = datasets()
    counter = Counter()
    callbacks = [Checkpoint(tmp_path / "last.h5"), MetricHistory(json_path=tmp_path / "h.json"), counter]
    mlp().fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1), num_epochs=2, callbacks=callbacks,
              progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == (["h.json", "last.h5"] if writer else [])
    assert counter.epochs == 2  # callbacks that only compute run on every rank



# -- neon train --distributed ------------------------------------------------------------------------------------
def test_neon_train_passes_distributed_to_recipes_that_take_it():
    resnet = recipe_parser(importlib.import_module("model_zoo.resnet_cifar10"))
    args = argparse.Namespace(epochs=1, batch_size=None, data_dir=None, out=None, distributed=True, parser=None)
    assert train_arguments("resnet_cifar10", resnet, args, ["--n-train", "64"]) == \
        ["--epochs", "1", "--distributed", "--n-train", "64"]
    assert resnet.parse_args(["--distributed"]).distributed and not resnet.parse_args([]).distributed
    char_lm = recipe_parser(importlib.import_module("model_zoo.char_lm"))
    with pytest.raises(UsageError, match="recipe char_lm does not take --distributed"):
        train_arguments("char_lm", char_lm, args, [])
    assert build_parser().parse_args(["train", "resnet_cifar10", "--distributed"]).distributed


def test_fit_warns_when_a_distributed_run_has_a_plain_optimizer(monkeypatch):
    monkeypatch.setattr(neon.model, "is_distributed", lambda: True)
    train, _ = datasets()
    with pytest.warns(UserWarning, match="plain GradientDescentMomentum.*DistributedOptimizer"):
        mlp().fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1), num_epochs=1, progress=False)
