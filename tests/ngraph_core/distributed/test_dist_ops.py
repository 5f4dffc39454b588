"""The allreduce and broadcast ops: builders, errors, gradient, kernels on a simulated peer, serialization."""

from __future__ import annotations

import numpy as np
import pytest
from fake_world import TwoRanks

import ngraph_core as ng
from ngraph_core import OpType
from ngraph_core.ir.collective import AllreduceArg

C, N = ng.make_axis(3, "C"), ng.make_axis(4, "N")
X = np.arange(12.0).reshape(3, 4)


def _run(results: list[ng.Op], x: ng.Op, value: np.ndarray, **options) -> tuple:
    with ng.transformers.make_transformer(**options) as t:
        return t.computation(results, x)(value)


def test_builders_make_collective_ops() -> None:
    x = ng.placeholder([C, N])
    a = ng.distributed.allreduce(x, "sum", name="g_sum", bucket_bytes=64)
    b = ng.distributed.broadcast(x, root=2)
    assert (a.op, a.arg, a.axes, a.dtype, a.name) == (OpType.ALLREDUCE, AllreduceArg("sum", 64), x.axes, "float32",
                                                      "g_sum")
    assert (b.op, b.arg, b.axes) == (OpType.BROADCAST_FROM, 2, x.axes)
    assert ng.distributed.allreduce(x).arg == AllreduceArg("mean", None)
    assert a.op in ng.OpGroup.COLLECTIVE and OpType.BROADCAST_FROM in ng.OpGroup.NON_DIFFERENTIABLE


def test_single_process_collectives_are_identity() -> None:
    x = ng.placeholder([C, N])
    graph = [ng.distributed.allreduce(x), ng.distributed.allreduce(x * 2.0, "sum"), ng.distributed.broadcast(x)]
    for optimize in (False, True):
        mean, total, bcast = _run(graph, x, X, optimize=optimize)
        np.testing.assert_array_equal(mean, X)
        np.testing.assert_array_equal(total, 2 * X)
        np.testing.assert_array_equal(bcast, X)


@pytest.mark.parametrize("optimize", [False, True], ids=["plain", "bucketed"])
def test_kernels_use_the_transformer_communicator(optimize: bool) -> None:
    x = ng.placeholder([C, N])
    comm = TwoRanks(peer=10.0)
    graph = [ng.distributed.allreduce(x), ng.distributed.allreduce(x * 2.0, "sum"),
             ng.distributed.broadcast(x, root=1), ng.distributed.broadcast(x, root=0)]
    mean, total, from_1, from_0 = _run(graph, x, X, optimize=optimize, communicator=comm)
    np.testing.assert_array_equal(mean, (X + 10.0) / 2)
    np.testing.assert_array_equal(total, 2 * X + 10.0)
    np.testing.assert_array_equal(from_1, np.full((3, 4), 10.0))
    np.testing.assert_array_equal(from_0, X)
    # the bucketed form sums (its wait divides); two reductions never share a bucket
    assert sorted(comm.calls) == ([("mean", 12), ("sum", 12)] if not optimize else [("sum", 12), ("sum", 12)])


def test_gradient_is_the_allreduce_of_the_upstream_gradient() -> None:
    x = ng.variable([C, N], initial_value=X)
    r_value = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4).astype(np.float64)
    r = ng.constant(r_value, [C, N])
    loss = ng.sum(ng.distributed.allreduce(x * x, "sum") * r)
    (g,) = ng.gradients(loss, [x])
    collectives = [op for op in ng.ordered_ops([g]) if op.op is OpType.ALLREDUCE]
    assert collectives and all(op.arg == AllreduceArg("sum") for op in collectives)
    assert any(op.src[0].axes == r.axes and op is not loss.src[0] for op in collectives)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        np.testing.assert_allclose(t.computation(g)(), 2 * X * r_value, rtol=1e-12)
    with ng.transformers.make_transformer(float_dtype="float64", communicator=TwoRanks(peer=0.5)) as t:
        # d/dx of sum_ranks(...) on a world whose peer's upstream gradient is 0.5 everywhere
        np.testing.assert_allclose(t.computation(g)(), 2 * X * (r_value + 0.5), rtol=1e-12)


def test_bad_arguments_raise_typed_errors() -> None:
    x = ng.placeholder([C, N])
    with pytest.raises(ng.DistributedError, match=r"allreduce: expected op in \('mean', 'sum'\), received 'avg'"):
        ng.distributed.allreduce(x, "avg")
    with pytest.raises(ng.DistributedError, match="expected bucket_bytes None or an int >= 0, received -1"):
        ng.distributed.allreduce(x, bucket_bytes=-1)
    with pytest.raises(ng.DistributedError, match=r"broadcast: expected a root rank \(an int >= 0\), received -1"):
        ng.distributed.broadcast(x, root=-1)
    ids = ng.placeholder([N], dtype="int32")
    with pytest.raises(ng.DTypeError, match=r"allreduce \(mean\): expected float data .* received int32.*op='sum'"):
        ng.distributed.allreduce(ids)
    assert ng.distributed.allreduce(ids, "sum").dtype == "int32"
    with ng.transformers.make_transformer() as t, pytest.raises(ng.DistributedError, match=r"root rank in \[0, 1\)"):
        t.computation(ng.distributed.broadcast(x, root=1), x)


def test_verify_refuses_a_malformed_arg() -> None:
    x = ng.placeholder([C, N])
    with pytest.raises(ng.VerifyError, match="expected an AllreduceArg"):
        ng.verify(ng.distributed.allreduce(x).replace(arg="mean"))
    with pytest.raises(ng.VerifyError, match="an int root rank"):
        ng.verify(ng.distributed.broadcast(x).replace(arg=-3))


def test_serialization_round_trip() -> None:
    x = ng.placeholder([C, N], name="x")
    graph = [ng.distributed.allreduce(x, "sum", bucket_bytes=64) + ng.distributed.allreduce(x * 2.0),
             ng.distributed.broadcast(x, root=1)]
    text = ng.serialize([*graph, x])
    *loaded, lx = ng.deserialize(text)
    assert ng.serialize([*loaded, lx]) == text
    args = sorted(repr(op.arg) for op in ng.ordered_ops(loaded) if op.op in ng.OpGroup.COLLECTIVE)
    assert args == ["1", "mean", "sum bucket_bytes=64"]
    comm = TwoRanks(peer=1.0)
    for a, b in zip(_run(graph, x, X, communicator=comm), _run(loaded, lx, X, communicator=comm)):
        np.testing.assert_array_equal(a, b)


def test_compiled_buckets_are_not_serialized() -> None:
    x = ng.placeholder([C, N])
    with ng.transformers.make_transformer() as t:
        order = t.computation(ng.distributed.allreduce(x), x).graph.order
    start = next(op for op in order if op.op is OpType.ALLREDUCE_START)
    wait = next(op for op in order if op.op is OpType.ALLREDUCE_WAIT)
    for op in (start, wait):
        with pytest.raises(ng.SerializationError, match="serialize the graph before compiling it"):
            ng.serialize([op])
