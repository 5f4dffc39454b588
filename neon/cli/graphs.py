"""``select`` and ``viz``: query a saved model or graph with a selector, and draw it.

``select`` prints the names of what a CSS-like query (docs/selectors.md) selects, one per line on
stdout (so the output pipes into other tools), and their count on stderr. An op's name is
qualified by its scope path (``Sequential_0/hidden/Linear_0/W``: two layers' ``W`` differ). ``viz`` draws the
graph with ``ng.viz.render`` (grouped by layer scope), highlighting a selection; the format
comes from ``--format`` or the output's extension.

Example:
    $ ngraph select out/model.h5 "Affine variable"
    $ ngraph viz out/model.h5 -o model.svg --select "Affine > Activation"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import ngraph_core as ng

from .common import UsageError
from .sources import graph_source, load_source, select_in

__all__ = ["FORMATS", "output_format", "qualified_names", "run_select", "run_viz"]

FORMATS = tuple(ng.viz.FORMATS)  # what ng.viz.render writes: svg, png, pdf, and dot (needs no Graphviz)


def run_select(args: argparse.Namespace) -> int:
    """The ``select`` subcommand: print the names ``args.query`` selects in ``args.path``; exit code 0.

    Raises:
        SelectorError: a malformed query (exit code 2; the message points at the column), or with
            ``--strict`` a layer type the graph does not have (without it: a warning on stderr).
    """
    names = qualified_names(select_in(load_source(args.path), args.query, strict=args.strict))
    for name in names:
        print(name)
    print(f"{len(names)} selected by {args.query!r}", file=sys.stderr)  # stderr: stdout stays one name per line
    return 0


def qualified_names(selection: Any) -> list[str]:
    """One name per selected item, unambiguous: an op's scope path then its name (the key checkpoints use for
    a variable, ``Sequential_0/conv1/Linear_0/W``), a layer scope's path (``Sequential_0/conv1``).

    Example:
        >>> qualified_names(ng.select(model_ops, "#hidden variable"))
        ['Sequential_0/hidden/Linear_0/W', 'Sequential_0/hidden/Bias_0/b']
    """
    return selection.paths


def output_format(path: str | Path, requested: str | None) -> str:
    """The picture format: ``requested``, else the output file's extension.

    Raises:
        UsageError: no format given and the extension is not one of ``FORMATS``.

    Example:
        >>> output_format("model.png", None)
        'png'
    """
    if requested is not None:
        return requested
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise UsageError(f"viz: expected an output file ending in {', '.join('.' + f for f in FORMATS)}, received "
                         f"{str(path)!r}; hint: name the file model.svg, or pass --format svg")
    return suffix


def run_viz(args: argparse.Namespace) -> int:
    """The ``viz`` subcommand: draw ``args.path`` to ``args.out`` with ``ng.viz.render``; exit code 0.

    Raises:
        UsageError: an output format that cannot be told from ``-o``.
        SelectorError: a malformed ``--select`` query.
        VizError: no ``dot`` program for svg/png/pdf (exit code 1, with the hint to install Graphviz).
    """
    fmt = output_format(args.out, args.format)
    source = load_source(args.path)
    highlight = select_in(source, args.select, strict=args.strict) if args.select else None
    written = ng.viz.render(graph_source(source), args.out, format=fmt, highlight=highlight, collapse=args.collapse)
    marked = f", {len(highlight)} highlighted by {args.select!r}" if highlight is not None else ""
    print(f"wrote {written} ({fmt}{marked})")
    return 0
