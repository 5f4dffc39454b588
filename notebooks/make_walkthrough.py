"""Generate ``notebooks/walkthrough.ipynb`` from ``examples/walkthrough.py``.

The script is the single source: its ``# %%`` markers (the "percent" cell format that
Jupytext, VS Code and Spyder read) split it into code cells, and ``# %% [markdown]``
cells become markdown with their leading ``# `` removed. Generating the notebook rather
than keeping two hand-edited copies means the notebook cannot drift from the script CI
runs; ``tests/test_walkthrough.py`` checks the committed notebook is up to date.

Usage:
    python notebooks/make_walkthrough.py            # rewrite the notebook
    python notebooks/make_walkthrough.py --check    # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "walkthrough.py"
NOTEBOOK = ROOT / "notebooks" / "walkthrough.ipynb"


def split_cells(source: str) -> list[tuple[str, str]]:
    """``(kind, text)`` for each ``# %%`` cell of ``source``; kind is ``"code"`` or ``"markdown"``."""
    cells: list[tuple[str, list[str]]] = []
    for line in source.splitlines():
        if line.startswith("# %%"):
            cells.append(("markdown" if "[markdown]" in line else "code", []))
        elif cells:
            cells[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"{SCRIPT.name}: text before the first '# %%' marker: {line!r}")
    out = []
    for kind, lines in cells:
        if kind == "markdown":
            lines = [_uncomment(line) for line in lines]
        text = "\n".join(lines).strip("\n")
        if text:
            out.append((kind, text))
    return out


def _uncomment(line: str) -> str:
    if line in ("", "#"):
        return ""
    if not line.startswith("# "):
        raise ValueError(f"{SCRIPT.name}: a markdown cell line must start with '# ', received {line!r}")
    return line[2:]


def build_notebook(source: str) -> nbformat.NotebookNode:
    """The notebook for ``source``: its cells, a python3 kernel, no outputs."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    make = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell}
    nb.cells = [make[kind](text) for kind, text in split_cells(source)]
    # stable ids so that regenerating an unchanged script leaves the file byte-identical
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    nbformat.validate(nb)
    return nb


def render(source: str) -> str:
    return nbformat.writes(build_notebook(source)) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the notebook is not up to date")
    args = parser.parse_args()
    text = render(SCRIPT.read_text())
    if args.check:
        if not NOTEBOOK.exists() or NOTEBOOK.read_text() != text:
            print(f"{NOTEBOOK.relative_to(ROOT)} is stale; run: python notebooks/make_walkthrough.py")
            return 1
        return 0
    NOTEBOOK.write_text(text)
    print(f"wrote {NOTEBOOK.relative_to(ROOT)} ({len(build_notebook(SCRIPT.read_text()).cells)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
