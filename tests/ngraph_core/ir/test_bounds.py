"""Static indices are checked against their axes wherever a graph is made: built, decoded or compiled.

The attack (found 2026-11-28): a graph document whose slice runs past its axis (``[0, 64, 1]`` on a
length-4 axis, every declared length adjusted to match) was accepted by ``ng.deserialize``, because
the slice's length was ``len(range(start, stop, step))`` whatever the axis; from the third call the
numba-compiled scan read past its buffer (heap words with 64, SIGSEGV with 2**24). The same through
a crafted ``.ngi``. Here the attacker's tool is ``lenient()``: the slice and pad rules of before the
fix, patched in while the graph is built, compiled and saved, exactly as the old code wrote such
files; outside it, every path that reads or compiles the graph refuses it with a typed error.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.errors import AxesError, NgraphError, SerializationError, VerifyError
from ngraph_core.ir import Axes, Op, OpType, make

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "fuzz_corpus" / "graph_json"
infer_module = importlib.import_module("ngraph_core.ir.infer")  # ir re-exports a function named infer


def _old_slice(src, arg, axes, dtype):
    x = src[0]
    return Axes(a.with_length(len(range(*s))) for a, s in zip(x.axes, arg) if not isinstance(s, int)), x.dtype


def _old_pad(src, arg, axes, dtype):
    return Axes(axes), src[0].dtype


@contextlib.contextmanager
def lenient() -> Iterator[None]:
    """The slice and pad inference of before the fix: no check of the indices against the axis."""
    saved = infer_module.INFER[OpType.SLICE], infer_module.INFER[OpType.PAD]
    infer_module.INFER[OpType.SLICE], infer_module.INFER[OpType.PAD] = _old_slice, _old_pad
    try:
        yield
    finally:
        infer_module.INFER[OpType.SLICE], infer_module.INFER[OpType.PAD] = saved


def scan_reading_past(k: int) -> tuple[Op, Op, Op]:
    """A scan whose step slices ``[0, k, 1]`` of a length-4 axis (build it inside ``lenient()``)."""
    rec, c, n, h = (ng.make_axis(6, name="REC"), ng.make_axis(4, name="C"), ng.make_axis(1, name="N"),
                    ng.make_axis(k, name="H"))
    x, h0 = ng.placeholder([c, rec, n], name="x"), ng.placeholder([h, n], name="h0")

    def step(x_t, state):
        total = state + ng.cast_axes(make(OpType.SLICE, [x_t], arg=((0, k, 1), (0, 1, 1))), [h, n])
        return [total], [total]

    (last,), _ = ng.scan(step, [x], [h0], rec)
    return last, x, h0


def crafted_document(k: int) -> str:
    with lenient():
        return ng.serialize(list(scan_reading_past(k)))


@pytest.mark.parametrize("k", [64, 2**24])
def test_a_document_whose_slice_runs_past_its_axis_is_refused(k: int) -> None:
    text = crafted_document(k)
    with pytest.raises(SerializationError, match=rf"slice.*{k - 1} \(step 1, {k} elements\) run outside axis C:4"):
        ng.deserialize(text)


def test_the_crafted_documents_are_in_the_corpus_and_refused() -> None:
    for k in (64, 2**24):
        path = CORPUS / f"scan_slice_past_axis_{k}.json"
        assert path.read_text(encoding="utf-8") == crafted_document(k), f"{path.name}: regenerate it from this test"
        with pytest.raises(SerializationError, match="run outside axis"):
            ng.deserialize(path.read_text(encoding="utf-8"))


def test_the_attack_no_longer_crashes_the_interpreter(tmp_path: Path) -> None:
    """The reproducer of the report in a child: four calls (the compiled scan took over at the third)."""
    path = tmp_path / "crafted.json"
    path.write_text(crafted_document(2**24), encoding="utf-8")
    code = textwrap.dedent(f"""
        import numpy as np, ngraph_core as ng
        from ngraph_core.errors import NgraphError
        try:
            last, x, h0 = ng.deserialize(open({str(path)!r}).read())
        except NgraphError as exc:
            print("typed", type(exc).__name__)
            raise SystemExit(0)
        with ng.transformers.make_transformer() as t:
            f = t.computation(last, x, h0)
            for _ in range(4):
                f(np.ones((4, 6, 1), np.float32), np.zeros((2**24, 1), np.float32))
        print("ran")
    """)
    env = dict(os.environ, NG_KERNELS="auto")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["typed", "SerializationError"]


def test_a_crafted_ngi_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "crafted.ngi"
    with lenient():  # as the old code compiled and saved it
        last, x, h0 = scan_reading_past(64)
        ng.inference.save(ng.inference.compile_for_inference(([x, h0], [last])), path)
    with pytest.raises(ng.inference.DeployError, match="run outside axis C:4"):
        ng.inference.load(path)


def test_an_op_made_directly_is_verified_before_any_kernel_runs() -> None:
    """``Op(...)`` skips inference; compiling verifies the graph first."""
    x = ng.placeholder([ng.make_axis(4, name="C")])
    bad = Op(OpType.SLICE, [x], Axes([ng.make_axis(64, name="C")]), "float32", ((0, 64, 1),))
    with ng.transformers.make_transformer() as t, pytest.raises(VerifyError, match="run outside axis C:4"):
        t.computation(bad, x)


C4, C3 = ng.make_axis(4, name="C"), ng.make_axis(3, name="D")


@pytest.mark.parametrize("arg, match", [
    (((0, 5, 1),), r"indices 0, 1, \.\.\. 4 .* run outside axis C:4"),
    (((3, -3, -1),), r"indices 3, 2, \.\.\. -2"),
    (((-1, 2, 1),), "run outside axis"),
    (((4, 6, 1),), "run outside axis"),
    (((0, 4, 0),), "step must be nonzero"),
    (((9, 9, 1),), "empty range"),
    ((4,), "index 4 is out of range"),
    ((-1,), "index -1 is out of range"),
])
def test_slices_outside_the_axis_are_refused_when_built(arg: tuple, match: str) -> None:
    with pytest.raises(AxesError, match=match):
        make(OpType.SLICE, [ng.placeholder([C4])], arg=arg)


@pytest.mark.parametrize("arg, axes, match", [
    (((2, 1),), [ng.make_axis(4, name="C")], r"indices 2, 3, \.\.\. 4"),
    (((-1, 1),), [ng.make_axis(4, name="C")], "starts outside"),
    (((1, -1),), [ng.make_axis(4, name="C")], r"indices 1, 0, \.\.\. -1"),
    (((0, 0),), [ng.make_axis(4, name="C")], "step must be nonzero"),
    ((5, (0, 1)), [C3, ng.make_axis(4, name="C")], "index 5 is out of range for the new axis D:3"),
    ((-1, (0, 1)), [C3, ng.make_axis(4, name="C")], "index -1 is out of range"),
])
def test_pads_outside_the_axis_are_refused_when_built(arg: tuple, axes: list, match: str) -> None:
    x = ng.placeholder([ng.make_axis(3, name="C")])
    with pytest.raises(AxesError, match=match):
        make(OpType.PAD, [x], arg=arg, axes=axes)


@pytest.mark.parametrize("s", [slice(None, None, -1), slice(-10, -10, -1), slice(3, 1, 1), slice(5, 2, -1),
                               slice(1, None, 2), slice(None, None, -3), slice(2, 2), slice(-1, None, -2)])
def test_every_python_slice_runs_as_numpy_slices_it(s: slice) -> None:
    """Canonical slices from ``slice.indices`` (empty ranges too: ``(-1, -1, -1)`` selects nothing)."""
    x = ng.placeholder([C4])
    value = np.arange(4, dtype=np.float32) + 1
    y = ng.tensor_slice(x, [s]) * 2.0
    with ng.transformers.make_transformer() as t:
        got = t.computation(y, x)(value)
    np.testing.assert_array_equal(got, value[s] * 2)


def test_a_pad_and_its_slice_gradient_round_trip_with_negative_steps() -> None:
    x = ng.placeholder([C4])
    value = np.arange(4, dtype=np.float32) + 1
    y = ng.tensor_slice(x, [slice(None, None, -2)])  # indices 3, 1
    grad = ng.gradients(ng.sum(y * y), [x])[0]
    with ng.transformers.make_transformer() as t:
        got = t.computation(grad, x)(value)
    np.testing.assert_array_equal(got, [0, 4, 0, 8])


def test_typed_errors_are_ngraph_errors() -> None:
    assert issubclass(AxesError, NgraphError) and issubclass(VerifyError, NgraphError)


@pytest.mark.parametrize("a, bt, out", [((8, 16), (4, 15), (8, 4)), ((8, 16), (4, 16), (7, 4)),
                                        ((8, 16), (4, 16), (8, 3))])
def test_the_narrow_gemm_loop_refuses_operands_shorter_than_its_loop(a: tuple, bt: tuple, out: tuple) -> None:
    """The compiled loop itself compares its operands' shapes before its first (unchecked) read."""
    narrow_gemm = importlib.import_module("ngraph_core.transformers.numpy.narrow_gemm")
    if not narrow_gemm.HAVE_NUMBA:
        pytest.skip("numba is not importable")
    ones = [np.ones(s, np.float32) for s in (a, bt, out)]
    with pytest.raises(ValueError, match="narrow_gemm: operand shapes disagree"):
        narrow_gemm.compiled("float32")(*ones)
    bias, res = np.ones(8, np.float32), np.ones((8, 4), np.float32)
    with pytest.raises(ValueError, match="operand shapes disagree"):  # a bias shorter than the rows
        narrow_gemm.compiled("float32", ("bias", "add"))(np.ones((8, 16), np.float32), np.ones((4, 16), np.float32),
                                                         np.ones((8, 4), np.float32), bias[:5], res)
    with pytest.raises(ValueError, match="operand shapes disagree"):  # a stored product of the wrong shape
        narrow_gemm.transposed_store("float32")(np.ones((3, 8), np.float32), np.ones((8, 4), np.float32), bias, res)
    good = np.empty((8, 4), np.float32)
    narrow_gemm.compiled("float32")(np.ones((8, 16), np.float32), np.ones((4, 16), np.float32), good)
    np.testing.assert_array_equal(good, 16.0)


@pytest.mark.parametrize("seed", [-1, 2**64])
def test_a_seed_no_generator_takes_is_refused_when_built_and_decoded(seed: int) -> None:
    """Found by the graph-run fuzz test: a negative seed decoded, then numpy's generator raised a raw ValueError."""
    C = ng.make_axis(3, name="C")
    with pytest.raises(ng.errors.GraphError, match=r"expected a seed in \[0, 2\*\*64\) or None"):
        ng.normal([C], seed=seed)
    text = ng.serialize([ng.normal([C], seed=5)]).replace('"seed": 5', f'"seed": {seed}')
    with pytest.raises(SerializationError, match=r"a seed in \[0, 2\*\*64\) or null"):
        ng.deserialize(text)
