"""The ``bucket_allreduce`` pass: bucket membership, sizes, plan order, memory safety and numeric equivalence."""

from __future__ import annotations

import mlp
import numpy as np
import pytest
from fake_world import TwoRanks

import ngraph_core as ng
from ngraph_core import OpType
from ngraph_core.passes.allreduce import bucket_allreduce, plan_buckets, ready_order

W0, B0, W1, B1, W2, B2 = range(6)  # mlp.build's parameters, in its order
BYTES = [120, 20, 80, 16, 48, 12]  # their float32 gradients' bytes


def _step(bucket_bytes: int | None = None) -> tuple[dict, list[ng.Op]]:
    model = mlp.build(mlp.BATCH, distributed=True, bucket_bytes=bucket_bytes)
    return model, [model["loss"], model["update"]]


def _members(buckets, model: dict) -> list[list[int]]:
    index = {g: i for i, g in enumerate(model["grads"])}
    return [[index[m] for m in b.members] for b in buckets]


def test_ready_order_is_last_layer_first() -> None:
    model, roots = _step()
    assert [model["grads"].index(op) for op in ready_order(roots)] == [W2, B2, W1, B1, W0, B0]


@pytest.mark.parametrize("size, expected", [
    (96, [[W2, B2], [W1, B1], [W0], [B0]]),  # W1 + b1 fill 96 bytes exactly; W0 alone exceeds the size
    (64, [[W2, B2], [W1], [B1], [W0], [B0]]),
    (0, [[W2], [B2], [W1], [B1], [W0], [B0]]),
    (25 << 20, [[W2, B2, W1, B1, W0, B0]]),
])
def test_greedy_buckets_for_a_size(size: int, expected: list[list[int]]) -> None:
    model, roots = _step()
    buckets = plan_buckets(roots, size)
    assert _members(buckets, model) == expected
    assert all(b.nbytes <= size or len(b.members) == 1 for b in buckets)
    assert [b.nbytes for b in buckets] == [sum(BYTES[i] for i in members) for members in expected]


def test_bucket_size_from_environment_and_per_op(monkeypatch: pytest.MonkeyPatch) -> None:
    model, roots = _step()
    monkeypatch.setenv("NG_ALLREDUCE_BUCKET_MB", str(96 / 2**20))
    assert _members(plan_buckets(roots), model) == [[W2, B2], [W1, B1], [W0], [B0]]
    monkeypatch.setenv("NG_ALLREDUCE_BUCKET_MB", "")
    assert len(plan_buckets(roots)) == 1  # the 25 MiB default
    model, roots = _step(bucket_bytes=0)  # the op's own size wins over the environment
    monkeypatch.setenv("NG_ALLREDUCE_BUCKET_MB", "25")
    assert len(plan_buckets(roots)) == 6
    monkeypatch.setenv("NG_ALLREDUCE_BUCKET_MB", "big")
    with pytest.raises(ng.DistributedError, match=r"NG_ALLREDUCE_BUCKET_MB: expected .* received 'big'"):
        plan_buckets(roots)


def test_reductions_and_dtypes_never_share_a_bucket() -> None:
    C = ng.make_axis(3, "C")
    x, i = ng.placeholder([C]), ng.placeholder([C], dtype="int64")
    ops = [ng.distributed.allreduce(x), ng.distributed.allreduce(x, "sum"), ng.distributed.allreduce(i, "sum"),
           ng.distributed.allreduce(x * 2.0)]
    buckets = plan_buckets(ops, 1 << 20)
    assert sorted((b.reduction, b.dtype, len(b.members)) for b in buckets) == [
        ("mean", "float32", 2), ("sum", "float32", 1), ("sum", "int64", 1)]


def test_rewrite_slices_each_allreduce_out_of_its_bucket() -> None:
    C, N = ng.make_axis(3, "C"), ng.make_axis(4, "N")
    x, y = ng.placeholder([C, N]), ng.placeholder([N])
    a, b = ng.distributed.allreduce(x, "sum"), ng.distributed.allreduce(y, "sum")
    new_a, new_b = bucket_allreduce([a, b])
    assert (new_a.op, new_a.axes, new_b.op, new_b.axes) == (OpType.RESHAPE, a.axes, OpType.RESHAPE, b.axes)
    (wait,) = {new_a.src[0].src[0], new_b.src[0].src[0]}
    (start,) = wait.src
    assert (wait.op, start.op, start.src, start.axes.lengths) == (OpType.ALLREDUCE_WAIT, OpType.ALLREDUCE_START,
                                                                 (x, y), (16,))
    assert {new_a.src[0].arg, new_b.src[0].arg} == {((0, 12, 1),), ((12, 16, 1),)}
    assert bucket_allreduce([x * 2.0]) == [x * 2.0]  # nothing to bucket


def test_plan_starts_each_bucket_during_backward_and_waits_after_the_last_start() -> None:
    model, roots = _step(bucket_bytes=0)
    with ng.transformers.make_transformer() as t:
        comp = t.computation(roots, model["x"], model["y"])
    order = list(comp.graph.order)
    pos = {op: i for i, op in enumerate(order)}
    starts = [op for op in order if op.op is OpType.ALLREDUCE_START]
    waits = [op for op in order if op.op is OpType.ALLREDUCE_WAIT]
    assert len(starts) == len(waits) == 6
    assert [s.arg.index for s in starts] == list(range(6))  # in ready order
    assert max(map(pos.get, starts)) < min(map(pos.get, waits))
    for earlier, later in zip(starts, starts[1:]):
        # a bucket starts before the next bucket's gradient is computed: communication overlaps backward
        assert pos[earlier] < min(pos[g] for g in later.src)
    first_layer = [op for op in order[pos[starts[0]]:] if "grad" in op.meta.labels and op.op is OpType.DOT]
    assert first_layer, "no backward matmul runs after the first bucket started"
    assert OpType.ALLREDUCE not in {op.op for op in order}
    assert "allreduce_start" in comp.source and "allreduce_wait" in comp.source


def test_memory_plan_keeps_every_start_buffer_until_the_waits() -> None:
    model, roots = _step(bucket_bytes=0)
    with ng.transformers.make_transformer() as t:
        plan = t.computation(roots, model["x"], model["y"]).graph.memory
    order = list(plan.order)
    last_wait = max(i for i, op in enumerate(order) if op.op is OpType.ALLREDUCE_WAIT)
    for i, start in enumerate(order):
        if start.op is not OpType.ALLREDUCE_START:
            continue
        assert start not in plan.in_place and start not in plan.in_place.values()
        lo, hi = plan.offsets[start], plan.offsets[start] + plan.sizes[start]
        for other in order[i + 1:last_wait + 1]:
            if other in plan.offsets:  # no buffer written while MPI may still reduce this one overlaps it
                assert plan.offsets[other] >= hi or plan.offsets[other] + plan.sizes[other] <= lo, other


def test_dependent_allreduce_keeps_its_blocking_kernel() -> None:
    C = ng.make_axis(3, "C")
    x = ng.placeholder([C])
    first = ng.distributed.allreduce(x)
    second = ng.distributed.allreduce(first * 2.0)  # bucketing it with `first` would close a cycle
    assert ready_order([second]) == [first]
    comm = TwoRanks(peer=1.0)
    with ng.transformers.make_transformer(communicator=comm) as t:
        f = t.computation(second, x)
        kinds = [op.op for op in f.graph.order]
        out = f(np.array([1.0, 3.0, 5.0]))
    assert kinds.count(OpType.ALLREDUCE) == 1 and kinds.count(OpType.ALLREDUCE_START) == 1
    np.testing.assert_allclose(out, ((np.array([1.0, 3.0, 5.0]) + 1) + 1) / 2)  # mean(2 * mean(x, 1), 1)


@pytest.mark.parametrize("comm", [None, TwoRanks(peer=0.25)], ids=["one_rank", "simulated_peer"])
def test_bucketed_step_equals_the_plain_kernels(comm) -> None:
    xs, ys = mlp.batch()
    plain = mlp.step(xs, ys, distributed=True, optimize=False, communicator=comm)
    bucketed = mlp.step(xs, ys, distributed=True, bucket_bytes=96, communicator=comm)
    reference = mlp.step(xs, ys)
    for a, b, ref in zip(plain[0] + plain[1], bucketed[0] + bucketed[1], reference[0] + reference[1]):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
        if comm is None:
            np.testing.assert_allclose(b, ref, rtol=1e-6, atol=1e-7)
    if comm is not None:  # the peer's 0.25 averaged in: grads (g + 0.25) / 2
        np.testing.assert_allclose(bucketed[0][0], (reference[0][0] + 0.25) / 2, rtol=1e-5, atol=1e-7)
