"""Compiled pooling (``transformers/numpy/compiled_pool.py``) against the shared NumPy kernels and PyTorch:
max and average, forward and gradient, 1 to 3 spatial axes, odd sizes, strides, padding, ceil mode,
``count_include_pad``, ties and NaN; the channel split over two workers; the fallbacks; the disk cache."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from disk_cache import run_twice

import ngraph_core as ng
from ngraph_core.transformers.numpy import compiled_pool, runtime

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path_factory, monkeypatch):
    """One cache directory for the module's tests (compiles are shared), never the user's home."""
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ng-cache"))


def pool_graph(op: str, c: int, spatial: tuple[int, ...], n: int, window, strides, padding, ceil_mode=False,
               count_include_pad=True, batch_first=False, ties=False, dtype="float32", seed=0):
    """``pooling`` of a placeholder and its gradient for a fed ``dy``: (results, placeholders, values)."""
    rng = np.random.default_rng(seed)
    names = "DHW"[3 - len(spatial):]
    sp = [ng.make_axis(length, name) for length, name in zip(spatial, names)]
    C, N = ng.make_axis(c, "C"), ng.make_axis(n, "N")
    axes = [N, C, *sp] if batch_first else [C, *sp, N]
    shape = tuple(a.length for a in axes)
    xv = rng.integers(-2, 3, shape).astype(dtype) if ties else rng.standard_normal(shape).astype(dtype)
    x = ng.placeholder(axes)
    y = ng.pooling(x, window, op=op, strides=strides, padding=padding, ceil_mode=ceil_mode,
                   count_include_pad=count_include_pad)
    dy = ng.placeholder(y.axes)
    dyv = rng.standard_normal(y.axes.lengths).astype(dtype)
    return [y, *ng.gradients(y, [x], error=dy)], [x, dy], [xv, dyv]


def run(monkeypatch, kernels: str, case: tuple, dtype="float32") -> list[np.ndarray]:
    monkeypatch.setenv("NG_KERNELS", kernels)
    results, placeholders, values = case
    with ng.transformers.make_transformer(float_dtype=dtype) as t:
        return [np.array(v) for v in t.computation(results, *placeholders)(*values)]


def compiled_names(monkeypatch) -> list[str]:
    """Records which compiled loops the kernels made (proof the compiled path was taken)."""
    made: list[str] = []
    real = compiled_pool.loops

    def spy(name):
        made.append(name)
        return real(name)

    monkeypatch.setattr(compiled_pool, "loops", spy)
    return made


CASES = [
    # op, C, spatial, N, window, strides, padding, ceil, count_include_pad
    ("max", 3, (8, 8), 5, 2, 2, 0, False, True),  # disjoint windows covering the input: written once
    ("max", 2, (8, 7), 3, 2, 3, 0, False, True),  # disjoint, gaps between windows: zeroed first
    ("max", 2, (7, 9), 3, 3, 2, 1, False, True),
    ("max", 4, (9, 7), 6, 3, 1, 1, False, True),  # overlapping windows
    ("max", 2, (7, 6), 3, (3, 2), (2, 1), (1, 0), True, True),
    ("max", 3, (11,), 4, 3, 2, 1, True, True),
    ("max", 2, (5, 6, 7), 3, 2, (1, 2, 2), (1, 0, 1), False, True),
    ("avg", 3, (8, 8), 5, 2, 2, 0, False, True),
    ("avg", 2, (8, 7), 3, 2, 3, 0, False, True),
    ("avg", 2, (7, 9), 3, 3, 2, 1, False, True),
    ("avg", 2, (7, 9), 3, 3, 2, 1, True, False),
    ("avg", 4, (9, 7), 6, 3, 1, 1, False, False),
    ("avg", 3, (11,), 4, 3, 2, 1, True, True),
    ("avg", 2, (5, 6, 7), 3, 2, (1, 2, 2), (1, 0, 1), True, False),
    # a batch of one: the forward runs the max1/avg1 loops
    ("max", 3, (16, 16), 1, 3, 2, 1, False, True),
    ("max", 2, (7, 6), 1, (3, 2), (2, 1), (1, 0), True, True),
    ("avg", 2, (7, 9), 1, 3, 2, 1, True, False),
    ("avg", 2, (5, 6, 7), 1, 2, (1, 2, 2), (1, 0, 1), False, True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[2]))}-w{c[4]}-s{c[5]}-p{c[6]}")
def test_compiled_matches_the_shared_kernels(monkeypatch, case):
    op, c, spatial, n, window, strides, padding, ceil_mode, include = case
    graph = pool_graph(op, c, spatial, n, window, strides, padding, ceil_mode, include)
    reference = run(monkeypatch, "numpy", graph)
    made = compiled_names(monkeypatch)
    got = run(monkeypatch, "", graph)
    assert sorted(set(made)) == sorted({op + ("1" if n == 1 else ""), f"{op}_bprop"})
    for a, b in zip(got, reference):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def random_cases(count: int, seed: int) -> list[tuple]:
    """Random pooling geometries (1-3 spatial axes, windows up to 3, strides up to 3, any valid padding,
    ceil mode, both divisors), drawn from a fixed seed so a failure reproduces."""
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        rank = int(rng.integers(1, 4))
        window = tuple(int(v) for v in rng.integers(1, 4, rank))
        strides = tuple(int(v) for v in rng.integers(1, 4, rank))
        padding = tuple(int(rng.integers(0, w // 2 + 1)) for w in window)
        spatial = tuple(int(w + rng.integers(0, 7)) for w in window)
        cases.append((str(rng.choice(["max", "avg"])), int(rng.integers(1, 5)), spatial, int(rng.integers(1, 6)),
                      window, strides, padding, bool(rng.integers(0, 2)), bool(rng.integers(0, 2))))
    return cases


@pytest.mark.parametrize("case", random_cases(16, seed=12), ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[2]))}")
def test_random_geometries_match_the_shared_kernels(monkeypatch, case):
    op, c, spatial, n, window, strides, padding, ceil_mode, include = case
    graph = pool_graph(op, c, spatial, n, window, strides, padding, ceil_mode, include, seed=len(spatial))
    reference = run(monkeypatch, "numpy", graph)
    got = run(monkeypatch, "", graph)
    for a, b in zip(got, reference):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["max", "avg"])
def test_float64_and_ties_route_like_the_reference(monkeypatch, op):
    graph = pool_graph(op, 3, (9, 8), 7, 3, 1, 1, ties=True, dtype="float64")
    reference = run(monkeypatch, "numpy", graph, "float64")
    got = run(monkeypatch, "", graph, "float64")
    for a, b in zip(got, reference):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    if op == "max":  # each window's gradient lands on exactly one tap: the total is conserved
        assert got[1].sum() == pytest.approx(graph[2][1].sum(), rel=1e-12)


def test_against_torch_with_ties(monkeypatch):
    torch = pytest.importorskip("torch")
    graph = pool_graph("max", 3, (9, 8), 4, 3, 2, 1, ceil_mode=True, ties=True, dtype="float64")
    y, dx = run(monkeypatch, "", graph, "float64")
    xv, dyv = graph[2]
    xt = torch.tensor(np.moveaxis(xv, -1, 0), requires_grad=True)  # [C, H, W, N] -> NCHW
    yt = torch.nn.functional.max_pool2d(xt, 3, 2, 1, ceil_mode=True)
    yt.backward(torch.tensor(np.moveaxis(dyv, -1, 0)))
    np.testing.assert_allclose(y, np.moveaxis(yt.detach().numpy(), 0, -1), rtol=1e-12)
    np.testing.assert_allclose(dx, np.moveaxis(xt.grad.numpy(), 0, -1), rtol=1e-12)

    graph = pool_graph("avg", 3, (9, 8), 4, 3, 2, 1, ceil_mode=True, count_include_pad=False, dtype="float64")
    y, dx = run(monkeypatch, "", graph, "float64")
    xv, dyv = graph[2]
    xt = torch.tensor(np.moveaxis(xv, -1, 0), requires_grad=True)
    yt = torch.nn.functional.avg_pool2d(xt, 3, 2, 1, ceil_mode=True, count_include_pad=False)
    yt.backward(torch.tensor(np.moveaxis(dyv, -1, 0)))
    np.testing.assert_allclose(y, np.moveaxis(yt.detach().numpy(), 0, -1), rtol=1e-12)
    np.testing.assert_allclose(dx, np.moveaxis(xt.grad.numpy(), 0, -1), rtol=1e-12)


def test_nan_propagates_through_max(monkeypatch):
    results, placeholders, (xv, dyv) = pool_graph("max", 2, (6, 6), 3, 2, 2, 0)
    xv[1, 2, 3, 1] = np.nan  # output (1, 1, 1, 1)'s window
    y_ref = run(monkeypatch, "numpy", (results, placeholders, [xv, dyv]))[0]
    y = run(monkeypatch, "", (results, placeholders, [xv, dyv]))[0]
    assert np.isnan(y[1, 1, 1, 1]) and np.isnan(y_ref[1, 1, 1, 1])
    assert np.isnan(y).sum() == 1
    np.testing.assert_array_equal(y, y_ref)


def test_nan_propagates_through_max_at_batch_one(monkeypatch):
    results, placeholders, (xv, dyv) = pool_graph("max", 2, (6, 6), 1, 2, 2, 0)
    xv[1, 2, 3, 0] = np.nan  # output (1, 1, 1, 0)'s window
    xv[0, 4, 4, 0] = np.inf
    y_ref = run(monkeypatch, "numpy", (results, placeholders, [xv, dyv]))[0]
    made = compiled_names(monkeypatch)
    y = run(monkeypatch, "", (results, placeholders, [xv, dyv]))[0]
    assert "max1" in made
    assert np.isnan(y[1, 1, 1, 0]) and np.isnan(y).sum() == 1 and y[0, 2, 2, 0] == np.inf
    np.testing.assert_array_equal(y, y_ref)


def test_another_axes_order_takes_the_reference_path(monkeypatch):
    graph = pool_graph("max", 3, (7, 9), 4, 3, 2, 1, batch_first=True)
    reference = run(monkeypatch, "numpy", graph)
    got = run(monkeypatch, "", graph)
    for a, b in zip(got, reference):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_reference_only_makes_no_compiled_loops(monkeypatch):
    made = compiled_names(monkeypatch)
    run(monkeypatch, "numpy", pool_graph("max", 3, (8, 8), 5, 2, 2, 0))
    assert made == []


@pytest.mark.parametrize("op", ["max", "avg"])
def test_two_workers_split_the_channels(monkeypatch, op):
    graph = pool_graph(op, 5, (32, 32), 32, 2, 2, 0)  # 5 * 16 * 16 * 32 outputs: above MIN_SPLIT_ELEMENTS
    reference = run(monkeypatch, "numpy", graph)
    monkeypatch.setenv("NG_THREADS", "2")
    parts: list[int] = []
    real = runtime.run

    def spy(tasks):
        parts.append(len(tasks))
        return real(tasks)

    monkeypatch.setattr(runtime, "run", spy)
    got = run(monkeypatch, "", graph)
    assert parts.count(2) == 2  # forward and gradient, each over two channel ranges
    for a, b in zip(got, reference):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_a_second_process_reuses_the_compiled_loops(tmp_path):
    script = textwrap.dedent("""
        import numpy as np
        import ngraph_core as ng
        C, H, W, N = (ng.make_axis(v, n) for v, n in ((3, "C"), (8, "H"), (8, "W"), (4, "N")))
        x = ng.placeholder([C, H, W, N])
        ys = [ng.pooling(x, 2, op=op) for op in ("max", "avg")]
        grads = [g for y in ys for g in ng.gradients(y, [x], error=ng.constant(1.0, y.axes))]
        with ng.transformers.make_transformer() as t:
            values = t.computation([*ys, *grads], x)(np.arange(3 * 8 * 8 * 4, dtype="float32").reshape(3, 8, 8, 4))
        print(*(float(np.asarray(v).sum()) for v in values))
    """)
    first, suffixes = run_twice(script, {"NG_KERNELS": ""}, tmp_path / "cache")
    assert first.split()  # four sums printed
    assert ".nbi" in suffixes and ".nbc" in suffixes  # numba's index and machine code were written


@pytest.mark.parametrize("name", ["max_bprop", "avg_bprop"])
def test_the_gradient_zeroes_what_no_window_reads_unless_the_windows_tile_the_input(name):
    """Called directly on a dirty (NaN-filled) gradient buffer, as a reused workspace can be: with
    ``fresh`` false (gaps between windows) every element is written, the gaps with zeros; the kernels
    pass ``fresh`` only where the windows tile the input."""
    from ngraph_core.ir.conv import PoolArg
    from ngraph_core.transformers.kernels.pool import Geometry

    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 1, 8, 7, 3)).astype("float32")  # (C, D, H, W, N): window 2, stride 3
    dy = rng.standard_normal((2, 1, 3, 2, 3)).astype("float32")
    dx = np.full_like(x, np.nan)
    window = (1, 2, 2, 1, 3, 3, 0, 0, 0)
    loop = compiled_pool.loops(name)
    extra = (False,) if name == "max_bprop" else (False, *(np.ones(m, "float32") * 4 for m in (1, 3, 2)))
    loop(*((x, dy, dx) if name == "max_bprop" else (dy, dx)), 0, 2, *window, *extra)
    assert not np.isnan(dx).any()
    assert (dx[:, :, 2::3] == 0).all() and (dx[:, :, :, 2::3] == 0).all()  # rows and columns no window reads
    C, H, W, N = (ng.make_axis(v, a) for v, a in ((2, "C"), (8, "H"), (7, "W"), (3, "N")))
    gapped = PoolArg("max", (2, 2), (3, 3), (0, 0))
    tiled = PoolArg("max", (2, 2), (2, 2), (0, 0))
    x_axes = ng.make_axes([C, H, W, N])
    y_gapped = ng.make_axes([C, ng.make_axis(3, "H"), ng.make_axis(2, "W"), N])
    y_tiled = ng.make_axes([C, ng.make_axis(4, "H"), ng.make_axis(3, "W"), N])
    assert not Geometry(x_axes, y_gapped, gapped).covers_input
    assert not Geometry(x_axes, y_tiled, tiled).covers_input  # 7 columns: the last one is read by no window
    tiled_even = ng.make_axes([C, H, ng.make_axis(6, "W"), N])
    assert Geometry(tiled_even, ng.make_axes([C, ng.make_axis(4, "H"), ng.make_axis(3, "W"), N]), tiled).covers_input
