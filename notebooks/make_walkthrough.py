"""Generate the notebooks from their scripts: ``notebooks/walkthrough.ipynb`` from
``examples/walkthrough.py``, ``notebooks/selectors.ipynb`` from ``examples/selectors_tour.py`` and
``notebooks/transformer_onnx.ipynb`` from ``examples/transformer_onnx.py``.

Each script is the single source: its ``# %%`` markers (the "percent" cell format that
Jupytext, VS Code and Spyder read) split it into code cells, and ``# %% [markdown]``
cells become markdown with their leading ``# `` removed. Generating the notebook rather
than keeping two hand-edited copies means a notebook cannot drift from the script CI
runs; ``tests/test_walkthrough.py`` checks the committed notebooks are up to date.

Usage:
    python notebooks/make_walkthrough.py            # rewrite the notebooks
    python notebooks/make_walkthrough.py --check    # exit 1 if one is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
# script -> notebook
PAIRS = {
    ROOT / "examples" / "walkthrough.py": ROOT / "notebooks" / "walkthrough.ipynb",
    ROOT / "examples" / "selectors_tour.py": ROOT / "notebooks" / "selectors.ipynb",
    ROOT / "examples" / "transformer_onnx.py": ROOT / "notebooks" / "transformer_onnx.ipynb",
}


def split_cells(source: str, script: str = "script") -> list[tuple[str, str]]:
    """``(kind, text)`` for each ``# %%`` cell of ``source``; kind is ``"code"`` or ``"markdown"``."""
    cells: list[tuple[str, list[str]]] = []
    for line in source.splitlines():
        if line.startswith("# %%"):
            cells.append(("markdown" if "[markdown]" in line else "code", []))
        elif cells:
            cells[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"{script}: text before the first '# %%' marker: {line!r}")
    out = []
    for kind, lines in cells:
        if kind == "markdown":
            lines = [_uncomment(line, script) for line in lines]
        text = "\n".join(lines).strip("\n")
        if text:
            out.append((kind, text))
    return out


def _uncomment(line: str, script: str) -> str:
    if line in ("", "#"):
        return ""
    if not line.startswith("# "):
        raise ValueError(f"{script}: a markdown cell line must start with '# ', received {line!r}")
    return line[2:]


def build_notebook(source: str, script: str = "script") -> nbformat.NotebookNode:
    """The notebook for ``source``: its cells, a python3 kernel, no outputs."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    make = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell}
    nb.cells = [make[kind](text) for kind, text in split_cells(source, script)]
    # stable ids so that regenerating an unchanged script leaves the file byte-identical
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    nbformat.validate(nb)
    return nb


def render(source: str, script: str = "script") -> str:
    return nbformat.writes(build_notebook(source, script)) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a notebook is not up to date")
    args = parser.parse_args()
    stale = 0
    for script, notebook in PAIRS.items():
        text = render(script.read_text(), script.name)
        if args.check:
            if not notebook.exists() or notebook.read_text() != text:
                print(f"{notebook.relative_to(ROOT)} is stale; run: python notebooks/make_walkthrough.py")
                stale += 1
            continue
        notebook.write_text(text)
        cells = len(build_notebook(script.read_text(), script.name).cells)
        print(f"wrote {notebook.relative_to(ROOT)} ({cells} cells)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
