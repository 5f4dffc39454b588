"""The compiled scan loop (``transformers/numpy/compiled_scan.py``) against the shared kernel (``kernels/scan.py``).

Every case runs twice, with ``NG_KERNELS=numpy`` (the shared kernel, the reference) and with
``NG_KERNELS=numba`` (the whole loop one numba function), and asserts that the compiled loop was
used where the body is supported and not where it is not: RNN, GRU and LSTM cells (ONNX, onnxruntime
as a third opinion), forward and reverse, gradients (the saved-state forward scan and the reverse
scan), batches on both sides of ``TRANSPOSE_MIN_ROWS``; then the BLAS operand helper on every
layout, the tiering of ``NG_KERNELS=auto``, and the disk cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")

import ngraph_core as ng  # noqa: E402
from ngraph_core import Op  # noqa: E402
from ngraph_core.transformers.numpy import compiled_scan  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from disk_cache import run_twice  # noqa: E402
from scan_reference import ng_rnn, np_rnn  # noqa: E402

pytestmark = pytest.mark.skipif(compiled_scan.blas() is None, reason="NumPy's BLAS exports no cblas_?gemm")


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path_factory, monkeypatch):
    """One cache directory for the module's tests (compiles are shared), never the user's home."""
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ng-cache"))


@pytest.fixture
def compiled(monkeypatch) -> list[bool]:
    """For every scan kernel made from here on: whether it is the compiled loop."""
    made: list[bool] = []
    real = compiled_scan.compiled_scan

    def spy(op, kc, fallback=None):
        kernel = real(op, kc, fallback)
        made.append(kernel is not None)
        return kernel

    monkeypatch.setattr(compiled_scan, "compiled_scan", spy)
    return made


def run_both(monkeypatch, run) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``run()`` (building its graph afresh) with the shared kernel (``NG_KERNELS=numpy``), then with the
    compiled loop: ``auto`` compiling every scan on its first call (small fused programs stay on NumPy,
    so only the scans compile: each compile costs ~1 s)."""
    results = []
    for kernels in ("numpy", "auto"):
        monkeypatch.setenv("NG_KERNELS", kernels)
        monkeypatch.setattr(compiled_scan, "HOT_CALLS", 1)
        results.append([np.array(r) for r in run()])
    return results[0], results[1]


def small_rnn(steps: int, hidden: int, batch: int, seed: int) -> tuple:
    """``(final, ys, x, h0, xv, hv, w0, u0)``: the tanh RNN of ``scan_reference`` over 2 features, its
    placeholders, inputs and weights (exact in float32, so a float64 transformer matches ``np_rnn``)."""
    F, H, N = ng.make_axis(2, "F"), ng.make_axis(hidden, "H"), ng.make_axis(batch, "N")
    rec = ng.make_axis(steps, "REC")
    rng = np.random.default_rng(seed)
    w0, u0 = ((a * scale).astype(np.float32).astype(np.float64) for a, scale in
              ((rng.standard_normal((hidden, 2)), 1.0), (rng.standard_normal((hidden, hidden)), 0.5)))
    x, h0 = ng.placeholder([F, rec, N]), ng.placeholder([H, N])
    w = ng.variable([H, F], initial_value=w0)
    u = ng.variable([H, ng.make_axis(hidden, "H2")], initial_value=u0)
    final, ys = ng_rnn(x, h0, w, u, rec)
    xv, hv = rng.standard_normal((2, steps, batch)), rng.standard_normal((hidden, batch))
    return final, ys, x, h0, xv, hv, w0, u0


# -- RNN, GRU and LSTM cells ------------------------------------------------------------------------------------


def rnn_with_gradients(steps: int, hidden: int, batch: int, features: int, reverse: bool, dtype: str) -> list:
    """A tanh RNN over ``[F, REC, N]`` (state ``[H, N]``), its outputs and the gradients of a loss to the
    weights and the input: a forward scan with saved states and a reverse scan."""
    rng = np.random.default_rng(steps * 100 + hidden)
    F, H, N = ng.make_axis(features, "F"), ng.make_axis(hidden, "H"), ng.make_axis(batch, "N")
    rec = ng.make_axis(steps, "REC")
    # exact in float32: variables keep their float32 initial values, even on a float64 transformer
    w0, u0 = ((a * s).astype(np.float32).astype(np.float64) for a, s in
              ((rng.standard_normal((hidden, features)), 0.5), (rng.standard_normal((hidden, hidden)), 0.4)))
    x, h0 = ng.placeholder([F, rec, N], name="x"), ng.placeholder([H, N], name="h0")
    w = ng.variable([H, F], initial_value=w0, name="W")
    u = ng.variable([H, ng.make_axis(hidden, "H2")], initial_value=u0, name="U")
    final, ys = ng_rnn(x, h0, w, u, rec, reverse=reverse)
    loss = ng.sum(ys * ys) + ng.sum(final * 0.5)
    grads = [ng.deriv(loss, v) for v in (w, u, x, h0)]
    xv, hv = rng.standard_normal((features, steps, batch)), rng.standard_normal((hidden, batch))
    with ng.transformers.make_transformer(float_dtype=dtype) as t:
        out = t.computation([final, ys, *grads], x, h0)(xv, hv)
    if dtype == "float64":  # the forward pass against a NumPy loop too
        for got, want in zip(out[:2], np_rnn(xv, hv, w0, u0, reverse=reverse)):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    return out


@pytest.mark.parametrize("shape,reverse,dtype", [
    ((4, 3, 3, 2), False, "float64"),  # steps, hidden, batch, features
    ((7, 16, 9, 5), True, "float64"),
    ((5, 16, 9, 3), False, "float32"),
])
def test_rnn_outputs_and_gradients(monkeypatch, compiled, shape, reverse, dtype):
    ref, got = run_both(monkeypatch, lambda: rnn_with_gradients(*shape, reverse, dtype))
    # the forward scan (saved states) and the gradients' reverse scans (one per ``deriv``), all compiled
    assert len(compiled) >= 2 and all(compiled)
    for r, g in zip(ref, got, strict=True):
        assert g.dtype == r.dtype == np.dtype(dtype)
        if dtype == "float64":
            np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12)
        else:  # float32 tanh/sigmoid are the fused kernels' vector approximations (3e-7 relative)
            np.testing.assert_allclose(g, r, rtol=2e-5, atol=2e-5)


def onnx_cell(kind: str, direction: str, steps: int, batch: int, features: int, hidden: int, **attrs):
    """An ONNX model of one RNN/GRU/LSTM node (weights as initializers) and its input."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(hash((kind, direction, batch)) % 2**32)
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    dirs = 2 if direction == "bidirectional" else 1
    weights = {"W": rng.uniform(-0.6, 0.6, (dirs, gates * hidden, features)),
               "R": rng.uniform(-0.6, 0.6, (dirs, gates * hidden, hidden)),
               "B": rng.uniform(-0.4, 0.4, (dirs, 2 * gates * hidden))}
    outputs = ["Y", "Y_h"] + (["Y_c"] if kind == "LSTM" else [])
    node = helper.make_node(kind, ["X", "W", "R", "B"], outputs, hidden_size=hidden, direction=direction, **attrs)
    graph = helper.make_graph(
        [node], "cell", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [steps, batch, features])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [steps, dirs, batch, hidden] if name == "Y"
                                       else [dirs, batch, hidden]) for name in outputs],
        [numpy_helper.from_array(v.astype("float32"), name) for name, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(model)
    return model, rng.standard_normal((steps, batch, features)).astype("float32")


@pytest.mark.parametrize("kind,direction,batch,attrs", [
    ("LSTM", "forward", 1, {}),
    ("LSTM", "bidirectional", 9, {}),  # 9 rows: the recurrent weight made contiguous once
    ("GRU", "reverse", 3, {}),
    ("GRU", "forward", 2, {"linear_before_reset": 1}),
    ("RNN", "forward", 4, {"activations": ["Relu"]}),
])
def test_onnx_cells(monkeypatch, compiled, kind, direction, batch, attrs):
    from ngraph_core.frontends.onnx import import_model

    model, x = onnx_cell(kind, direction, steps=6, batch=batch, features=5, hidden=8, **attrs)
    ref, got = run_both(monkeypatch, lambda: import_model(model, initializers="constants").run({"X": x}))
    assert compiled and all(compiled)  # one scan per direction, each compiled
    assert len(compiled) == (2 if direction == "bidirectional" else 1)
    for r, g in zip(ref, got, strict=True):
        np.testing.assert_allclose(g, r, rtol=2e-5, atol=2e-6)
    onnxruntime = pytest.importorskip("onnxruntime")
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for g, e in zip(got, session.run(None, {"X": x}), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


# -- what falls back --------------------------------------------------------------------------------------------


def test_unsupported_bodies_run_the_shared_kernel(monkeypatch, compiled):
    """A scalar state (a step counter) and a reduction in the body: the shared kernel, the same results."""
    H, N, rec = ng.make_axis(3, "H"), ng.make_axis(4, "N"), ng.make_axis(5, "REC")
    rng = np.random.default_rng(1)
    av = rng.standard_normal((3, 5, 4)).astype(np.float32)

    def run():
        a = ng.placeholder([H, rec, N])

        def step(a_t: Op, h: Op, count: Op) -> tuple[list[Op], list[Op]]:
            new = ng.tanh(a_t + h)
            return [new, ng.sum(new, reduction_axes=[H])], [new, count + 1.0]

        (h, count), (ys, sums) = ng.scan(step, [a], [ng.constant(0.0, [H, N]), ng.constant(0.0, [])], rec)
        with ng.transformers.make_transformer() as t:
            return t.computation([h, count, ys, sums], a)(av)

    ref, got = run_both(monkeypatch, run)
    assert compiled == [False]
    for r, g in zip(ref, got, strict=True):  # NG_KERNELS=numba compiles the fused tanh: 3e-7 relative
        np.testing.assert_allclose(g, r, rtol=2e-6, atol=1e-6)
    assert float(got[1]) == 5.0


def test_valid_lengths_run_the_shared_kernel(monkeypatch, compiled):
    F, H, N, rec = ng.make_axis(2, "F"), ng.make_axis(3, "H"), ng.make_axis(3, "N"), ng.make_axis(4, "REC")
    rng = np.random.default_rng(2)
    w0, u0 = (rng.standard_normal(shape).astype(np.float32).astype(np.float64) for shape in ((3, 2), (3, 3)))
    xv, hv, lv = rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 3)), np.array([4, 1, 2], np.int32)

    def run():
        x, h0 = ng.placeholder([F, rec, N]), ng.placeholder([H, N])
        lengths = ng.placeholder([N], dtype="int32")
        w, u = ng.variable([H, F], initial_value=w0), ng.variable([H, ng.make_axis(3, "H2")], initial_value=u0)
        final, ys = ng_rnn(x, h0, w, u, rec, lengths=lengths)
        with ng.transformers.make_transformer(float_dtype="float64") as t:
            return t.computation([final, ys], x, h0, lengths)(xv, hv, lv)

    ref, got = run_both(monkeypatch, run)
    assert compiled == [False]
    for r, g, want in zip(ref, got, np_rnn(xv, hv, w0, u0, lengths=lv), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(g, r)


# -- the pieces --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemm_on_every_operand_layout(dtype):
    """``_gemm`` takes row-major, transposed, strided, reversed and single-row/column operands (copying
    those BLAS cannot read) and agrees with NumPy's matmul."""
    gemm = compiled_scan.gemm(dtype)
    rng = np.random.default_rng(3)

    def layouts(rows: int, cols: int) -> list[np.ndarray]:
        base = rng.standard_normal((rows, cols)).astype(dtype)
        every = [base, rng.standard_normal((cols, rows)).astype(dtype).T,
                 rng.standard_normal((rows, 2 * cols)).astype(dtype)[:, ::2],
                 rng.standard_normal((2 * rows, cols)).astype(dtype)[::2], base[::-1], base[:, ::-1]]
        # each pair of numba array types (C, F, A) is a compile: float32 checks its BLAS symbol on one
        return every if dtype == "float64" else every[2:3]

    for m, k, n in [(3, 4, 5), (1, 7, 6), (6, 1, 4), (5, 3, 1), (1, 1, 1), (9, 16, 33)]:
        for a in layouts(m, k):
            for b in layouts(k, n):
                c = np.full((m, n), np.nan, dtype=dtype)
                gemm(a, b, c)
                np.testing.assert_allclose(c, a @ b, rtol=1e-5 if dtype == "float32" else 1e-13, atol=1e-6)


def test_auto_compiles_on_the_third_call(monkeypatch, compiled):
    """``NG_KERNELS=auto``: two calls on the shared kernel, the compiled loop from the third (HOT_CALLS)."""
    monkeypatch.delenv("NG_KERNELS", raising=False)
    assert compiled_scan.HOT_CALLS == 3
    final, ys, x, h0, xv, hv, _, _ = small_rnn(6, 5, 3, seed=4)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        f = t.computation([final, ys], x, h0)
        assert compiled == []
        results = [f(xv, hv) for _ in range(2)]
        assert compiled == []
        results += [f(xv, hv) for _ in range(3)]
    assert compiled == [True]
    for got in results:
        for g, want in zip(got, results[0]):
            np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-14)


def test_generated_code_holds_no_user_text(monkeypatch, tmp_path):
    """Names, scopes and axis names stay out of the generated module: only generated identifiers."""
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NG_KERNELS", "numba")
    evil = "h'); import os; os.system('echo pwned')  #"
    F, H, N = ng.make_axis(2, "F"), ng.make_axis(3, "Hidden_x"), ng.make_axis(2, "N")
    rec = ng.make_axis(3, "REC")
    x, h0 = ng.placeholder([F, rec, N], name=evil), ng.placeholder([H, N], name=evil)
    w = ng.variable([H, F], initial_value=np.ones((3, 2)), name=evil)
    u = ng.variable([H, ng.make_axis(3, "H2")], initial_value=np.eye(3) * 0.5, name=evil)
    with ng.name_scope(evil):
        final, _ = ng_rnn(x, h0, w, u, rec)
    with ng.transformers.make_transformer() as t:
        t.computation(final, x, h0)(np.ones((2, 3, 2), np.float32), np.zeros((3, 2), np.float32))
    sources = [p.read_text() for p in (tmp_path / "kernels").glob("*.py")]
    scans = [s for s in sources if "compiled_scan" in s]
    assert len(scans) == 1
    assert "pwned" not in scans[0] and "Hidden_x" not in scans[0] and "REC" not in scans[0]


SCRIPT = """
import numpy as np
import ngraph_core as ng
from ngraph_core.transformers.numpy import compiled_scan
F, H, N, rec = ng.make_axis(2, "F"), ng.make_axis(4, "H"), ng.make_axis(3, "N"), ng.make_axis(5, "REC")
x, h = ng.placeholder([F, rec, N]), ng.placeholder([H, N])
w = ng.variable([H, F], initial_value=np.full((4, 2), 0.25))

def step(x_t, h):
    new = ng.tanh(ng.dot(w, x_t) + h * 0.5)
    return [new], [new]

(final,), (ys,) = ng.scan(step, [x], [h], rec)
with ng.transformers.make_transformer() as t:
    print(round(float(t.computation(ng.sum(ys), x, h)(np.ones((2, 5, 3), np.float32),
                                                      np.zeros((4, 3), np.float32))), 4))
"""


def test_a_second_process_reuses_the_disk_cache(tmp_path):
    first, suffixes = run_twice(SCRIPT, {"NG_KERNELS": "numba"}, tmp_path)
    assert suffixes.count(".nbi") == 1 and suffixes.count(".nbc") == 1  # the scan's loop, compiled once
    h, total = np.zeros(3), 0.0
    for _ in range(5):
        h = np.tanh(0.5 + h * 0.5)
        total += 4 * h.sum()
    assert float(first) == round(total, 4)


def test_numba_missing_or_numpy_kernels_mean_the_shared_kernel(monkeypatch, compiled):
    monkeypatch.setenv("NG_KERNELS", "numpy")
    final, _, x, h0, xv, hv, _, _ = small_rnn(3, 3, 2, seed=9)
    with ng.transformers.make_transformer() as t:
        for _ in range(4):
            t.computation(final, x, h0)(xv, hv)
    assert compiled == []
    monkeypatch.setenv("NG_KERNELS", "numba")
    monkeypatch.setattr(compiled_scan, "HAVE_NUMBA", False)
    with ng.transformers.make_transformer() as t:
        t.computation(final, x, h0)(xv, hv)
    assert compiled == [False]
    assert os.environ["NG_KERNELS"] == "numba"


@pytest.mark.slow
def test_the_recurrent_suites_pass_with_every_scan_compiled(tmp_path):
    """The scan, RNN, ONNX recurrent and sequence-model tests again with ``NG_KERNELS=numba``: every
    supported scan body compiled at once (~150 of them, ~4 minutes; ``-m slow``)."""
    root = Path(__file__).resolve().parents[2]
    suites = ["ngraph_core/test_scan.py", "neon/layers/test_recurrent.py", "ngraph_core/frontends/onnx/test_ops_rnn.py",
              "ngraph_core/frontends/onnx/test_rnn_torch.py", "ngraph_core/passes/test_scan_layout.py",
              "ngraph_core/passes/test_scan_prune.py", "model_zoo/test_lstm_sentiment.py", "model_zoo/test_char_lm.py",
              "neon/test_model_sequences.py"]
    env = {**os.environ, "NG_KERNELS": "numba", "NG_CACHE_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *(str(root / s) for s in suites)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_auto_keeps_the_shared_kernel_where_it_splits_the_products(monkeypatch, compiled):
    """With two workers, a body whose product the shared kernel splits (``MIN_PARALLEL_FLOPS``) is not
    compiled under ``auto`` (the compiled loop runs BLAS at one thread); with one worker it is."""
    monkeypatch.delenv("NG_KERNELS", raising=False)
    monkeypatch.setattr(compiled_scan, "HOT_CALLS", 1)
    monkeypatch.setattr(compiled_scan.runtime, "MIN_PARALLEL_FLOPS", 5 * 5 * 3)  # H x H2 x N below
    final, _, x, h0, xv, hv, _, _ = small_rnn(4, 5, 3, seed=6)
    results = []
    for workers in ("2", "1"):
        monkeypatch.setenv("NG_THREADS", workers)
        with ng.transformers.make_transformer(float_dtype="float64") as t:
            results.append(t.computation(final, x, h0)(xv, hv))
    assert compiled == [True]  # only the one-worker transformer's scan
    np.testing.assert_allclose(results[0], results[1], rtol=1e-13, atol=1e-14)


def test_a_failed_compile_warns_and_keeps_the_shared_kernel(monkeypatch):
    """Under ``auto`` a loop that fails to compile (a bug) is a RuntimeWarning on the third call, not an error;
    the results stay right."""
    monkeypatch.delenv("NG_KERNELS", raising=False)

    def broken(op, kc, fallback=None):
        raise RuntimeError("numba could not type the loop")

    monkeypatch.setattr(compiled_scan, "compiled_scan", broken)
    final, _, x, h0, xv, hv, w0, u0 = small_rnn(3, 3, 2, seed=8)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        f = t.computation(final, x, h0)
        f(xv, hv), f(xv, hv)
        with pytest.warns(RuntimeWarning, match="the compiled loop failed.*numba could not type"):
            got = f(xv, hv)
        got = f(xv, hv)
    np.testing.assert_allclose(got, np_rnn(xv, hv, w0, u0)[0], rtol=1e-10, atol=1e-12)
