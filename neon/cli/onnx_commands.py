"""``convert`` and ``run``: an ONNX model as a saved ngraph graph, and an ONNX model run on arrays.

``convert`` imports the model (``ngraph_core.frontends.onnx.import_model``) and writes our graph
document (``ng.serialize``, JSON) atomically. Its roots are the model's outputs in the graph's
order, then its inputs' placeholders (so a loader finds them: docs/architecture.md, "The graph
document"); the file opens in ``ngraph info``, ``select``, ``viz`` and ``bench`` like any saved
graph. Dynamic dims take their lengths from ``--dim NAME=LENGTH`` (default 1); float initializers
become trainable variables, or constants with ``--initializers constants``; an input the graph needs
at import time (a shape fed to Reshape) is baked in from ``--static NAME=NPY``.

``run`` feeds ``.npy`` arrays to the model's inputs by name (dynamic dims take the arrays'
lengths; inputs a converter needs at import time — a shape fed to Reshape — are baked in
from the arrays, as the ONNX backend does), prints each output's name, shape, dtype and first
values, and with ``--output`` writes every output to an ``.npz`` keyed by output name.

The ONNX frontend is imported on first use: without the ``onnx`` package these commands exit 1
with a hint to install it, and the other commands are unaffected.

Example:
    $ ngraph convert resnet18.onnx -o resnet18.ngraph --dim N=8
    $ ngraph convert bert.onnx -o bert.ngraph --static position_ids=positions.npy
    $ ngraph select resnet18.ngraph "Conv variable"
    $ ngraph run resnet18.onnx --input x=batch.npy --output out.npz
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng

from ..atomic_files import atomic_path
from .common import CommandError, UsageError

__all__ = ["add_convert_arguments", "add_run_arguments", "dim_assignment", "dynamic_dims", "input_assignment",
           "run_convert", "run_onnx"]

PREVIEW_VALUES = 6  # the first values of each output ``run`` prints
_ASSIGNMENT = re.compile(r"^([^=]+)=(.+)$")


def dim_assignment(text: str) -> tuple[str, int]:
    """argparse ``type=`` for ``--dim``: ``NAME=LENGTH`` with a length of at least 1.

    Raises:
        argparse.ArgumentTypeError: anything else (a usage error, exit code 2).

    Example:
        >>> dim_assignment("N=8")
        ('N', 8)
    """
    match = _ASSIGNMENT.match(text)
    length = match.group(2).strip() if match else ""
    if not match or not length.isdigit() or int(length) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=LENGTH with a length >= 1 (e.g. N=8), received {text!r}")
    return match.group(1).strip(), int(length)


def input_assignment(text: str) -> tuple[str, str]:
    """argparse ``type=`` for ``--input``: ``NAME=PATH`` (an ONNX input name and a ``.npy`` file).

    Raises:
        argparse.ArgumentTypeError: no ``=`` or an empty side (a usage error, exit code 2).

    Example:
        >>> input_assignment("x=batch.npy")
        ('x', 'batch.npy')
    """
    match = _ASSIGNMENT.match(text)
    if not match or not match.group(1).strip():
        raise argparse.ArgumentTypeError(f"expected NAME=PATH (an input name and a .npy file, e.g. x=batch.npy), "
                                         f"received {text!r}")
    return match.group(1).strip(), match.group(2)


def add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``convert``: the model, ``-o``, ``--dim`` (repeatable), ``--initializers``."""
    parser.add_argument("path", help="an ONNX model (.onnx)")
    parser.add_argument("-o", "--out", required=True, help="the graph document to write (JSON, e.g. model.ngraph)")
    parser.add_argument("--dim", type=dim_assignment, action="append", default=[], metavar="NAME=LENGTH",
                        help="the length of a dynamic dim (its dim_param name, e.g. N=8); repeatable; default 1")
    parser.add_argument("--initializers", choices=("variables", "constants"), default="variables",
                        help="float initializers as trainable variables (default) or constants")
    parser.add_argument("--static", type=input_assignment, action="append", default=[], metavar="NAME=NPY",
                        help="bake an input in as a constant from a .npy file (an input the graph needs at import "
                             "time, e.g. a shape fed to Reshape); repeatable")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``run``: the model, ``--input`` (repeatable), ``--output``."""
    parser.add_argument("path", help="an ONNX model (.onnx)")
    parser.add_argument("--input", "-i", type=input_assignment, action="append", default=[], metavar="NAME=NPY",
                        help="an input's value from a .npy file; one per model input")
    parser.add_argument("--output", "-o", default=None, metavar="NPZ",
                        help="write every output to this .npz, keyed by output name")


def _frontend() -> Any:
    try:
        from ngraph_core.frontends import onnx as frontend
    except ImportError as exc:
        raise CommandError(f"the ONNX frontend needs the onnx package ({exc}); hint: pip install "
                           "'ngraph-neon[onnx]'") from None
    return frontend


def run_convert(args: argparse.Namespace) -> int:
    """The ``convert`` subcommand: import ``args.path`` and write it to ``args.out`` (``ng.serialize``); exit 0.

    Raises:
        UsageError: the same ``--dim`` given twice with different lengths, a ``--dim`` the model
            lacks, a ``--static`` name that is not a graph input (exit code 2).
        CommandError: an input needed at import time without ``--static`` (the hint names it).
        OnnxLoadError: not a readable, valid ONNX model (exit code 1).
        UnsupportedOnnxOpError: an operator we do not convert (names the op, opset and node).
        OnnxError: a malformed node, or a feature the importer does not express.
    """
    dims: dict[str, int] = {}
    for name, length in args.dim:
        if dims.setdefault(name, length) != length:
            raise UsageError(f"convert: --dim {name} given twice ({dims[name]} and {length}); hint: give it once")
    frontend = _frontend()
    from ngraph_core.frontends.onnx.context import NeedStatic

    model = frontend.load_model(_readable(args.path))
    declared = dynamic_dims(model)
    unused = sorted(set(dims) - set(declared))
    if unused:
        raise UsageError(f"convert: --dim {', '.join(unused)}: the model has no such dynamic dim; expected one of "
                         f"{declared or 'none (every dim is fixed)'}; hint: a dynamic dim is named by its "
                         "dim_param in the model's input shapes")
    static = _static_arrays(model, args.static)
    try:
        imported = frontend.build_model(model, dims=dims, static_inputs=static, initializers=args.initializers)
    except NeedStatic as exc:
        raise CommandError(f"convert: {str(exc).split('; hint:')[0]}; hint: bake the value in with --static "
                           f"{exc.inputs[0]}=value.npy") from None
    text = ng.serialize([*imported.outputs, *imported.inputs])
    with atomic_path(args.out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    fixed = ", ".join(f"{k}={v}" for k, v in sorted(imported.dims.items()))
    print(f"wrote {args.out}: outputs {imported.output_names}, inputs {imported.input_names}, "
          f"{len(imported.variables)} variables, opset {imported.opset}" + (f", dims {fixed}" if fixed else ""))
    return 0


def dynamic_dims(model: Any) -> list[str]:
    """The ``dim_param`` names of ``model``'s graph inputs (the dims ``--dim`` may set), in order of appearance.

    Example:
        >>> dynamic_dims(onnx.load("resnet18.onnx"))
        ['N']
    """
    names: list[str] = []
    for value_info in model.graph.input:
        if value_info.type.HasField("tensor_type") and value_info.type.tensor_type.HasField("shape"):
            for dim in value_info.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param and dim.dim_param not in names:
                    names.append(dim.dim_param)
    return names


def _readable(path: str) -> str:
    """``path``, once it opens: a missing file or a directory raises the ``OSError`` the commands report with a hint."""
    with open(path, "rb"):
        pass
    return path


def _static_arrays(model: Any, assignments: list[tuple[str, str]]) -> dict[str, np.ndarray]:
    """``--static`` values by input name, read and cast to the inputs' declared types.

    Raises:
        UsageError: a name that is not a graph input, given twice, or an unsafe cast.
    """
    names = [v.name for v in model.graph.input]
    given = [name for name, _ in assignments]
    unknown = sorted(set(given) - set(names))
    repeated = sorted({n for n in given if given.count(n) > 1})
    if unknown or repeated:
        raise UsageError(f"convert: --static expects each of {names} at most once; unknown {unknown}, repeated "
                         f"{repeated}; hint: name a graph input, e.g. --static {names[-1] if names else 'shape'}="
                         "value.npy")
    declared = _declared_dtypes(model)
    return {name: _cast(name, _read_array(name, path, "convert: --static"), declared, path)
            for name, path in assignments}


def _cast(name: str, array: np.ndarray, declared: dict[str, np.dtype], path: str) -> np.ndarray:
    want = declared.get(name, array.dtype)
    if array.dtype == want:
        return array
    if not np.can_cast(array.dtype, want, casting="same_kind"):
        raise UsageError(f"input {name!r}: expected {want}, received {array.dtype} from {path}; hint: save it with "
                         f".astype('{want}')")
    print(f"note: input {name!r}: {array.dtype} from {path} cast to {want}", file=sys.stderr)
    return array.astype(want)


def _read_array(name: str, path: str, flag: str = "run: --input") -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        if isinstance(exc, OSError) and exc.filename is not None:
            raise
        raise CommandError(f"{flag} {name}={path}: not a .npy array ({type(exc).__name__}: {exc}); hint: save it "
                           "with numpy.save") from None
    if not isinstance(array, np.ndarray):  # an .npz archive
        raise CommandError(f"{flag} {name}={path}: expected one .npy array, received an .npz archive; hint: save "
                           "each input with numpy.save")
    return array


def _declared_dtypes(model: Any) -> dict[str, np.dtype]:
    from onnx import helper

    result = {}
    for value_info in model.graph.input:
        elem = value_info.type.tensor_type.elem_type if value_info.type.HasField("tensor_type") else 0
        if elem:
            try:
                result[value_info.name] = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
            except (KeyError, TypeError, ValueError):
                pass  # a type the importer itself reports
    return result


def _check_shapes(model: Any, arrays: dict[str, np.ndarray]) -> None:
    """Each array against its input's declared dims (a ``dim_param`` takes any length).

    Raises:
        CommandError: a rank or a fixed dim that differs, saying the expected shape, the layout
            (``ngraph.layout`` of a model we exported) and how to fix the array.
    """
    from ngraph_core.frontends.onnx.export_layout import describe_layout, model_layout

    layout = model_layout(model)
    for value_info in model.graph.input:
        array = arrays.get(value_info.name)
        if array is None or not value_info.type.tensor_type.HasField("shape"):
            continue
        want: list[int | str] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                                 for d in value_info.type.tensor_type.shape.dim]
        if _fits(want, array.shape):
            continue
        shown = "[" + ", ".join(str(d) for d in want) + "]"
        raise CommandError(f"run: expected input {value_info.name!r} of shape {shown} ({describe_layout(layout)}), "
                           f"received {tuple(array.shape)}; hint: {_shape_hint(want, array.shape, layout)}")


def _fits(want: list[int | str], shape: tuple[int, ...]) -> bool:
    return len(want) == len(shape) and all(isinstance(w, str) or w == n for w, n in zip(want, shape))


def _shape_hint(want: list[int | str], shape: tuple[int, ...], layout: str | None) -> str:
    """How to make an array of ``shape`` fit ``want``: move the batch axis, or reshape each sample."""
    if len(shape) > 1 and _fits(want, (*shape[-1:], *shape[:-1])) and layout != "native":
        return "the array looks batch last (neon's layout); np.moveaxis(x, -1, 0) makes it batch first" + \
            (", or export the model with layout='native'" if layout == "onnx" else "")
    if len(shape) > 1 and _fits(want, (*shape[1:], shape[0])) and layout == "native":
        return ("the model was exported with layout='native' (batch last); np.moveaxis(x, 0, -1) makes the array "
                "batch last, or export the model with layout='onnx' (the default)")
    fixed = [w for w in want[1:] if isinstance(w, int)]
    if shape and isinstance(want[0], str) and len(fixed) == len(want) - 1 and \
            int(np.prod(shape[1:], dtype=np.int64)) == int(np.prod(fixed, dtype=np.int64)):
        return f"each sample has the right number of values: save x.reshape{(shape[0], *fixed)}"
    named = [w for w in want if isinstance(w, str)]
    return f"save an array of that shape ({', '.join(named)}: any length)" if named else \
        "save an array of that shape"


def run_onnx(args: argparse.Namespace) -> int:
    """The ``run`` subcommand: run ``args.path`` on the ``--input`` arrays and print (and save) the outputs; exit 0.

    Raises:
        UsageError: a missing, unknown or repeated input name, or an array whose dtype cannot be
            cast safely to the input's (exit code 2).
        CommandError: an ``--input`` file that is not a ``.npy`` array, or an array whose shape
            the input does not declare (the expected shape and layout, and a hint).
        OnnxError: not a valid model, an operator we lack, or shapes the model rejects (exit code 1).
    """
    if args.output is not None and Path(args.output).suffix != ".npz":
        raise UsageError(f"run: expected --output to end in .npz, received {args.output!r}; hint: out.npz")
    frontend = _frontend()
    model = frontend.load_model(_readable(args.path))
    rep = frontend.NgraphBackendRep(model, initializers="constants")
    given = [name for name, _ in args.input]
    repeated = sorted({n for n in given if given.count(n) > 1})
    unknown = sorted(set(given) - set(rep.input_names))
    missing = [n for n in rep.input_names if n not in given]
    if repeated or unknown or missing:
        raise UsageError(f"run: expected --input NAME=NPY for each of {rep.input_names}; missing {missing}, unknown "
                         f"{unknown}, repeated {repeated}; hint: one --input per model input, e.g. "
                         f"--input {rep.input_names[0] if rep.input_names else 'x'}=batch.npy")
    declared = _declared_dtypes(model)
    arrays = {name: _cast(name, _read_array(name, path), declared, path) for name, path in args.input}
    _check_shapes(model, arrays)
    outputs = rep.run(arrays)
    names = [v.name for v in model.graph.output]
    for name, value in zip(names, outputs):
        flat = value.reshape(-1)[:PREVIEW_VALUES]
        more = " ..." if value.size > PREVIEW_VALUES else ""
        print(f"{name}: shape {value.shape} {value.dtype}: {np.array2string(flat, precision=5, separator=' ')}{more}")
    if args.output is not None:
        with atomic_path(args.output) as tmp, open(tmp, "wb") as f:
            np.savez(f, **dict(zip(names, outputs)))
        print(f"wrote {args.output} ({len(outputs)} outputs)")
    return 0
