"""The ``neon`` and ``ngraph`` commands: in-process through ``main(argv)`` (output captured), and once each
through the installed console scripts. A tiny saved model (4 -> 8 -> 3, 67 parameters) is the subject."""

from __future__ import annotations

import argparse
import importlib
import io
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import ngraph_core as ng
from neon.activations import Rectlin, Softmax
from neon.cli import neon_main, ngraph_main
from neon.cli.common import CommandError
from neon.cli.info import format_bytes
from neon.cli.zoo import RECIPES, recipe_description, recipe_flags, recipe_parser, train_arguments
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator
from neon.initializers import Constant, GlorotUniform
from neon.layers import Affine
from neon.model import Model
from neon.optimizers import GradientDescentMomentum
from neon.saving import CheckpointData, CheckpointError, load_model, write_checkpoint

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(sys.executable).parent  # console scripts are installed beside the interpreter


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4 -> 8 -> 3 MLP (layers named hidden and out) fit 1 epoch on random data, saved."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 4)).astype(np.float32), rng.integers(0, 3, 40)
    model = Model([Affine(8, GlorotUniform(seed=0), bias=Constant(0.0), activation=Rectlin(), name="hidden"),
                   Affine(3, GlorotUniform(seed=1), bias=Constant(0.0), activation=Softmax(), name="out")])
    model.fit(ArrayIterator(X, y, nclass=3, batch_size=20), CrossEntropyMulti(), GradientDescentMomentum(0.1), 1,
              progress=False)
    path = tmp_path_factory.mktemp("cli") / "mlp.h5"
    model.save_params(path)
    return path


@pytest.fixture(scope="module")
def saved_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``W . X + 1`` with a [C:3, D:4] variable, as a graph document."""
    C, D, N = ng.make_axis(3, "C"), ng.make_axis(4, "D"), ng.make_axis(2, "N")
    X = ng.placeholder([D, N], name="X")
    W = ng.variable([C, D], initial_value=np.ones((3, 4), np.float32), name="W")
    path = tmp_path_factory.mktemp("cli") / "graph.json"
    path.write_text(ng.serialize([ng.dot(W, X) + 1.0, X]))
    return path


# -- info ------------------------------------------------------------------------------------------------
def test_info_reports_parameters_ops_and_the_memory_plan(saved_model: Path, capsys: pytest.CaptureFixture) -> None:
    assert neon_main(["info", str(saved_model), "--batch-size", "16"]) == 0
    out = capsys.readouterr().out
    assert "parameters: 67 trainable (67 in all 4 variables)" in out  # 4*8+8 + 8*3+3
    assert "Model: epoch 1, samples of shape (4,) (dense)" in out
    model = load_model(saved_model)  # the figures, from the public API
    inputs, y_hat = model.inference_graph(16)
    computation = model.transformer.computation(y_hat, *inputs, mode="inference")
    report = computation.memory_report()
    assert (f"inference graph (batch 16): {len(ng.ordered_ops([y_hat]))} ops built, {len(computation.graph.order)} "
            "after the pass pipeline") in out
    assert f"memory plan: arena {format_bytes(report.arena_bytes)} vs {format_bytes(report.unplanned_bytes)} " \
           f"without reuse ({report.reuse_ratio:.2f}x)" in out
    assert report.arena_bytes < report.unplanned_bytes  # batch 16: reuse pays


def test_byte_counts_read_as_people_write_them() -> None:
    assert [format_bytes(n) for n in (0, 704, 1216, 3 << 20, 5 << 30)] == ["0 B", "704 B", "1.2 KiB", "3.0 MiB",
                                                                           "5.0 GiB"]


def test_ngraph_info_is_neon_info(saved_model: Path, capsys: pytest.CaptureFixture) -> None:
    assert neon_main(["info", str(saved_model)]) == 0
    neon_out = capsys.readouterr().out
    assert ngraph_main(["info", str(saved_model)]) == 0
    assert capsys.readouterr().out == neon_out
    if not hasattr(Model, "summary"):  # the fallback listing: one line per layer owning variables
        assert "Sequential_0/hidden  Affine                  40  W[hidden:8, F:4], b[hidden:8]" in neon_out
        assert "Sequential_0/out     Affine                  27  W[out:3, hidden:8], b[out:3]" in neon_out


def test_info_on_a_graph_document(saved_graph: Path, capsys: pytest.CaptureFixture) -> None:
    assert ngraph_main(["info", str(saved_graph)]) == 0
    out = capsys.readouterr().out
    assert "graph: 2 roots" in out and "variables: 1 holding 12 values" in out
    assert "placeholders: X [D:4, N:2]" in out and "dot 1" in out


# -- select ----------------------------------------------------------------------------------------------
def test_select_prints_the_selected_names_and_a_count(saved_model: Path, capsys: pytest.CaptureFixture) -> None:
    assert ngraph_main(["select", str(saved_model), "#hidden variable"]) == 0
    captured = capsys.readouterr()
    assert sorted(captured.out.splitlines()) == ["Sequential_0/hidden/Bias_0/b", "Sequential_0/hidden/Linear_0/W"]
    assert captured.err.strip() == "2 selected by '#hidden variable'"
    assert ngraph_main(["select", str(saved_model), "Affine"]) == 0  # layer scopes: their paths
    assert sorted(capsys.readouterr().out.splitlines()) == ["Sequential_0/hidden", "Sequential_0/out"]


def test_a_misspelt_layer_type_warns_on_stderr_or_fails_with_strict(saved_model: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    assert ngraph_main(["select", str(saved_model), "Afine variable"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""  # stdout stays one name per line
    assert captured.err.startswith('warning: select: "Afine variable": type Afine names no layer type of this graph')
    assert "did you mean Affine?" in captured.err and "0 selected by 'Afine variable'" in captured.err
    assert ngraph_main(["select", str(saved_model), "Afine variable", "--strict"]) == 2
    err = capsys.readouterr().err
    assert "ngraph select: error: select:" in err and "did you mean Affine?" in err
    assert ngraph_main(["viz", str(saved_model), "-o", str(tmp_path / "m.dot"), "--select", "Afine", "--strict"]) == 2
    assert not (tmp_path / "m.dot").exists()


def test_a_malformed_query_exits_2_pointing_at_the_column(saved_model: Path, capsys: pytest.CaptureFixture) -> None:
    assert ngraph_main(["select", str(saved_model), "Affine >> > variable"]) == 2
    err = capsys.readouterr().err
    assert "ngraph select: error:" in err and "column" in err and "Traceback" not in err


# -- viz -------------------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
@pytest.mark.parametrize("source", ["saved_model", "saved_graph"])
def test_viz_writes_an_svg(source: str, request: pytest.FixtureRequest, tmp_path: Path,
                           capsys: pytest.CaptureFixture) -> None:
    path = request.getfixturevalue(source)
    out = tmp_path / "graph.svg"
    assert ngraph_main(["viz", str(path), "-o", str(out)]) == 0
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and text.rstrip().endswith("</svg>")
    assert f"wrote {out} (svg)" in capsys.readouterr().out


def test_viz_highlights_the_selection(saved_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "model.dot"  # the DOT text: no Graphviz program needed
    argv = ["viz", str(saved_model), "-o", str(out), "--select", "#hidden variable", "--collapse", "0"]
    assert ngraph_main(argv) == 0
    text = out.read_text()
    assert text.count(f'fillcolor="{ng.viz.HIGHLIGHT_COLOR}"') == 2  # hidden's W and b
    assert "2 highlighted by '#hidden variable'" in capsys.readouterr().out
    assert ngraph_main(["viz", str(saved_model), "-o", str(out), "--select", "Affine >"]) == 2
    assert "column" in capsys.readouterr().err


def test_viz_needs_a_known_format(saved_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert ngraph_main(["viz", str(saved_model), "-o", str(tmp_path / "graph.bmp")]) == 2
    assert "expected an output file ending in .svg, .png" in capsys.readouterr().err
    assert ngraph_main(["viz", str(saved_model), "-o", str(tmp_path / "g.svg"), "--format", "bmp"]) == 2
    assert "invalid choice: 'bmp'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


# -- errors ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["info"], ["select", "QUERY"], ["viz", "-o", "x.svg"]])
def test_a_corrupt_file_exits_1_with_a_message_and_no_traceback(argv: list[str], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "model.h5"
    bad.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 200)  # an HDF5 signature, then nothing HDF5 can read
    assert ngraph_main([argv[0], str(bad), *argv[1:]]) == 1
    err = capsys.readouterr().err
    assert f"ngraph {argv[0]}: error: {bad}:" in err and "hint:" in err and "Traceback" not in err


def test_a_missing_file_and_a_file_of_another_kind(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert neon_main(["info", str(tmp_path / "nope.h5")]) == 1
    err = capsys.readouterr().err
    assert f"neon info: error: {tmp_path / 'nope.h5'}: No such file or directory" in err and "check the path" in err
    (tmp_path / "notes.txt").write_text("hello")
    assert ngraph_main(["info", str(tmp_path / "notes.txt")]) == 1
    assert "expected a saved model (HDF5, from Model.save_params) or a saved graph" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text('{"format_version": 1, "ops": [')
    assert ngraph_main(["info", str(tmp_path / "broken.json")]) == 1
    assert "complete JSON text" in capsys.readouterr().err


def test_an_older_gan_checkpoint_says_how_to_load_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "gan.h5"
    write_checkpoint(path, CheckpointData(model=[{"class_name": "GAN", "noise_dim": 4}], input_shape=(4,)))
    assert neon_main(["info", str(path)]) == 1
    assert "written by an older GAN.save_params); hint: build the GAN" in capsys.readouterr().err


def test_info_describes_every_model_class_the_recipes_save(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A GAN, a DQN agent and a char seq2seq file: class, epoch, sample shape, layers and parameters."""
    from model_zoo.char_seq2seq import Seq2Seq, task_vocabulary
    from neon.activations import Logistic, Tanh
    from neon.gan import GAN
    from neon.rl import DQNAgent

    gan = GAN([Affine(6, bias=Constant(0.0), activation=Tanh())], [Affine(1, activation=Logistic())], noise_dim=3)
    gan.build((6,))
    owners = {"gan": gan, "dqn": DQNAgent([Affine(2, bias=Constant(0.0))], obs_shape=(3,), n_actions=2),
              "s2s": Seq2Seq(task_vocabulary("reverse"), embedding_dim=4, hidden=8)}
    expected = {"gan": ["GAN: epoch 0, samples of shape (6,)", "generator/Affine_0/Linear_0", "W[Affine_0:6, Z:3]",
                        "parameters: 30 trainable (30 in all 3 variables)"],
                "dqn": ["DQNAgent: epoch 0, samples of shape (3,)", "online/Affine_0/Linear_0", "target/Affine_0",
                        "parameters: 16 trainable"],
                "s2s": ["Seq2Seq: epoch 0", "encoder/LSTMCell_0", "parameters: 1,325 trainable"]}
    for name, owner in owners.items():
        owner.save_params(tmp_path / f"{name}.h5")
        assert neon_main(["info", str(tmp_path / f"{name}.h5")]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert all(line in out for line in expected[name]), out
    assert ngraph_main(["select", str(tmp_path / "gan.h5"), "variable"]) == 0
    assert "generator/Affine_0/Linear_0/W" in capsys.readouterr().out


def test_ctrl_c_exits_130_without_a_traceback(saved_model: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture) -> None:
    def interrupted(path: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("neon.cli.info.load_source", interrupted)
    assert neon_main(["info", str(saved_model)]) == 130
    assert capsys.readouterr().err == "neon info: interrupted\n"


def test_debug_shows_the_exception(tmp_path: Path) -> None:
    (tmp_path / "junk.h5").write_bytes(b"junk")
    with pytest.raises(CheckpointError, match="not an HDF5 file"):
        neon_main(["--debug", "info", str(tmp_path / "junk.h5")])
    with pytest.raises(CheckpointError, match="not an HDF5 file"):
        ngraph_main(["info", str(tmp_path / "junk.h5"), "--debug"])


@pytest.mark.parametrize(("main", "argv", "message"), [
    (neon_main, [], "the following arguments are required: COMMAND"),
    (neon_main, ["zoo"], "the following arguments are required: COMMAND"),
    (neon_main, ["fly"], "invalid choice: 'fly'"),
    (neon_main, ["info"], "the following arguments are required: path"),
    (neon_main, ["info", "m.h5", "--batch-size", "0"], "expected a positive integer, received 0"),
    (neon_main, ["train", "char_seq2seq", "--epochs", "two"], "expected a positive integer, received 'two'"),
    (ngraph_main, ["select", "m.h5"], "the following arguments are required: query"),
    (ngraph_main, ["viz", "m.h5"], "the following arguments are required: -o/--out"),
    (ngraph_main, ["viz", "m.h5", "-o", "g.svg", "--collapse", "-1"], "expected an integer >= 0, received -1"),
])
def test_bad_arguments_exit_2_with_a_message(main, argv: list[str], message: str,
                                             capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("usage: ")


@pytest.mark.parametrize(("main", "argv"), [
    (neon_main, []), (neon_main, ["zoo"]), (neon_main, ["zoo", "list"]), (neon_main, ["train"]),
    (neon_main, ["info"]), (ngraph_main, []), (ngraph_main, ["info"]), (ngraph_main, ["select"]),
    (ngraph_main, ["viz"]),
])
def test_every_command_has_help_with_examples(main, argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert main([*argv, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ") and "\nexamples:\n  " in out


# -- the zoo ---------------------------------------------------------------------------------------------
def test_zoo_list_shows_every_recipe_with_its_description_and_data(capsys: pytest.CaptureFixture) -> None:
    assert neon_main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    for name, data in RECIPES.items():
        first_line = importlib.import_module(f"model_zoo.{name}").__doc__.strip().splitlines()[0]
        assert f"{name}  " in out and first_line.replace("``", "") in out and f"data: {data}" in out
    assert recipe_description("dcgan_mnist") == "DCGAN on MNIST (Radford et al. 2016, scaled to 28x28), trained " \
                                                "with neon.gan.GAN."


def make_installs(target: str) -> str:
    """The Makefile rule bodies ``make target`` runs (prerequisites followed), plus the setup.cfg extras they
    pip-install: the text in which what the target installs is named."""
    makefile = (ROOT / "Makefile").read_text()
    variables = dict(re.findall(r"^(\w+)\s*[:?]?=\s*(.*)$", makefile, re.MULTILINE))

    def expand(text: str) -> str:
        for _ in range(5):
            text = re.sub(r"\$\((\w+)\)", lambda m: variables.get(m.group(1), m.group(0)), text)
        return text

    rules: dict[str, tuple[list[str], str]] = {}
    for match in re.finditer(r"^([^\s#][^:=\n]*):(?!=)([^\n]*)\n((?:\t[^\n]*\n)*)", makefile, re.MULTILINE):
        for name in expand(match.group(1)).split():
            rules[name] = (expand(match.group(2).split("#")[0]).split(), match.group(3))
    seen, stack, text = set(), [target], []
    while stack:
        name = stack.pop()
        if name in seen or name not in rules:
            continue
        seen.add(name)
        prerequisites, body = rules[name]
        stack.extend(prerequisites)
        text.append(body)
    setup = (ROOT / "setup.cfg").read_text()
    for extra in re.findall(r"install -e '\.\[(\w+)\]'", "".join(text)):
        text.append(re.search(rf"^{extra} =\n((?:[ \t]+[^\n]*\n)*)", setup, re.MULTILINE).group(1))
    return "".join(text).lower()


def test_zoo_list_names_the_readme_command_that_installs_each_recipes_data() -> None:
    """``neon zoo list`` says which of the README's two commands (make run, make test) installs a recipe's data,
    and that command's Makefile layer does install it (the pinned package, or espeak-ng)."""
    quick_start = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = set(re.findall(r"^make (\w+)", quick_start.split("```bash", 1)[1].split("```", 1)[0], re.MULTILINE))
    assert commands == {"run", "test"}
    for name, data in RECIPES.items():
        for target in re.findall(r"\bmake (\w+)", data):
            assert target in commands, f"{name}: 'make {target}' is not one of the README's commands {commands}"
            installed = make_installs(target)
            for package in [*re.findall(r"([\w-]+)==[\d.]+", data), *re.findall(r"espeak-ng", data)]:
                assert package.lower() in installed, f"{name}: make {target} does not install {package}"
    assert "make test" in RECIPES["ctc_speech"] and "make run" in RECIPES["dcgan_mnist"]


def test_the_recipe_table_covers_every_recipe_module() -> None:
    modules = {p.stem for p in (ROOT / "model_zoo").glob("*.py") if "\ndef main(" in p.read_text()}
    assert modules == set(RECIPES)


@pytest.mark.parametrize("name", list(RECIPES))
def test_each_recipe_parser_is_found_without_running_the_recipe(name: str) -> None:
    original = argparse.ArgumentParser.parse_args
    parser = recipe_parser(importlib.import_module(f"model_zoo.{name}"))
    assert argparse.ArgumentParser.parse_args is original  # put back
    flags = recipe_flags(parser)
    # supervised recipes count epochs; the reinforcement-learning ones count environment steps
    assert "--out" in flags and "--help" not in flags
    assert {"--epochs", "--batch-size"} <= set(flags) or (name.startswith("dqn_") and "--steps" in flags), flags
    count = "--epochs" if "--epochs" in flags else "--steps"
    assert getattr(parser.parse_args([count, "3"]), count[2:]) == 3
    # every recipe takes --progress/--no-progress; not given, the recipe decides (a bar on a terminal)
    assert [parser.parse_args(f).progress for f in ([], ["--progress"], ["--no-progress"])] == [None, True, False]


def test_a_recipe_main_that_never_parses_is_reported() -> None:
    fake = types.ModuleType("model_zoo.fake")
    fake.main = lambda argv: 0
    with pytest.raises(CommandError, match=r"expected model_zoo.fake.main\(argv\) to parse its arguments with "
                                           "argparse"):
        recipe_parser(fake)


def test_common_flags_translate_into_the_recipe_line() -> None:
    parser = recipe_parser(importlib.import_module("model_zoo.lstm_sentiment"))
    args = argparse.Namespace(epochs=2, batch_size=None, data_dir="/data/aclImdb", out="o", parser=None)
    assert train_arguments("lstm_sentiment", parser, args, ["--hidden", "16"]) == [
        "--epochs", "2", "--data-dir", "/data/aclImdb", "--out", "o", "--hidden", "16"]


def test_progress_flags_pass_on_only_when_given() -> None:
    parser = recipe_parser(importlib.import_module("model_zoo.dqn_cartpole"))
    line = [train_arguments("dqn_cartpole", parser, argparse.Namespace(epochs=None, batch_size=None, data_dir=None,
                                                                        out=None, progress=p, parser=None), [])
            for p in (None, True, False)]
    assert line == [[], ["--progress"], ["--no-progress"]]
    from neon.cli.neon_main import build_parser

    assert build_parser().parse_args(["train", "char_lm", "--no-progress"]).progress is False


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal, so tqdm draws (and recipes choose the bar)."""

    def isatty(self) -> bool:
        return True


def test_show_progress_follows_the_flag_else_the_terminal() -> None:
    from model_zoo.progress import show_progress

    assert show_progress(None, _Terminal()) and not show_progress(None, io.StringIO())
    assert show_progress(True, io.StringIO()) and not show_progress(False, _Terminal())


S2S = ["--epochs", "1", "--batch-size", "32", "--", "--task", "reverse", "--n-train", "32", "--n-test", "4",
       "--hidden", "8"]


@pytest.mark.parametrize("flags, bar", [([], True), (["--no-progress"], False)])
def test_train_draws_a_bar_on_a_terminal(flags: list[str], bar: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert neon_main(["train", "char_seq2seq", *flags, "--out", str(tmp_path), *S2S]) == 0
    assert ("batch/s" in terminal.getvalue() or "s/batch" in terminal.getvalue()) is bar
    assert capsys.readouterr().out.count("epoch 1/1") == 1  # the epoch's line either way


def test_train_off_a_terminal_prints_one_line_per_epoch(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert neon_main(["train", "char_seq2seq", "--out", str(tmp_path), *S2S]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("epoch 1/1") == 1 and "epoch" not in captured.err  # no bar, no second line


def test_dqn_shows_its_step_bar_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert neon_main(["train", "dqn_cartpole", "--out", str(tmp_path), "--", "--steps", "40", "--eval-episodes",
                      "1"]) == 0
    assert "train_dqn" in terminal.getvalue() and "40/40" in terminal.getvalue()


def test_train_runs_a_tiny_recipe_into_out(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "s2s"
    assert neon_main(["train", "char_seq2seq", "--epochs", "1", "--batch-size", "32", "--out", str(out), "--",
                      "--task", "reverse", "--n-train", "64", "--n-test", "8", "--hidden", "16"]) == 0
    printed = capsys.readouterr().out
    assert "task reverse: 64 training" in printed and "epoch 1/1" in printed  # recipe args and --epochs arrived
    assert (out / "reverse.h5").is_file()


def test_train_backend_reaches_every_model_of_the_recipe(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    """``--backend`` sets NG_BACKEND while the recipe runs (its models read it), then restores it; ``auto``
    without a GPU trains on NumPy with a warning."""
    import os

    monkeypatch.setitem(sys.modules, "cupy", None)  # no CuPy: auto falls back
    monkeypatch.delenv("NG_BACKEND", raising=False)
    seen = []
    real = ng.transformers.make_transformer

    def spy(backend="numpy", **options):
        seen.append((backend, os.environ.get("NG_BACKEND")))
        return real(backend, **options)

    monkeypatch.setattr(ng.transformers, "make_transformer", spy)
    with pytest.warns(RuntimeWarning, match="running on NumPy"):
        assert neon_main(["train", "char_seq2seq", "--epochs", "1", "--batch-size", "32", "--backend", "auto", "--",
                          "--task", "reverse", "--n-train", "32", "--n-test", "4", "--hidden", "8"]) == 0
    assert seen and all(s == ("auto", "auto") for s in seen)  # every transformer the recipe made
    assert "NG_BACKEND" not in os.environ
    assert neon_main(["train", "char_seq2seq", "--backend", "tpu"]) == 2
    assert "invalid choice: 'tpu'" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["flag", "recipe flag", "environment"])
def test_cupy_without_a_gpu_fails_before_any_data_loads(where: str, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # no CuPy here (the same message path as no GPU)
    monkeypatch.delenv("NG_BACKEND", raising=False)
    loaded = []
    import model_zoo.dqn_atari as atari

    monkeypatch.setattr(atari, "train", lambda *a, **k: loaded.append("train"))  # where the data would load
    argv = {"flag": ["--backend", "cupy"], "recipe flag": ["--", "--backend", "cupy"], "environment": []}[where]
    if where == "environment":
        monkeypatch.setenv("NG_BACKEND", "cupy")
    assert neon_main(["train", "dqn_atari", *argv]) == 1
    err = capsys.readouterr().err
    assert "train dqn_atari: --backend cupy, checked before loading any data: cupy transformer: CuPy is not " \
           "installed" in err and "--backend numpy" in err
    assert loaded == []


def test_model_backend_defaults_to_ng_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NG_BACKEND", "cupy")
    assert Model([Affine(2)]).backend == "cupy" and Model([Affine(2)], backend="numpy").backend == "numpy"
    monkeypatch.setenv("NG_BACKEND", " ")
    assert Model([Affine(2)]).backend == "numpy"


def test_an_unknown_recipe_exits_2_with_suggestions(capsys: pytest.CaptureFixture) -> None:
    assert neon_main(["train", "char_seq2seqq"]) == 2
    err = capsys.readouterr().err
    assert "unknown recipe 'char_seq2seqq'; did you mean char_seq2seq" in err
    assert "expected one of resnet_cifar10, dcgan_mnist, ctc_speech, lstm_sentiment, char_seq2seq, char_lm" in err


def test_a_flag_the_recipe_lacks_exits_2_naming_its_flags(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    assert neon_main(["train", "char_seq2seq", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "recipe char_seq2seq does not take --data-dir; it takes --task, --epochs, --n-train" in err
    assert not list(tmp_path.iterdir())


def test_bad_recipe_arguments_exit_2_before_training(capsys: pytest.CaptureFixture) -> None:
    assert neon_main(["train", "char_seq2seq", "--", "--task", "juggle"]) == 2
    err = capsys.readouterr().err
    assert "neon train char_seq2seq --: error: argument --task: invalid choice: 'juggle'" in err
    assert neon_main(["train", "char_seq2seq", "--", "--help"]) == 0
    assert "--n-train" in capsys.readouterr().out


# -- the installed commands --------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["neon"], ["ngraph"], ["-m", "neon"]])
def test_the_installed_commands_run(command: list[str]) -> None:
    argv = [sys.executable, *command] if command[0] == "-m" else [str(SCRIPTS / command[0])]
    assert command[0] == "-m" or Path(argv[0]).is_file(), f"{argv[0]} is missing; hint: pip install -e . --no-deps"
    result = subprocess.run([*argv, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    name = "neon" if command[-1] == "neon" else "ngraph"
    assert result.stdout.startswith(f"usage: {name} ") and "examples:" in result.stdout
    bad = subprocess.run([*argv, "nonsense"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "invalid choice: 'nonsense'" in bad.stderr
