"""The NumPy transformer's parallel runtime (``transformers/numpy/runtime.py``): worker count, BLAS held at
one thread, split GEMMs equal to NumPy's, and kernels that give the same values with 1 and 2 workers."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.distributed import world
from ngraph_core.transformers.kernels import conv as conv_kernels
from ngraph_core.transformers.numpy import runtime


def test_threads_from_ng_threads(monkeypatch):
    monkeypatch.setenv("NG_THREADS", "3")
    assert runtime.threads() == 3
    monkeypatch.delenv("NG_THREADS")
    for var in runtime.LOCAL_RANKS_VARS:
        monkeypatch.delenv(var, raising=False)
    cores = len(runtime.os.sched_getaffinity(0))
    assert runtime.threads() == cores
    monkeypatch.setenv("MPI_LOCALNRANKS", "2")  # two ranks on this machine (mpiexec -n 2): half each
    assert runtime.threads() == max(1, cores // 2)
    monkeypatch.delenv("MPI_LOCALNRANKS")
    for bad in ("0", "-2", "two"):
        monkeypatch.setenv("NG_THREADS", bad)
        with pytest.raises(ValueError, match=f"NG_THREADS={bad!r}: expected a positive integer"):
            runtime.threads()


@pytest.mark.parametrize("ranks, ng_threads, threads, blas", [
    # ranks on this machine, NG_THREADS, then the workers and BLAS's limit (None: left alone) for c cores
    (1, "", lambda c: c, lambda c: 1 if c > 1 else None),  # alone: every core; BLAS held at one with workers
    (2, "", lambda c: max(1, c // 2), lambda c: 1),  # mpiexec -n 2: half the cores each, BLAS at one
    (4, "", lambda c: max(1, c // 4), lambda c: 1),
    (2, "1", lambda c: 1, lambda c: max(1, c // 2)),  # one worker asked for: BLAS gets the rank's share
    (1, "1", lambda c: 1, lambda c: None),  # one worker alone on the machine: BLAS left alone
    (2, "3", lambda c: 3, lambda c: 1),
])
def test_threads_per_rank_default(monkeypatch, ranks, ng_threads, threads, blas):
    """The rule README's distributed section states: ``NG_THREADS``, else cores / ranks on this machine
    (at least 1), counted by ``distributed.init`` (MPI's shared-memory split) or the launcher's variables;
    ranks sharing a machine never leave BLAS on more than their share."""
    cores = len(runtime.os.sched_getaffinity(0))
    monkeypatch.setenv("NG_THREADS", ng_threads)
    for var in runtime.LOCAL_RANKS_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setitem(world._state, "local_size", None)
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", str(ranks))  # Open MPI's launcher
    assert (runtime.local_ranks(), runtime.threads(), runtime.blas_limit()) == (ranks, threads(cores), blas(cores))
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "7")
    monkeypatch.setitem(world._state, "local_size", ranks)  # distributed.init's count outranks the variables
    assert (runtime.local_ranks(), runtime.threads(), runtime.blas_limit()) == (ranks, threads(cores), blas(cores))


def test_own_cores_under_mpiexec_holds_blas_at_the_rank_share(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    monkeypatch.setenv("NG_THREADS", "1")
    monkeypatch.setitem(world._state, "local_size", len(runtime.os.sched_getaffinity(0)))  # a rank per core
    monkeypatch.setattr(runtime, "_owned", False)
    with threadpoolctl.threadpool_limits(limits=4, user_api="blas"):
        runtime.own_cores()
        infos = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
        assert infos and all(i["num_threads"] == 1 for i in infos)


@pytest.mark.parametrize("length, parts", [(10, 3), (2, 5), (7, 1), (16, 2)])
def test_split_covers_every_index_once(length, parts):
    ranges = runtime.split(length, parts)
    assert len(ranges) == min(length, parts)
    assert [i for start, stop in ranges for i in range(start, stop)] == list(range(length))
    assert all(stop > start for start, stop in ranges)


@pytest.mark.parametrize("a_shape, b_shape", [
    ((64, 300), (300, 700)),  # columns split
    ((700, 300), (300, 64)),  # rows split
    ((16, 24, 40), (16, 40, 600)),  # batch split
    ((24, 40), (3, 40, 5000)),  # a 2-d left operand against a batch: batch split
    ((1, 8000), (8000, 1200)),  # one row: columns
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_split_matmul_equals_numpy(a_shape, b_shape, dtype):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
    expected = np.matmul(a, b)
    assert expected.size * a.shape[-1] >= runtime.MIN_PARALLEL_FLOPS  # the split path runs
    out = np.full_like(expected, np.nan)
    assert runtime.matmul(a, b, out, workers=2) is out
    np.testing.assert_allclose(out, expected, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-4)


def test_split_matmul_into_strided_views():
    """Parts are strided views of the caller's operands and output (a transposed operand, a column block)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((500, 300))
    b = rng.standard_normal((900, 500)).T  # (500, 900), transposed strides
    whole = np.zeros((300, 1000))
    out = whole[:, 50:950]
    runtime.matmul(a.T, b, out, workers=2)
    np.testing.assert_allclose(out, a.T @ b, rtol=1e-12)
    assert not whole[:, :50].any() and not whole[:, 950:].any()


def test_a_failing_part_raises():
    with pytest.raises(ValueError):
        runtime.run([lambda: None, lambda: (_ for _ in ()).throw(ValueError("part 2"))])


def test_own_cores_holds_blas_at_one_thread(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    monkeypatch.setenv("NG_THREADS", "2")
    monkeypatch.setattr(runtime, "_owned", False)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        runtime.own_cores()
        infos = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
        assert infos and all(i["num_threads"] == 1 for i in infos)


def _training_results(monkeypatch, workers: str) -> list[np.ndarray]:
    """A conv layer (Winograd) + dense layer step: values and gradients with ``workers`` threads."""
    monkeypatch.setenv("NG_THREADS", workers)
    monkeypatch.setenv("NG_CONV", "winograd")
    rng = np.random.default_rng(2)
    C, H, W, N = ng.make_axis(8, "C"), ng.make_axis(12, "H"), ng.make_axis(10, "W"), ng.make_axis(16, "N")
    x = ng.placeholder([C, H, W, N])
    w = ng.variable([C, ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(8, "K")],
                    initial_value=rng.normal(0, 0.2, (8, 3, 3, 8)))
    y = ng.relu(ng.convolution(x, w, padding=1))
    d = ng.make_axis(600, "D")
    v = ng.variable([d, *y.axes[:-1]], initial_value=rng.normal(0, 0.01, (600, 8, 12, 10)))
    loss = ng.sum(ng.tanh(ng.dot(v, y)))
    value = rng.standard_normal((8, 12, 10, 16)).astype("float32")
    with ng.transformers.make_transformer() as t:
        return [np.asarray(r) for r in t.computation([loss, *ng.gradients(loss, [x, w, v])], x)(value)]


def test_one_and_two_workers_agree(monkeypatch):
    one = _training_results(monkeypatch, "1")
    split: list[int] = []
    real_run = runtime.run
    monkeypatch.setattr(runtime, "run", lambda tasks: split.append(len(tasks)) or real_run(tasks))
    two = _training_results(monkeypatch, "2")
    # Winograd tile rows (forward, data and filter gradients) and the dense GEMMs went to two workers
    assert split.count(2) >= 4 and set(split) <= {1, 2}
    for a, b in zip(one, two):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(a).max())


def _im2col_results(monkeypatch, workers: str, strides: int, groups: int) -> list[np.ndarray]:
    """An im2col convolution (forward, data and filter gradients) with ``workers`` threads: 7 output rows
    (an odd split), 4x4 windows; stride 2 makes the data gradient col2im."""
    monkeypatch.setenv("NG_THREADS", workers)
    monkeypatch.setenv("NG_CONV", "im2col")
    monkeypatch.setattr(conv_kernels, "SHARED_COL_ELEMENTS", 0)  # this small layer's col split over the workers
    rng = np.random.default_rng(3)
    c, k = 6, 4
    size = 15 if strides == 2 else 8
    C, H, W, N = ng.make_axis(c, "C"), ng.make_axis(size, "H"), ng.make_axis(size - 2, "W"), ng.make_axis(5, "N")
    x = ng.placeholder([C, H, W, N])
    w = ng.variable([ng.make_axis(c // groups, "CI"), ng.make_axis(4, "R"), ng.make_axis(4, "S"),
                     ng.make_axis(k, "K")], initial_value=rng.normal(0, 0.2, (c // groups, 4, 4, k)))
    y = ng.convolution(x, w, strides=strides, padding=1, groups=groups)
    loss = ng.sum(ng.tanh(y) * y)
    value = rng.standard_normal(x.axes.lengths).astype("float32")
    with ng.transformers.make_transformer() as t:
        return [np.asarray(r) for r in t.computation([y, *ng.gradients(loss, [x, w])], x)(value)]


@pytest.mark.parametrize("strides, groups, budget", [(2, 1, None), (2, 2, None), (1, 1, None), (2, 1, 3000),
                                                     (1, 1, 1)])
def test_im2col_convolutions_split_over_two_workers(monkeypatch, strides, groups, budget):
    """``budget``: a smaller col block for each worker, so rows are cut along the second spatial axis
    (3000 bytes: in two or three; 1: single columns)."""
    one = _im2col_results(monkeypatch, "1", strides, groups)
    if budget is not None:
        monkeypatch.setattr(conv_kernels, "WORKER_BLOCK_BYTES", budget)
    cuts: list[int] = []
    real_block = conv_kernels.Im2col.block
    monkeypatch.setattr(conv_kernels.Im2col, "block",
                        lambda self, windows, block, *a: cuts.append(block[3] - block[2] < self.second)
                        or real_block(self, windows, block, *a))
    split: list[int] = []
    real_run = runtime.run
    monkeypatch.setattr(runtime, "run", lambda tasks: split.append(len(tasks)) or real_run(tasks))
    two = _im2col_results(monkeypatch, "2", strides, groups)
    assert any(cuts) == (budget is not None)
    # output rows per worker (forward, filter gradient), and input channels per worker (col2im) without groups
    assert split.count(2) >= (3 if strides == 2 and groups == 1 else 2)
    for a, b in zip(one, two):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(a).max())


@pytest.mark.parametrize("rows, row_bytes, workers", [(32, 221184, 2), (7, 57344, 2), (33, 3 << 20, 2),
                                                      (5, 4096, 3), (1, 1000, 2)])
def test_worker_blocks_share_out_the_rows(rows, row_bytes, workers):
    """Rows under ``WORKER_BLOCK_BYTES`` go out an equal count to each worker (a 32-row stem of 221 KB rows:
    16 and 16, each cut into blocks within ``COL_BLOCK_BYTES``; dealing out blocks had given 11 against
    21); bigger rows are cut along the second axis. Either way every position is in one block."""
    parts = conv_kernels.worker_blocks(np, (rows, 8), row_bytes, workers)
    positions = [(r, c) for part in parts for a, b, c0, c1 in part for r in range(a, b) for c in range(c0, c1)]
    assert sorted(positions) == [(r, c) for r in range(rows) for c in range(8)]
    shares = [sum((b - a) * (c1 - c0) for a, b, c0, c1 in part) for part in parts]
    assert max(shares) - min(shares) <= 8  # at most one row (or, cut, one block) apart
    for part in parts:
        for a, b, _, _ in part:
            assert (b - a) == 1 or (b - a) * row_bytes <= conv_kernels.COL_BLOCK_BYTES


def _mlp_step(monkeypatch, workers: str, calls: list[int] | None = None) -> list[np.ndarray]:
    """A two-layer MLP's loss and gradients (GEMMs of 9.8M multiply-adds, no section of our own)."""
    monkeypatch.setenv("NG_THREADS", workers)
    if calls is not None:
        real = runtime.blas_matmul
        monkeypatch.setattr(runtime, "blas_matmul", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(5)
    F, H, N = ng.make_axis(300, "F"), ng.make_axis(256, "H"), ng.make_axis(128, "N")
    x = ng.placeholder([F, N])
    w1 = ng.variable([H, F], initial_value=rng.normal(0, 0.05, (256, 300)))
    w2 = ng.variable([ng.make_axis(10, "O"), H], initial_value=rng.normal(0, 0.05, (10, 256)))
    loss = ng.sum(ng.tanh(ng.dot(w2, ng.relu(ng.dot(w1, x)))))
    value = rng.standard_normal((300, 128)).astype("float32")
    with ng.transformers.make_transformer() as t:
        computation = t.computation([loss, *ng.gradients(loss, [w1, w2])], x)
        assert t.blas_threads(computation.graph.order) == (workers != "1")
        return [np.asarray(r) for r in computation(value)]


def test_a_gemm_only_computation_runs_its_gemms_on_blas_threads(monkeypatch):
    """With two workers and no convolution or pooling, the big GEMMs are single calls
    on BLAS's threads (``blas_matmul``), the count set back to one after each; values as with one worker."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    monkeypatch.setattr(runtime, "_owned", False)
    one = _mlp_step(monkeypatch, "1")
    calls: list[int] = []
    two = _mlp_step(monkeypatch, "2", calls)
    assert len(calls) >= 2  # the forward w1 @ x and its gradients
    infos = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    assert infos and all(i["num_threads"] == 1 for i in infos)
    for a, b in zip(one, two):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(a).max())


def test_sections_of_our_own_keep_the_gemms_on_the_workers(monkeypatch):
    """A convolution or a pooling keeps every GEMM of the computation split over the workers; element-wise
    programs, split or not, do not."""
    monkeypatch.setenv("NG_THREADS", "2")
    C, H, W, N = ng.make_axis(4, "C"), ng.make_axis(8, "H"), ng.make_axis(8, "W"), ng.make_axis(4, "N")
    x = ng.placeholder([C, H, W, N])
    w = ng.variable([C, ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(4, "K")], initial_value=0.1)
    big = ng.placeholder([ng.make_axis(1024, "A"), ng.make_axis(512, "B")])
    with ng.transformers.make_transformer() as t:
        assert not t.blas_threads(t.computation(ng.convolution(x, w, padding=1), x).graph.order)
        assert not t.blas_threads(t.computation(ng.pooling(x, (2, 2), strides=2), x).graph.order)
        assert t.blas_threads(t.computation(ng.tanh(big) * big + 1.0, big).graph.order)
        assert t.blas_threads(t.computation(ng.tanh(x) * x + 1.0, x).graph.order)
    monkeypatch.setenv("NG_THREADS", "1")
    with ng.transformers.make_transformer() as t:
        assert not t.blas_threads(t.computation(ng.tanh(x), x).graph.order)


def test_blas_matmul_falls_back_while_another_thread_holds_blas(monkeypatch):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 96)), rng.standard_normal((96, 80))
    out = np.empty((64, 80))
    split: list[int] = []
    real = runtime.matmul
    monkeypatch.setattr(runtime, "matmul", lambda *args: split.append(1) or real(*args))
    with runtime._wide:  # another thread's call in progress
        runtime.blas_matmul(a, b, out, 2)
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    assert split == [1]


def test_blas_matmul_raises_the_blas_thread_count_for_the_call_only(monkeypatch):
    """The count goes to the workers' for the one call and back to one, also when the call fails."""
    counts: list[int] = []

    class Recording:
        def set_num_threads(self, n: int) -> None:
            counts.append(n)

    monkeypatch.setattr(runtime, "_blas", Recording())
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((32, 48)), rng.standard_normal((48, 40))
    out = np.empty((32, 40))
    runtime.blas_matmul(a, b, out, 2)
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    assert counts == [2, 1]
    with pytest.raises(ValueError):
        runtime.blas_matmul(a, a, out, 2)  # shapes that do not multiply
    assert counts == [2, 1, 2, 1] and not runtime._wide.locked()
