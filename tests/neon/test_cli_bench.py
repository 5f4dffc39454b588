"""``ngraph bench``: throughput and latency lines for a saved model or deployable file; bad arguments exit 2."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import ngraph_core as ng
from neon.activations import Rectlin, Softmax
from neon.cli import ngraph_main
from neon.cli.bench import BenchResult, format_bench, load_compiled
from neon.initializers import Constant, GlorotUniform
from neon.layers import Affine
from neon.model import Model

LINES = ("Count:", "Duration:", "Latency:", "Median:", "Average:", "p90:", "p99:", "Min:", "Max:", "Throughput:")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4 -> 8 -> 3 MLP (layers hidden and out), built and saved."""
    model = Model([Affine(8, GlorotUniform(seed=0), bias=Constant(0.0), activation=Rectlin(), name="hidden"),
                   Affine(3, GlorotUniform(seed=1), bias=Constant(0.0), activation=Softmax(), name="out")])
    model.build((4,), batch_size=1)
    path = tmp_path_factory.mktemp("bench") / "mlp.h5"
    model.save_params(path)
    return path


def _figures(text: str) -> dict[str, float]:
    found = {}
    for key in LINES:
        match = re.search(rf"^\s*{re.escape(key)}\s+([0-9.]+)", text, re.MULTILINE)
        if match:
            found[key] = float(match.group(1))
    return found


def test_bench_prints_throughput_and_latency(tiny_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = ngraph_main(["bench", str(tiny_model), "--batch", "2", "--requests", "2", "--time", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert all(key in out for key in LINES)
    figures = _figures(out)
    assert figures["Count:"] >= 1
    assert figures["Min:"] <= figures["Median:"] <= figures["p90:"] <= figures["p99:"] <= figures["Max:"]
    # throughput is samples per second: count * batch / duration
    assert figures["Throughput:"] == pytest.approx(figures["Count:"] * 2 / (figures["Duration:"] / 1e3), rel=1e-2)
    assert figures["Duration:"] >= 1000
    assert "fp32, batch 2" in out


def test_bench_deployable_fp16_with_counters(tiny_model: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from neon.saving import load_model

    path = tmp_path / "mlp.ngi"
    ng.inference.compile_for_inference(load_model(tiny_model), precision="fp16", batch_size=3).save(path)
    code = ngraph_main(["bench", str(path), "--requests", "1", "--time", "0.3", "-pc"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "fp16, batch 3" in out and "Throughput:" in out
    assert "Performance counters (20 runs" in out
    for layer in ("hidden", "out"):  # every layer's row ran once per profiled run
        assert re.search(rf"^Sequential_0/{layer}/\S+\s.*EXECUTED\s+[0-9.]+\s+20\s", out, re.MULTILINE), out
    assert re.search(r"^Total time: [0-9.]+ ms over \d+ kernel calls$", out, re.MULTILINE)


def test_bench_int8_from_h5_with_calibration_file(tiny_model: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    npy = tmp_path / "samples.npy"
    np.save(npy, np.random.default_rng(1).standard_normal((8, 4)).astype(np.float32))
    code = ngraph_main(["bench", str(tiny_model), "--precision", "int8", "--calibration", str(npy),
                             "--time", "0.2", "--requests", "1"])
    out = capsys.readouterr().out
    assert code == 0 and "int8, batch 1" in out and "random inputs" not in out


@pytest.mark.parametrize("args", [
    ["--batch", "0"], ["--requests", "-1"], ["--time", "0"], ["--time", "nan"], ["--precision", "fp8"],
])
def test_bad_arguments_exit_2(tiny_model: Path, args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert ngraph_main(["bench", str(tiny_model), *args]) == 2
    assert "usage:" in capsys.readouterr().err


def test_deployable_with_another_batch_exits_2(tiny_model: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from neon.saving import load_model

    path = tmp_path / "mlp.ngi"
    ng.inference.compile_for_inference(load_model(tiny_model), batch_size=1).save(path)
    assert ngraph_main(["bench", str(path), "--batch", "4", "--time", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "--batch 1" in err and "received --batch 4" in err and "hint:" in err


def converted_graph(folder: Path, batch: int) -> Path:
    """A graph document as ``ngraph convert --dim N=batch`` writes one: ``relu(W . X)``, X of [F:64, N:batch]."""
    F, H, N = ng.make_axis(64, "F"), ng.make_axis(64, "H"), ng.make_axis(batch, "N")
    X = ng.placeholder([F, N], name="X")
    W = ng.variable([H, F], initial_value=np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32),
                    name="W")
    path = folder / f"dense_n{batch}.ngraph"
    path.write_text(ng.serialize([ng.relu(ng.dot(W, X)), X]))
    return path


def test_a_graph_documents_batch_is_its_n_axis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue: a --dim N=8 graph benched at --batch 8 and --batch 1 gave FPS 8x apart at the same latency."""
    graph8, graph1 = converted_graph(tmp_path, 8), converted_graph(tmp_path, 1)
    assert load_compiled(graph8).batch_size == 8 and load_compiled(graph1).batch_size == 1
    assert load_compiled(graph8, batch=8).batch_size == 8  # repeating the graph's batch is fine
    assert ngraph_main(["bench", str(graph8), "--batch", "1", "--time", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "shapes are fixed (its inputs' batch axis N has length 8), received --batch 1" in err
    assert "hint: leave --batch out, or convert the model again with --dim N=1" in err


def test_a_graph_without_a_batch_axis_is_batch_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fixed.json"
    x = ng.placeholder([ng.make_axis(4, "F")], name="x")
    path.write_text(ng.serialize([ng.exp(x), x]))
    assert load_compiled(path).batch_size == 1
    assert ngraph_main(["bench", str(path), "--batch", "4", "--time", "0.1"]) == 2
    assert "its inputs have no batch axis N), received --batch 4" in capsys.readouterr().err


def test_fps_is_the_graphs_batch_over_the_latency(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One request at a time: the requests' latencies add up to at most the duration, so FPS x latency is the batch
    (at most; less by the time between requests)."""
    assert ngraph_main(["bench", str(converted_graph(tmp_path, 8)), "--requests", "1", "--time", "0.5"]) == 0
    out = capsys.readouterr().out
    figures = _figures(out)
    assert "fp32, batch 8" in out and "(1 requests, batch 8)" in out
    samples_per_request = figures["Throughput:"] * figures["Average:"] / 1e3
    assert 0.05 * 8 < samples_per_request <= 8 * 1.01, out


def test_bench_refuses_a_checkpoint_of_another_model_class(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from neon.rl import DQNAgent

    DQNAgent([Affine(2, bias=Constant(0.0))], obs_shape=(3,), n_actions=2).save_params(tmp_path / "dqn.h5")
    assert ngraph_main(["bench", str(tmp_path / "dqn.h5"), "--time", "0.1"]) == 1
    assert "a DQNAgent checkpoint; hint: bench serves one network" in capsys.readouterr().err


def test_missing_file_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ngraph_main(["bench", str(tmp_path / "nope.h5"), "--time", "0.1"]) == 1
    assert "nope.h5" in capsys.readouterr().err


def test_format_bench_percentiles() -> None:
    result = BenchResult(count=5, duration_s=0.5, latencies_ms=[1.0, 2.0, 3.0, 4.0, 10.0], batch=4, requests=2)
    figures = _figures("\n".join(format_bench(result)))
    assert figures["Median:"] == 3.0 and figures["Average:"] == 4.0
    assert figures["Min:"] == 1.0 and figures["Max:"] == 10.0
    assert figures["p90:"] == pytest.approx(7.6) and figures["p99:"] == pytest.approx(9.76)
    assert figures["Throughput:"] == 40.0  # 5 requests x 4 samples / 0.5 s
