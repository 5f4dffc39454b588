"""``info``: what a saved model (or graph) holds — layers, parameters, ops, and the inference memory plan.

For a ``Model``: its layers (``Model.summary()`` where the model has one, else a listing of the
layers that own variables), the trainable parameter count (and all variables, running
averages included), the ops of the inference graph for ``--batch-size`` samples as built and
after the pass pipeline, and that computation's memory plan (``Computation.memory_report``):
the arena against the bytes every temporary would take without reuse. For a graph document:
its ops by kind, variables and placeholders. For another model class ``load_model`` rebuilds (a
``GAN``, a ``DQNAgent``, a character model): its class, epoch and sample shape, one line per
layer owning variables (by checkpoint key), and the parameter counts (``owner_info``).

Example:
    >>> parameter_counts(load_model("m.h5"))
    (67, 67)
    >>> for line in model_info(load_model("m.h5"), batch_size=32): print(line)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
from collections import Counter
from typing import Any

import ngraph_core as ng

from ..model import Model
from ..training import TrainingOwner
from .common import positive_int
from .sources import load_source

__all__ = ["add_info_arguments", "format_bytes", "graph_info", "model_info", "owner_info", "parameter_counts",
           "run_info"]


def add_info_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``info``, shared by ``neon info`` and ``ngraph info``: the file and ``--batch-size``."""
    parser.add_argument("path", help="a model saved with Model.save_params (.h5), or a graph from ng.serialize (.json)")
    parser.add_argument("--batch-size", type=positive_int, default=1,
                        help="samples in the inference graph whose ops and memory plan are reported (default 1)")


def run_info(args: argparse.Namespace) -> int:
    """The ``info`` subcommand: print ``model_info`` (or ``graph_info``) of ``args.path``; exit code 0."""
    source = load_source(args.path)
    if isinstance(source, Model):
        lines = model_info(source, args.batch_size)
    elif isinstance(source, TrainingOwner):
        lines = owner_info(source)
    else:
        lines = graph_info(source)
    print(f"{args.path}:")
    print("\n".join(lines))
    return 0


def parameter_counts(model: Model) -> tuple[int, int]:
    """``(trainable parameters, values in all variables)`` of a built model.

    Example:
        >>> parameter_counts(model)  # Affine 4->8, Affine 8->3
        (67, 67)
    """
    variables = model.variables
    trainable = [v for v in variables if "trainable" in v.meta.labels]
    return sum(_size(v) for v in trainable), sum(_size(v) for v in variables)


def model_info(model: Model, batch_size: int = 1) -> list[str]:
    """The lines ``info`` prints for a built model.

    Args:
        model: a built model (``load_model`` gives one).
        batch_size: samples in the inference graph whose ops and memory plan are reported.

    Returns:
        lines of text: header, layers, parameters, ops, memory plan.

    Example:
        >>> model_info(load_model("m.h5"))[0]
        'Model: epoch 2, samples of shape (4,) (dense)'
    """
    lines = [f"Model: epoch {model.epoch}, samples of shape {tuple(model.input_shape or ())} ({model.input_kind})"]
    lines += _layer_lines(model)
    trainable, total = parameter_counts(model)
    lines.append(f"parameters: {trainable:,} trainable ({total:,} in all {len(model.variables)} variables)")
    # the inference graph exactly as predict builds it (Model.inference_graph), then compiled once here
    inputs, y_hat = model.inference_graph(batch_size)
    computation = model.transformer.computation(y_hat, *inputs, mode="inference")
    built = ng.ordered_ops([y_hat])
    lines.append(f"inference graph (batch {batch_size}): {len(built)} ops built, {len(computation.graph.order)} after "
                 "the pass pipeline")
    report, size = computation.memory_report(), format_bytes
    lines.append(f"memory plan: arena {size(report.arena_bytes)} vs {size(report.unplanned_bytes)} without reuse "
                 f"({report.reuse_ratio:.2f}x); peak live {size(report.peak_live_bytes)}; {report.buffers} buffers, "
                 f"{report.in_place} in place; variables {size(report.persistent_bytes)}, kernel workspace "
                 f"{size(report.workspace_bytes)}")
    return lines


def owner_info(owner: TrainingOwner) -> list[str]:
    """The lines ``info`` prints for a model class other than ``Model`` (``GAN``, ``DQNAgent``, ``Seq2Seq``...).

    Its layers are read from its checkpoint keys (``generator/Conv_0/...``): one line per layer
    owning variables, with its parameters; then the counts. Optimizer state is not listed
    (``load_model`` leaves it in the file).

    Example:
        >>> owner_info(load_model("out/dcgan_mnist/dcgan_mnist.h5"))[0]
        'GAN: epoch 5, samples of shape (1, 28, 28)'
    """
    params, _ = owner.checkpoint_keys()
    shape = getattr(owner, "sample_shape", None) or getattr(owner, "obs_shape", None)
    header = f"{type(owner).__name__}: epoch {owner.epoch}"
    lines = [header + (f", samples of shape {tuple(shape)}" if shape else "")]
    owners: dict[str, list[tuple[str, ng.Op]]] = {}
    for key, var in params.items():
        layer, _, name = key.rpartition("/")
        owners.setdefault(layer or "(model)", []).append((name, var))
    width = max((len(p) for p in owners), default=5)
    lines.append(f"{'layer':<{width}}  {'parameters':>12}  variables")
    for layer, variables in owners.items():
        shapes = ", ".join(f"{name}{_axes(v)}" for name, v in variables)
        lines.append(f"{layer:<{width}}  {sum(_size(v) for _, v in variables):>12,}  {shapes}")
    trainable = [v for v in params.values() if "trainable" in v.meta.labels]
    total = sum(_size(v) for v in params.values())
    lines.append(f"parameters: {sum(_size(v) for v in trainable):,} trainable ({total:,} in all {len(params)} "
                 "variables)")
    return lines


def graph_info(roots: list[ng.Op]) -> list[str]:
    """The lines ``info`` prints for a graph document's roots: ops by kind, variables, placeholders.

    Example:
        >>> graph_info(ng.deserialize(text))[0]
        'graph: 2 roots, 7 ops'
    """
    ops = ng.ordered_ops(roots)
    kinds = Counter(op.op.name.lower() for op in ops)
    variables = [op for op in ops if op.op is ng.OpType.VARIABLE]
    placeholders = [op for op in ops if op.op is ng.OpType.PLACEHOLDER]
    return [
        f"graph: {len(roots)} roots, {len(ops)} ops",
        "ops by kind: " + ", ".join(f"{kind} {n}" for kind, n in kinds.most_common()),
        f"variables: {len(variables)} holding {sum(_size(v) for v in variables):,} values",
        "placeholders: " + (", ".join(f"{p.name or 'placeholder'} {_axes(p)}" for p in placeholders) or "none"),
    ]


# -- helpers ------------------------------------------------------------------------------------------
def _layer_lines(model: Model) -> list[str]:
    """``Model.summary()``'s text where the model has one, else one line per layer owning variables."""
    summary = getattr(model, "summary", None)
    if callable(summary):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):  # a summary may print instead of returning its text
            text = summary()
        text = text if isinstance(text, str) else printed.getvalue()
        return text.rstrip("\n").splitlines()
    owners: dict[str, list[ng.Op]] = {}
    kinds: dict[str, str] = {}
    for var in model.variables:
        scope = var.meta.scope[:2]  # the top container and its child: one line per layer of a Sequential
        path = "/".join(entry.name for entry in scope) or "(model)"
        owners.setdefault(path, []).append(var)
        kinds[path] = scope[-1].kind if scope else "-"
    width = max((len(p) for p in owners), default=5)
    lines = [f"{'layer':<{width}}  {'type':<14}{'parameters':>12}  variables"]
    for path, variables in owners.items():
        shapes = ", ".join(f"{_name(v)}{_axes(v)}" for v in variables)
        lines.append(f"{path:<{width}}  {kinds[path]:<14}{sum(_size(v) for v in variables):>12,}  {shapes}")
    return lines


def _size(op: ng.Op) -> int:
    return math.prod(axis.length for axis in op.axes)


def _axes(op: ng.Op) -> str:
    return "[" + ", ".join(f"{a.name}:{a.length}" for a in op.axes) + "]"


def _name(var: Any) -> str:
    return (var.meta.name or "variable").rsplit("/", 1)[-1]


def format_bytes(n: int) -> str:
    """A byte count for people: ``704 B``, ``1.2 KiB``, ``3.0 MiB``.

    Example:
        >>> format_bytes(1216)
        '1.2 KiB'
    """
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
