"""Compiled (numba) fused kernels against the NumPy reference kernel: every element-wise OpType,
broadcast operands, constants, a dot head, float32 and float64, the on-disk cache, and fallbacks."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import numpy as np
import pytest
from disk_cache import run_twice

import ngraph_core as ng
from ngraph_core.ir import OpType
from ngraph_core.transformers.numpy import numba_kernels as compiled
from ngraph_core.transformers.numpy import numba_loader

pytest.importorskip("numba")

N = 37  # odd, so no vector width divides it
H, E = ng.make_axis(5, name="H"), ng.make_axis(N, name="E")
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -2.5]

# op -> (build(u, v), exact): exact ops must agree bit for bit; others (libm) to a few ulps
UNARY: dict[OpType, tuple[Callable, bool]] = {
    OpType.NEG: (ng.negative, True), OpType.ABS: (ng.absolute, True), OpType.EXP: (ng.exp, False),
    OpType.LOG: (ng.log, False), OpType.LOG1P: (ng.log1p, False), OpType.SQRT: (ng.sqrt, True),
    OpType.SQUARE: (ng.square, True), OpType.RECIPROCAL: (ng.reciprocal, True), OpType.TANH: (ng.tanh, False),
    OpType.SIGN: (ng.sign, True), OpType.SIN: (ng.sin, False), OpType.COS: (ng.cos, False),
    OpType.RELU: (ng.relu, True), OpType.SIGMOID: (ng.sigmoid, False), OpType.RSQRT: (ng.rsqrt, True),
}
BINARY: dict[OpType, tuple[Callable, bool]] = {
    OpType.ADD: (ng.add, True), OpType.SUB: (ng.subtract, True), OpType.MUL: (ng.multiply, True),
    OpType.DIV: (ng.divide, True), OpType.POW: (ng.power, False), OpType.MAXIMUM: (ng.maximum, True),
    OpType.MINIMUM: (ng.minimum, True), OpType.EQUAL: (ng.equal, True), OpType.NOT_EQUAL: (ng.not_equal, True),
    OpType.LESS: (ng.less, True), OpType.LESS_EQUAL: (ng.less_equal, True), OpType.GREATER: (ng.greater, True),
    OpType.GREATER_EQUAL: (ng.greater_equal, True),
}


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path_factory, monkeypatch):
    """One cache directory for the module's tests (compiles are shared), never the user's home."""
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ng-cache"))
    monkeypatch.setattr(compiled, "COMPILE_LIBM_STEPS", True)  # check libm steps' semantics too


def data(dtype: str, seed: int, shape: tuple[int, ...] = (5, N)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2).astype(dtype)
    flat = x.reshape(-1)
    flat[:len(SPECIAL)] = np.array(SPECIAL, dtype=dtype)[rng.permutation(len(SPECIAL))]
    return x


def run_both(monkeypatch, build: Callable[[], tuple], feeds: list[np.ndarray]) -> tuple[list, list, int]:
    """Results with the NumPy kernel, with NG_KERNELS=numba, and how many fused ops were compiled."""
    made: list[object] = []
    real = compiled.compiled_fused

    def spy(op, kc):
        kernel = real(op, kc)
        made.append(kernel)
        return kernel

    monkeypatch.setattr(compiled, "compiled_fused", spy)
    results = []
    for mode in ("numpy", "numba"):
        monkeypatch.setenv("NG_KERNELS", mode)
        outputs, inputs = build()
        with ng.transformers.make_transformer() as t, np.errstate(all="ignore"):
            f = t.computation(outputs, *inputs)
            assert any(op.op is OpType.FUSED for op in f.graph.order)
            results.append([np.array(r) for r in f(*feeds)])
    return results[0], results[1], sum(k is not None for k in made)


def check(ref: list, got: list, exact: bool, dtype: str) -> None:
    for r, g in zip(ref, got, strict=True):
        assert g.dtype == r.dtype == np.dtype(dtype)
        if exact:
            np.testing.assert_array_equal(g, r)
        else:
            tol = 1e-6 if dtype == "float32" else 1e-13
            np.testing.assert_allclose(g, r, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", list(UNARY), ids=lambda k: k.value)
def test_every_unary_step_matches_numpy(monkeypatch, kind, dtype):
    fn, exact = UNARY[kind]

    def build():
        x = ng.placeholder([H, E], dtype=dtype)
        return [fn(x * 1.5 - 0.25)], [x]

    ref, got, n_compiled = run_both(monkeypatch, build, [data(dtype, 1)])
    assert n_compiled == 1
    check(ref, got, exact, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", list(BINARY), ids=lambda k: k.value)
def test_every_binary_step_matches_numpy(monkeypatch, kind, dtype):
    fn, exact = BINARY[kind]

    def build():
        x, y = ng.placeholder([H, E], dtype=dtype), ng.placeholder([H, E], dtype=dtype)
        return [fn(ng.absolute(x), y * 0.5)], [x, y]

    feeds = [data(dtype, 2), data(dtype, 3)]
    feeds[1].reshape(-1)[12:18] = np.abs(feeds[0].reshape(-1)[12:18]) * 2  # equal operands for the comparisons
    # NaN in one operand only, each way round: NaN must propagate through maximum/minimum from either side
    assert not np.isnan(feeds[0].reshape(-1)[np.isnan(feeds[1].reshape(-1))]).any()
    ref, got, n_compiled = run_both(monkeypatch, build, feeds)
    assert n_compiled == 1
    if kind in (OpType.EQUAL, OpType.LESS):
        assert 0 < got[0].sum() < got[0].size  # both 0s and 1s: the comparison was really exercised
    check(ref, got, exact, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_where_cast_broadcast_and_constants(monkeypatch, dtype):
    def build():
        x = ng.placeholder([H, E], dtype=dtype)
        bias = ng.placeholder([H], dtype=dtype)  # broadcast along E: a two-level loop
        scale = ng.placeholder([], dtype=dtype)  # one value everywhere: passed as a scalar
        count = ng.placeholder([H, E], dtype="int32")  # another dtype: only cast reads it
        y = ng.where(ng.greater(x, bias), x * scale + bias, ng.cast(count, dtype) * 0.1 - 7.0)
        return [ng.tanh(y) + y * float(np.float32(1e-3))], [x, bias, scale, count]

    feeds = [data(dtype, 4), np.linspace(-1, 1, 5).astype(dtype), np.array(0.75, dtype=dtype),
             np.arange(5 * N, dtype=np.int32).reshape(5, N) - 40]
    ref, got, n_compiled = run_both(monkeypatch, build, feeds)
    assert n_compiled == 1
    check(ref, got, False, dtype)
    x, bias, scale, count = feeds
    with np.errstate(all="ignore"):
        y = np.where(x > bias[:, None], x * scale + bias[:, None], count.astype(dtype) * dtype_scalar(dtype, 0.1) - 7)
    finite = np.isfinite(y)
    np.testing.assert_allclose(got[0][finite], (np.tanh(y) + y * dtype_scalar(dtype, 1e-3))[finite], rtol=1e-5)


def test_a_large_program_splits_over_two_workers(monkeypatch):
    """From ``PARALLEL_MIN_ELEMENTS`` the compiled loop runs on two workers, each over a range of the
    outermost axis; a broadcast bias and a scalar go with every part, an update in place too."""
    from ngraph_core.transformers.numpy import runtime

    monkeypatch.setenv("NG_THREADS", "2")
    rows = ng.make_axis(7, name="R")  # odd: unequal parts
    cols = ng.make_axis(compiled.PARALLEL_MIN_ELEMENTS // 7 + 13, name="Q")
    parts: list[int] = []
    real_run = runtime.run
    monkeypatch.setattr(runtime, "run", lambda tasks: parts.append(len(tasks)) or real_run(tasks))

    def build():
        x, bias = ng.placeholder([rows, cols]), ng.placeholder([cols])
        scale = ng.placeholder([])
        return [ng.maximum(x * scale + bias, 0.0) - x * 0.5], [x, bias, scale]

    rng = np.random.default_rng(8)
    feeds = [rng.standard_normal((7, cols.length)).astype("float32"),
             rng.standard_normal(cols.length).astype("float32"), np.array(1.5, "float32")]
    ref, got, n_compiled = run_both(monkeypatch, build, feeds)
    assert n_compiled == 1 and parts == [2, 2]  # the NumPy kernel's blocks, then the compiled loop
    check(ref, got, True, "float32")


def dtype_scalar(dtype: str, value: float) -> np.generic:
    return np.dtype(dtype).type(value)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_dot_head_then_the_compiled_epilogue(monkeypatch, dtype):
    K = ng.make_axis(9, name="K")

    def build():
        w, x = ng.placeholder([H, K], dtype=dtype), ng.placeholder([K, E], dtype=dtype)
        b = ng.placeholder([H], dtype=dtype)
        return [ng.sigmoid(ng.dot(w, x) + b)], [w, x, b]

    rng = np.random.default_rng(5)
    feeds = [rng.standard_normal(s).astype(dtype) for s in [(5, 9), (9, N), (5,)]]
    ref, got, n_compiled = run_both(monkeypatch, build, feeds)
    assert n_compiled == 1
    check(ref, got, False, dtype)
    w, x, b = feeds
    np.testing.assert_allclose(got[0], 1 / (1 + np.exp(-(w @ x + b[:, None]))), rtol=1e-5)


def test_generated_source_holds_only_generated_names():
    x = ng.placeholder([H, E], name="secret_input_name")
    y = ng.tanh(x * 2.0 + 1.0)
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, x)
    (op,) = [op for op in f.graph.order if op.op is OpType.FUSED]
    source = compiled.generate_source(op.arg, "float32", ["a"], 1)
    assert source is not None and "secret" not in source and "T(2.0)" in source and "_tanh(" in source
    source64 = compiled.generate_source(op.arg, "float64", ["a"], 1)
    assert source64 is not None and "math.tanh(" in source64 and "_tanh" not in source64  # float64: libm
    assert compiled.generate_source(op.arg, "int32", ["a"], 1) is None  # integer outputs: NumPy's kernel


def test_an_unsupported_program_falls_back_to_numpy(monkeypatch):
    x = ng.placeholder([H, E])
    y = ng.tanh(x * 2.0 + 1.0)
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, x)
    (op,) = [op for op in f.graph.order if op.op is OpType.FUSED]
    monkeypatch.setattr(compiled, "SUPPORTED", compiled.SUPPORTED - {OpType.TANH})
    assert compiled.generate_source(op.arg, "float32", ["a"], 1) is None
    ref, got, n_compiled = run_both(monkeypatch, lambda: ([ng.tanh(x * 2.0 + 1.0)], [x]), [data("float32", 6)])
    assert n_compiled == 0  # the NumPy kernel ran, and nothing was logged or raised
    np.testing.assert_array_equal(got[0], ref[0])
    monkeypatch.setattr(compiled, "HAVE_NUMBA", False)  # numba missing: same fallback
    _, got, n_compiled = run_both(monkeypatch, lambda: ([ng.exp(x * 2.0 + 1.0)], [x]), [data("float32", 6)])
    assert n_compiled == 0 and np.isfinite(got[0]).any()


def test_programs_with_libm_steps_stay_on_numpy_by_default(monkeypatch):
    monkeypatch.setattr(compiled, "COMPILE_LIBM_STEPS", False)
    x = ng.placeholder([H, E])
    ref, got, n_compiled = run_both(monkeypatch, lambda: ([ng.log(x * 2.0 + 100.0)], [x]), [data("float32", 7)])
    assert n_compiled == 0  # log: one libm call per element
    np.testing.assert_array_equal(got[0], ref[0])
    x64 = ng.placeholder([H, E], dtype="float64")
    ref, got, n_compiled = run_both(monkeypatch, lambda: ([ng.tanh(x64 * 2.0 + 1.0)], [x64]), [data("float64", 7)])
    assert n_compiled == 0  # float64 keeps libm's tanh, on NumPy
    np.testing.assert_array_equal(got[0], ref[0])
    ref, got, n_compiled = run_both(monkeypatch, lambda: ([ng.tanh(x * 2.0 + 1.0)], [x]), [data("float32", 7)])
    assert n_compiled == 1  # float32 tanh: the vectorized approximation
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6, atol=1e-7)
    ref, got, n_compiled = run_both(monkeypatch, lambda: ([ng.relu(x * 2.0 + 1.0)], [x]), [data("float32", 7)])
    assert n_compiled == 1
    np.testing.assert_array_equal(got[0], ref[0])


def test_the_default_compiles_large_programs_only(monkeypatch):
    monkeypatch.delenv("NG_KERNELS", raising=False)
    assert numba_loader.kernel_set() == "auto"
    assert not compiled.wanted(compiled.COMPILED_MIN_ELEMENTS - 1) and not compiled.wanted()
    assert compiled.wanted(compiled.COMPILED_MIN_ELEMENTS)
    monkeypatch.setenv("NG_KERNELS", "numba")
    assert compiled.wanted(1) and compiled.wanted()
    monkeypatch.setenv("NG_KERNELS", "numpy")
    assert not compiled.wanted(compiled.COMPILED_MIN_ELEMENTS) and numba_loader.reference_only()
    monkeypatch.setenv("NG_KERNELS", "fast")
    with pytest.raises(ValueError, match="NG_KERNELS='fast'.*auto, numba, numpy"):
        numba_loader.kernel_set()


SCRIPT = textwrap.dedent("""
    import numpy as np
    import ngraph_core as ng
    H, E = ng.make_axis(3, name="H"), ng.make_axis(11, name="E")
    x = ng.placeholder([H, E])
    with ng.transformers.make_transformer() as t:
        f = t.computation(ng.relu(x * 3.0 - 1.0) * x + 0.5, x)
        print(float(f(np.ones((3, 11), dtype=np.float32)).sum()))
""")


def test_a_second_process_reuses_the_disk_cache(tmp_path):
    first, suffixes = run_twice(SCRIPT, {"NG_KERNELS": "numba"}, tmp_path)
    assert suffixes.count(".nbi") == 1 and suffixes.count(".nbc") == 1
    assert float(first) == 33 * 2.5


def test_an_update_computed_in_place_into_its_variable(monkeypatch):
    """``p - 0.1 * g`` written straight into ``p``'s buffer: the compiled loop reads and writes the same memory."""
    monkeypatch.setenv("NG_KERNELS", "numba")
    made: list[object] = []
    real = compiled.compiled_fused
    monkeypatch.setattr(compiled, "compiled_fused", lambda op, kc: made.append(real(op, kc)) or made[-1])
    start = data("float32", 8)
    start[~np.isfinite(start)] = 1.0
    g = ng.placeholder([H, E])
    p = ng.variable([H, E], start)
    grads = np.random.default_rng(9).standard_normal((5, N)).astype(np.float32)
    with ng.transformers.make_transformer() as t:
        f = t.computation(ng.doall([ng.assign(p, ng.maximum(p - 0.1 * g, -1.0))]), g)
        assert any(op.op is OpType.FUSED for op in f.graph.order) and f.graph.into_variables
        f(grads)
        f(grads)
        want = np.maximum(np.maximum(start - np.float32(0.1) * grads, -1) - np.float32(0.1) * grads, -1)
        np.testing.assert_array_equal(t.read_variable(p), want)
    assert [k is not None for k in made] == [True]  # the compiled path ran


EDGES32 = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-8, -1e-8, 0.29999, 0.3, 0.30001, -0.3, 1.0, -1.0, 9.0, -9.0, 20.0,
                    -20.0, 87.0, 88.72, 88.73, 89.0, 100.0, -87.3, -103.0, -103.97, -104.0, -150.0, np.inf, -np.inf,
                    np.nan], dtype="float32")


@pytest.mark.parametrize("kind", ["exp", "tanh", "sigmoid"])
def test_float32_vector_math_matches_numpy(monkeypatch, kind):
    """The vectorizable float32 exp/tanh/sigmoid: within 3e-7 relative (1e-30 absolute) of NumPy's float32
    functions over a wide sweep, exact at the edges (0, -0, inf, -inf, NaN, overflow to inf, underflow to 0)."""
    fn = {"exp": ng.exp, "tanh": ng.tanh, "sigmoid": ng.sigmoid}[kind]
    ref_fn = {"exp": np.exp, "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v.astype("float64")))}[kind]
    sweep = np.random.default_rng(3).uniform(-110, 95, 20000).astype("float32")
    small = np.random.default_rng(4).uniform(-1, 1, 5000).astype("float32")
    values = np.concatenate([EDGES32, sweep, small])
    X = ng.make_axis(values.size, name="X")

    def build():
        x, one = ng.placeholder([X]), ng.placeholder([X])
        return [fn(x * one)], [x, one]  # x * 1: a program of two steps, exact

    ref, got, n_compiled = run_both(monkeypatch, build, [values, np.ones_like(values)])
    assert n_compiled == 1
    with np.errstate(over="ignore"):
        expected = np.asarray(ref_fn(values), dtype="float64")
    g = got[0].astype("float64")
    assert np.array_equal(np.isnan(g), np.isnan(expected))
    finite = np.isfinite(expected)
    assert np.array_equal(g[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)])
    np.testing.assert_allclose(g[finite], expected[finite], rtol=3e-7, atol=1e-30 if kind == "exp" else 1e-37)
    if kind == "tanh":  # odd, and exact at 0 with its sign
        assert np.signbit(got[0][1]) and got[0][0] == 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_value_per_row_is_read_before_the_innermost_loop(monkeypatch, dtype):
    """``exp(x - max(x))`` of a softmax over the last axis: the broadcast max has stride 0 along the rows only;
    it is passed as one value per row (mode ``"r"``), so the innermost loop reads contiguous arrays only."""
    assert compiled._mode((512, 4, 0)) == "r" and compiled._mode((0, 0)) == "s" and compiled._mode((0, 4)) == "a"
    assert compiled._mode((0,)) == "s" and compiled._mode((4,)) == "a"
    a, b, c = ng.make_axis(3, "A"), ng.make_axis(5, "B"), ng.make_axis(compiled.COMPILED_MIN_ELEMENTS // 15 + 7, "C")
    sources: list[str] = []
    real = compiled.generate_source
    monkeypatch.setattr(compiled, "generate_source", lambda *args: sources.append(real(*args)) or sources[-1])

    def build():
        x, row = ng.placeholder([a, b, c], dtype=dtype), ng.placeholder([a, b], dtype=dtype)
        return [ng.exp(x - ng.broadcast(row, [a, b, c])) * 0.5], [x, row]

    x = data(dtype, 9, (3, 5, c.length))
    x.reshape(-1)[:len(SPECIAL)] = 0.5  # finite values only: a softmax's rows
    row = x.max(axis=-1)
    ref, got, n_compiled = run_both(monkeypatch, build, [x, row])
    assert n_compiled == 1
    check(ref, got, False, dtype)
    np.testing.assert_allclose(got[0], np.exp(x - row[..., None]) * 0.5, rtol=2e-6 if dtype == "float32" else 1e-14)
    loop = [s for s in sources if s and "v1[i0]" in s]  # coalesced to (15, C): the row value is v1[i0]
    assert loop, sources
    lines = loop[-1].splitlines()
    inner = next(i for i, line in enumerate(lines) if "for i1 in" in line)
    assert "x1 = v1[i0]" in lines[inner - 1]
