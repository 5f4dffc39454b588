"""The ``ngraph`` command: inspect, query and draw saved graphs (``ng.serialize``) and models (``save_params``).

It lives in the neon package because a saved model is rebuilt with ``neon.saving.load_model``,
and ``ngraph_core`` never imports ``neon``.

Example:
    $ ngraph info out/model.h5
    $ ngraph select out/model.h5 "Affine variable"
    $ ngraph viz out/model.h5 -o model.svg --select ".bias"
    $ ngraph convert model.onnx -o model.ngraph --dim N=8
    $ ngraph run model.onnx --input x=batch.npy
    $ ngraph ops tanh
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .bench import add_bench_arguments, run_bench
from .common import add_subcommand, command_parser, non_negative_int, run_command
from .graphs import FORMATS, run_select, run_viz
from .info import add_info_arguments, run_info
from .onnx_commands import add_convert_arguments, add_run_arguments, run_convert, run_onnx
from .op_catalog import add_ops_arguments, run_ops

__all__ = ["build_parser", "main"]

DESCRIPTION = "ngraph: inspect, query and draw saved graphs (ng.serialize, .json) and models (save_params, .h5)."
EXAMPLES = """examples:
  ngraph info out/model.h5
  ngraph select out/model.h5 "Affine variable"
  ngraph viz graph.json -o graph.svg
  ngraph convert model.onnx -o model.ngraph --dim N=8
  ngraph run model.onnx --input x=batch.npy
  ngraph ops tanh
  ngraph <command> --help"""


def build_parser() -> argparse.ArgumentParser:
    """The ``ngraph`` command's parser (subcommands ``info``, ``select``, ``viz``, ``bench``, ``convert``, ``run``,
    ``ops``).

    Example:
        >>> build_parser().parse_args(["select", "m.h5", "Affine"]).query
        'Affine'
    """
    parser = command_parser("ngraph", DESCRIPTION, EXAMPLES)
    info = add_subcommand(parser, "info", "Summarize a saved model (layers, parameters, ops, memory plan) or graph.", [
        "ngraph info out/model.h5",
        "ngraph info graph.json",
    ], run_info)
    add_info_arguments(info)

    select = add_subcommand(parser, "select", "Print the names a selector query matches, one per line.", [
        'ngraph select out/model.h5 "Affine variable"',
        'ngraph select out/model.h5 "Conv > Pool variable"',
        'ngraph select graph.json ".elementwise:not(Conv *)"',
    ], run_select)
    select.add_argument("path", help="a saved model (.h5) or graph (.json)")
    select.add_argument("query", help="a selector, CSS-like (docs/selectors.md); quote it for the shell")
    select.add_argument("--strict", action="store_true",
                        help="a layer type the graph does not have (a typo: 'Afine') is an error (exit 2), not a "
                             "warning")

    viz = add_subcommand(parser, "viz", "Draw a saved graph or model as SVG or PNG, optionally highlighting a "
                         "selection.", [
        "ngraph viz out/model.h5 -o model.svg",
        'ngraph viz out/model.h5 -o model.png --select "Affine variable" --collapse 2',
        "ngraph viz graph.json -o graph.out --format svg",
    ], run_viz)
    viz.add_argument("path", help="a saved model (.h5) or graph (.json)")
    viz.add_argument("-o", "--out", required=True, help="the picture to write")
    viz.add_argument("--select", default=None, metavar="QUERY", help="highlight what this selector matches")
    viz.add_argument("--strict", action="store_true",
                     help="--select: a layer type the graph does not have (a typo: 'Afine') is an error (exit 2), "
                          "not a warning")
    viz.add_argument("--format", choices=FORMATS, default=None, help="default: the output file's extension")
    viz.add_argument("--collapse", type=non_negative_int, default=None, metavar="DEPTH",
                     help="draw the layer scopes at DEPTH (1: the outermost) as single boxes; 0: never; default: "
                          "only when the graph is large")
    bench = add_subcommand(parser, "bench", "Throughput and latency percentiles of a model served by ng.inference "
                           "(like benchmark_app).", [
        "ngraph bench out/model.h5 --batch 1 --requests 4 --time 10",
        "ngraph bench out/model.h5 --precision int8 --calibration samples.npy -pc",
        "ngraph bench model.ngi --time 5",
        "ngraph bench out/char_transformer/char_transformer.h5 --generate 200 --compare",
    ], run_bench)
    add_bench_arguments(bench)
    convert = add_subcommand(parser, "convert", "Import an ONNX model and write it as a graph document "
                             "(ng.serialize).", [
        "ngraph convert model.onnx -o model.ngraph",
        "ngraph convert model.onnx -o model.ngraph --dim N=8 --initializers constants",
    ], run_convert)
    add_convert_arguments(convert)
    run = add_subcommand(parser, "run", "Run an ONNX model on .npy inputs; print (and save) its outputs.", [
        "ngraph run model.onnx --input x=batch.npy",
        "ngraph run model.onnx --input ids=ids.npy --input mask=mask.npy --output out.npz",
    ], run_onnx)
    add_run_arguments(run)
    ops = add_subcommand(parser, "ops", "Print the op catalog: what each op has (inference, kernel, gradient, fast "
                         "paths, ONNX) and why it lacks the rest.", [
        "ngraph ops",
        "ngraph ops tanh conv",
    ], run_ops)
    add_ops_arguments(ops)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ngraph`` command; returns its exit code (0 ok, 1 error, 2 bad arguments or a malformed query).

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        the exit code.

    Example:
        >>> main(["select", "out/model.h5", "Affine variable"])
        0
    """
    return run_command(build_parser(), list(sys.argv[1:] if argv is None else argv))
