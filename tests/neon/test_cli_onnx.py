"""``ngraph convert`` and ``ngraph run`` on small ONNX models built with ``onnx.helper``, checked against onnxruntime.

Subjects: ``affine.onnx`` (``Y = relu(X @ W + b)``, X of shape ``[N, 3]`` with a dynamic ``N``),
``reshape.onnx`` (two inputs, one of them a shape fed to Reshape: ``run`` must bake it in) and
``two_out.onnx`` (two outputs, one int64).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ngraph_core as ng  # noqa: E402
from neon.cli import ngraph_main  # noqa: E402
from neon.cli.onnx_commands import dim_assignment, dynamic_dims, input_assignment  # noqa: E402

SCRIPTS = Path(sys.executable).parent
RNG = np.random.default_rng(0)
W = RNG.standard_normal((3, 2)).astype(np.float32)
B = np.array([0.5, -0.25], np.float32)


def _save(model, path: Path) -> Path:
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())
    return path


def _ort(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(path.read_bytes(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("cli_onnx")
    opset = [helper.make_opsetid("", 17)]
    affine = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["XW"], name="fc"), helper.make_node("Add", ["XW", "b"], ["Z"],
                                                                                     name="bias"),
         helper.make_node("Relu", ["Z"], ["Y"], name="act")], "affine",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 2])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "b")])
    reshape = helper.make_graph(
        [helper.make_node("Reshape", ["X", "shape"], ["R"]), helper.make_node("Neg", ["R"], ["Y"])], "reshape",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 6]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 4])])
    two_out = helper.make_graph(
        [helper.make_node("ArgMax", ["X"], ["idx"], axis=1, keepdims=0), helper.make_node("Exp", ["X"], ["E"])],
        "two_out", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("E", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("idx", TensorProto.INT64, [2])])
    unsupported = helper.make_graph(
        [helper.make_node("NoSuchOp", ["X"], ["Y"], name="mystery")], "unsupported",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2])])
    paths = {name: _save(helper.make_model(g, opset_imports=opset), folder / f"{name}.onnx")
             for name, g in (("affine", affine), ("reshape", reshape), ("two_out", two_out))}
    paths["unsupported"] = folder / "unsupported.onnx"  # the checker rejects unknown ops: written unchecked
    paths["unsupported"].write_bytes(helper.make_model(unsupported, opset_imports=opset).SerializeToString())
    return paths


def _npy(path: Path, array: np.ndarray) -> str:
    np.save(path, array)
    return str(path)


# -- convert ---------------------------------------------------------------------------------------------
def test_convert_writes_a_graph_that_loads_and_computes_the_model(models, tmp_path: Path, capsys) -> None:
    out = tmp_path / "affine.ngraph"
    assert ngraph_main(["convert", str(models["affine"]), "-o", str(out), "--dim", "N=5"]) == 0
    assert f"wrote {out}: outputs ['Y'], inputs ['X'], 2 variables, opset 17, dims N=5" in capsys.readouterr().out
    y, x = ng.deserialize(out.read_text())  # roots: the outputs, then the placeholders
    assert x.op.name == "PLACEHOLDER" and x.axes.lengths == (5, 3) and x.axes[0].name == "N"
    feed = RNG.standard_normal((5, 3)).astype(np.float32)
    with ng.transformers.make_transformer("numpy") as t:
        result = t.computation(y, x)(feed)
    np.testing.assert_allclose(result, _ort(models["affine"], {"X": feed})[0], atol=1e-6)
    np.testing.assert_allclose(result, np.maximum(feed @ W + B, 0), atol=1e-6)


def test_converted_graph_opens_in_info_and_select(models, tmp_path: Path, capsys) -> None:
    out = tmp_path / "affine.ngraph"
    assert ngraph_main(["convert", str(models["affine"]), "-o", str(out)]) == 0
    capsys.readouterr()
    assert ngraph_main(["info", str(out)]) == 0
    info = capsys.readouterr().out
    assert "variables: 2 holding 8 values" in info and "placeholders: X [N:1, " in info
    assert ngraph_main(["select", str(out), "MatMul variable"]) == 0
    assert capsys.readouterr().out.splitlines() == ["fc/W"]


def test_convert_with_constant_initializers_has_no_variables(models, tmp_path: Path, capsys) -> None:
    out = tmp_path / "affine_const.ngraph"
    assert ngraph_main(["convert", str(models["affine"]), "-o", str(out), "--initializers", "constants"]) == 0
    assert "0 variables" in capsys.readouterr().out
    roots = ng.deserialize(out.read_text())
    assert not [o for o in ng.ir.toposort(roots) if o.op.name == "VARIABLE"]


def test_convert_bakes_in_static_inputs(models, tmp_path: Path, capsys) -> None:
    out = tmp_path / "reshape.ngraph"
    assert ngraph_main(["convert", str(models["reshape"]), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Reshape's shape must be known at import time" in err
    assert "hint: bake the value in with --static shape=value.npy" in err
    shape = _npy(tmp_path / "s.npy", np.array([4, 3], np.int32))  # int32 -> the declared int64: a safe cast
    assert ngraph_main(["convert", str(models["reshape"]), "-o", str(out), "--static", f"shape={shape}"]) == 0
    assert "inputs ['X']" in capsys.readouterr().out
    y, x = ng.deserialize(out.read_text())
    assert y.axes.lengths == (4, 3)
    feed = np.arange(12, dtype=np.float32).reshape(2, 6)
    with ng.transformers.make_transformer("numpy") as t:
        np.testing.assert_array_equal(t.computation(y, x)(feed), -feed.reshape(4, 3))
    assert ngraph_main(["convert", str(models["reshape"]), "-o", str(out), "--static", f"Q={shape}"]) == 2
    assert "--static expects each of ['X', 'shape'] at most once; unknown ['Q']" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["--dim", "M=4"], "--dim M: the model has no such dynamic dim; expected one of ['N']"),
    (["--dim", "N=4", "--dim", "N=5"], "--dim N given twice (4 and 5)"),
    (["--dim", "N"], "expected NAME=LENGTH with a length >= 1 (e.g. N=8), received 'N'"),
    (["--dim", "N=0"], "received 'N=0'"),
    (["--initializers", "weights"], "invalid choice: 'weights'"),
])
def test_convert_bad_arguments_exit_2(models, tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    out = tmp_path / "x.ngraph"
    assert ngraph_main(["convert", str(models["affine"]), "-o", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ngraph convert") and message in err
    assert not out.exists()


def test_convert_errors_exit_1_with_a_hint(models, tmp_path: Path, capsys) -> None:
    out = str(tmp_path / "x.ngraph")
    assert ngraph_main(["convert", str(models["unsupported"]), "-o", out]) == 1
    err = capsys.readouterr().err
    assert "NoSuchOp" in err and "hint:" in err
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(models["affine"].read_bytes()[:-9])
    assert ngraph_main(["convert", str(truncated), "-o", out]) == 1
    assert "truncated.onnx is not a valid ONNX model (corrupt or truncated)" in capsys.readouterr().err
    assert ngraph_main(["convert", str(tmp_path / "missing.onnx"), "-o", out]) == 1
    err = capsys.readouterr().err
    assert "missing.onnx: No such file or directory" in err and "hint: check the path" in err
    assert ngraph_main(["convert", str(tmp_path), "-o", out]) == 1
    assert "expected a file, received a directory" in capsys.readouterr().err
    assert not Path(out).exists()


# -- run -------------------------------------------------------------------------------------------------
def test_run_prints_outputs_and_saves_them(models, tmp_path: Path, capsys) -> None:
    feed = RNG.standard_normal((4, 3)).astype(np.float32)
    out = tmp_path / "out.npz"
    argv = ["run", str(models["affine"]), "--input", f"X={_npy(tmp_path / 'x.npy', feed)}", "--output", str(out)]
    assert ngraph_main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Y: shape (4, 2) float32: [") and lines[0].endswith(" ...")
    assert lines[1] == f"wrote {out} (1 outputs)"
    expected = _ort(models["affine"], {"X": feed})[0]
    with np.load(out) as saved:
        assert list(saved) == ["Y"]
        np.testing.assert_allclose(saved["Y"], expected, atol=1e-6)
    first = np.array([float(v) for v in lines[0].split("[")[1].split("]")[0].split()])
    np.testing.assert_allclose(first, expected.reshape(-1)[:6], atol=1e-5)


def test_run_bakes_in_inputs_needed_at_import_time(models, tmp_path: Path, capsys) -> None:
    feed = np.arange(12, dtype=np.float32).reshape(2, 6)
    shape = np.array([3, 4], np.int64)
    out = tmp_path / "r.npz"
    assert ngraph_main(["run", str(models["reshape"]), "-i", f"X={_npy(tmp_path / 'x.npy', feed)}",
                        "-i", f"shape={_npy(tmp_path / 's.npy', shape)}", "-o", str(out)]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("Y: shape (3, 4) float32: [") and line.endswith("] ...")
    assert [float(v) for v in line.split("[")[1].split("]")[0].split()] == [0, -1, -2, -3, -4, -5]
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["Y"], -feed.reshape(3, 4))


def test_run_with_two_outputs_keeps_their_dtypes(models, tmp_path: Path, capsys) -> None:
    feed = np.array([[0, 3, 1, 2], [5, 1, 1, 0]], np.float32)
    out = tmp_path / "two.npz"
    assert ngraph_main(["run", str(models["two_out"]), "-i", f"X={_npy(tmp_path / 'x.npy', feed)}",
                        "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("E: shape (2, 4) float32") and lines[1] == "idx: shape (2,) int64: [1 0]"
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["idx"], [1, 0])
        np.testing.assert_allclose(saved["E"], np.exp(feed), rtol=1e-6)


def test_run_casts_a_float64_array_with_a_note(models, tmp_path: Path, capsys) -> None:
    feed = RNG.standard_normal((2, 3))
    assert ngraph_main(["run", str(models["affine"]), "-i", f"X={_npy(tmp_path / 'x.npy', feed)}"]) == 0
    captured = capsys.readouterr()
    assert "cast to float32" in captured.err and captured.out.startswith("Y: shape (2, 2) float32")


@pytest.mark.parametrize(("inputs", "message"), [
    ([], "missing ['X'], unknown [], repeated []"),
    (["Q=x.npy"], "missing ['X'], unknown ['Q']"),
    (["X=x.npy", "X=x.npy"], "repeated ['X']"),
    (["X"], "expected NAME=PATH (an input name and a .npy file, e.g. x=batch.npy), received 'X'"),
])
def test_run_bad_inputs_exit_2(models, tmp_path: Path, monkeypatch, capsys, inputs: list[str],
                               message: str) -> None:
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.zeros((2, 3), np.float32))
    argv = ["run", str(models["affine"])] + [a for item in inputs for a in ("--input", item)]
    assert ngraph_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ngraph run") and message in err


def test_run_refuses_an_unsafe_dtype_cast(models, tmp_path: Path, capsys) -> None:
    feed = _npy(tmp_path / "x.npy", np.zeros((2, 6), np.float32))
    shape = _npy(tmp_path / "s.npy", np.array([3.0, 4.0]))
    assert ngraph_main(["run", str(models["reshape"]), "-i", f"X={feed}", "-i", f"shape={shape}"]) == 2
    err = capsys.readouterr().err
    assert "input 'shape': expected int64, received float64" in err and "hint: save it with .astype('int64')" in err


def test_run_errors_exit_1(models, tmp_path: Path, capsys) -> None:
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    assert ngraph_main(["run", str(models["affine"]), "-i", f"X={tmp_path / 'bad.npy'}"]) == 1
    assert "--input X=" in (err := capsys.readouterr().err) and "not a .npy array" in err and "numpy.save" in err
    assert ngraph_main(["run", str(models["affine"]), "-i", f"X={tmp_path / 'none.npy'}"]) == 1
    assert "none.npy: No such file or directory" in capsys.readouterr().err
    wrong_rank = _npy(tmp_path / "r.npy", np.zeros((2, 3, 1), np.float32))
    assert ngraph_main(["run", str(models["affine"]), "-i", f"X={wrong_rank}"]) == 1
    err = capsys.readouterr().err
    assert "expected input 'X' of shape [N, 3] (as the model declares it), received (2, 3, 1); hint:" in err
    assert ngraph_main(["run", str(models["affine"]), "-i", f"X={wrong_rank}", "-o", "out.txt"]) == 2
    assert "expected --output to end in .npz" in capsys.readouterr().err


def test_run_an_exported_model_states_the_shape_and_layout_it_expects(tmp_path: Path, capsys) -> None:
    from neon.layers import Affine
    from neon.model import Model
    from ngraph_core.frontends.onnx import export

    model = Model([Affine(3)])
    model.build((784,), batch_size=2)
    path = tmp_path / "mlp.onnx"
    export(model, path)  # batch first: [N, 784]
    images = _npy(tmp_path / "images.npy", np.zeros((2, 28, 28), np.float32))
    assert ngraph_main(["run", str(path), "-i", f"X={images}"]) == 1
    err = capsys.readouterr().err
    assert "expected input 'X' of shape [N, 784] (batch first, ONNX layout), received (2, 28, 28)" in err
    assert "hint: each sample has the right number of values: save x.reshape(2, 784)" in err
    batch_last = _npy(tmp_path / "last.npy", np.zeros((784, 2), np.float32))
    assert ngraph_main(["run", str(path), "-i", f"X={batch_last}"]) == 1
    assert "looks batch last (neon's layout); np.moveaxis(x, -1, 0)" in capsys.readouterr().err
    assert ngraph_main(["run", str(path), "-i", f"X={_npy(tmp_path / 'x.npy', np.ones((2, 784), np.float32))}"]) == 0
    assert capsys.readouterr().out.startswith("output_0: shape (2, 3) float32")
    export(model, path, layout="native")  # [784, N]
    assert ngraph_main(["run", str(path), "-i", f"X={_npy(tmp_path / 'x.npy', np.ones((2, 784), np.float32))}"]) == 1
    err = capsys.readouterr().err
    assert "of shape [784, N] (batch last, ngraph's native layout), received (2, 784)" in err
    assert "exported with layout='native'" in err


def test_parsers_of_assignments() -> None:
    assert dim_assignment(" batch = 16 ") == ("batch", 16)
    assert input_assignment("input:0=a=b.npy") == ("input:0", "a=b.npy")
    assert dynamic_dims(onnx.ModelProto()) == []


def test_help_and_the_console_script(models, tmp_path: Path, capsys) -> None:
    for command in ("convert", "run"):
        assert ngraph_main([command, "--help"]) == 0
        assert "\nexamples:\n  ngraph " + command in capsys.readouterr().out
    script = SCRIPTS / "ngraph"
    if not script.exists():
        pytest.skip("the ngraph console script is not installed beside the interpreter")
    feed = _npy(tmp_path / "x.npy", np.ones((1, 3), np.float32))
    proc = subprocess.run([str(script), "run", str(models["affine"]), "--input", f"X={feed}"], capture_output=True,
                          text=True, timeout=120)
    expected = np.maximum(np.ones((1, 3), np.float32) @ W + B, 0)[0]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Y: shape (1, 2) float32: [")
    np.testing.assert_allclose([float(v) for v in proc.stdout.split("[")[1].split("]")[0].split()], expected,
                               atol=1e-5)
