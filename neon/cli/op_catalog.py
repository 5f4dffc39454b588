"""``ngraph ops``: the op catalog's rows (``ngraph_core/catalog.py``): what each op has, and why it lacks the rest.

Example:
    >>> print("\\n".join(op_rows(["tanh"])))
    op    inference  kernel  gradient  decomposition  numba  cuda  onnx_import  onnx_export
    tanh  yes        yes     yes       yes            yes    yes   Tanh         yes
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import ngraph_core as ng
from ngraph_core import catalog

from .common import UsageError

__all__ = ["add_ops_arguments", "op_rows", "run_ops"]


def add_ops_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``ngraph ops``: the op names (none: every op)."""
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="op names as the graph prints them (tanh, conv_bprop_data); default: every op")


def op_rows(names: Sequence[str]) -> list[str]:
    """The catalog rows of ``names`` (every op when empty) as aligned text, a header first; for a few named ops,
    one line per ``-`` saying why.

    Raises:
        UsageError: a name that is not an op.
    """
    try:
        rows = {name: catalog.capabilities(name) for name in names or [op.value for op in ng.OpType]}
    except ng.NgraphError as exc:
        raise UsageError(str(exc)) from None
    table = [["op", *catalog.NAMES]] + [[name, *row.values()] for name, row in rows.items()]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(cells, widths)).rstrip() for cells in table]
    if names and len(names) <= 3:
        lines += [f"  {name} has no {capability}: {catalog.reason(name, capability)}"
                  for name, row in rows.items() for capability, cell in row.items() if cell == "-"]
    return lines


def run_ops(args: argparse.Namespace) -> int:
    """The ``ops`` subcommand: print ``op_rows(args.names)``; exit code 0 (2 for an unknown name)."""
    print("\n".join(op_rows(args.names)))
    return 0
