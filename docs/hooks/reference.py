"""MkDocs hooks: the pages generated at build time, so they cannot drift from the code.

* ``cli.md``: its ``<!-- cli-reference -->`` marker becomes the ``--help`` of every command and
  subcommand, read from the argparse parsers themselves (``neon.cli.neon_main.build_parser`` and
  ``neon.cli.ngraph_main.build_parser``).
* every page: a figure quoted between ``<!--fig:group.key-->`` and ``<!--/fig-->`` gets its value from
  ``docs/figures.json`` (``benchmarks/figures.py``, ``make figures``), so the site cannot show another;
  ``performance.md``'s ``<!-- figures-table -->`` marker becomes the table of them all.
* ``notebooks/*.ipynb`` (at the repository root) and the figures files (``benchmarks/RESULTS.md``,
  ``RELIABILITY.md``, ``benchmarks/README.md``) join the site as pages without being copied into
  ``docs/``; mkdocs-jupyter renders the notebooks without executing them (the test suite executes
  them: ``tests/test_walkthrough.py``, ``tests/test_selectors_example.py``).

* ``ops.md``: its ``<!-- ops-table -->`` marker becomes the op x capability matrix of the op catalog
  (``ngraph_core.catalog.table()``), so the page cannot drift from the code.

``mkdocs.yml`` names this file under ``hooks:``; ``tests/test_docs.py`` imports it.

Example:
    >>> cli_reference().startswith("## `neon`")
    True
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- cli-reference -->"
COMMANDS = ("neon.cli.neon_main", "neon.cli.ngraph_main")  # modules with build_parser()
WIDTH = "100"  # argparse wraps help at $COLUMNS: fixed, so the page is the same on every machine

NOTEBOOKS = (  # the same path on the site
    "notebooks/walkthrough.ipynb", "notebooks/selectors.ipynb", "notebooks/transformer_onnx.ipynb",
)
EXTRA_PAGES = {  # site path -> Markdown file in the repository, outside docs/
    "figures/RESULTS.md": "benchmarks/RESULTS.md",
    "figures/benchmarks.md": "benchmarks/README.md",
    "figures/RELIABILITY.md": "RELIABILITY.md",
}

FIGURES_MARKER = "<!-- figures-table -->"
OPS_MARKER = "<!-- ops-table -->"

Command = tuple[tuple[str, ...], argparse.ArgumentParser]


def figures_module() -> ModuleType:
    """``benchmarks/figures.py`` (loaded by path: benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("benchmark_figures", ROOT / "benchmarks" / "figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def figures_table(figures: dict[str, dict[str, str]]) -> str:
    """Every figure of ``docs/figures.json`` as a Markdown table: its name (as a marker names it) and value."""
    rows = [f"| `{group}.{key}` | {value} |"
            for group in sorted(figures) for key, value in sorted(figures[group].items())]
    return "\n".join(["| figure | value |", "|---|---|", *rows])


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[Command]:
    """``(command words, parser)`` for ``parser`` and every subcommand under it, depth first, in declared order."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subcommands(sub, (*path, name))


def all_commands() -> list[Command]:
    """Every command and subcommand of ``neon`` and ``ngraph``, from their ``build_parser()``."""
    found: list[Command] = []
    for module_name in COMMANDS:
        parser = importlib.import_module(module_name).build_parser()
        found += subcommands(parser, (parser.prog,))
    return found


def cli_reference() -> str:
    """The Markdown reference of both commands: one section per (sub)command holding its ``--help``."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parts = []
        for path, parser in all_commands():
            level = "#" * min(len(path) + 1, 4)
            parts.append(f"{level} `{' '.join(path)}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
        return "\n".join(parts)
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def ops_page(markdown: str) -> str:
    """``docs/ops.md`` with its marker replaced by the op catalog's matrix (``ngraph_core.catalog.table()``)."""
    if OPS_MARKER not in markdown:
        raise ValueError(f"docs/ops.md: expected the marker {OPS_MARKER!r} where the op matrix goes")
    return markdown.replace(OPS_MARKER, importlib.import_module("ngraph_core.catalog").table())


@event_priority(100)  # before mkdocs-jupyter's on_files, so the notebooks become pages
def on_files(files: Files, config: MkDocsConfig) -> Files:
    # a real File rooted at the repository (not File.generated: mkdocs-jupyter's wrapper reads src_dir)
    for uri in NOTEBOOKS:
        files.append(File(uri, src_dir=str(ROOT), dest_dir=config.site_dir,
                          use_directory_urls=config.use_directory_urls))
    for uri, source in EXTRA_PAGES.items():
        files.append(File.generated(config, uri, abs_src_path=str(ROOT / source)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    figures = figures_module()
    markdown = figures.fill(markdown, figures.load())
    if page.file.src_uri == "performance.md":
        if FIGURES_MARKER not in markdown:
            raise ValueError(f"docs/performance.md: expected the marker {FIGURES_MARKER!r} where the figures go")
        markdown = markdown.replace(FIGURES_MARKER, figures_table(figures.load()))
    if page.file.src_uri == "ops.md":
        return ops_page(markdown)
    if page.file.src_uri != "cli.md":
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/cli.md: expected the marker {MARKER!r} where the generated reference goes")
    return markdown.replace(MARKER, cli_reference())
