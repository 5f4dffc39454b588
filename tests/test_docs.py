"""The documentation site stays whole and current (``make docs`` builds it strictly; these are the fast checks).

* every page in ``mkdocs.yml``'s nav exists (in ``docs/``, or one the hooks add from the repository);
* the command-line page is generated from the current argparse parsers, every subcommand included;
* the architecture page names every floor of ``tests/test_layering.py`` and every pass of the pipelines;
* every ``docs/<page>.md`` a code comment points to exists.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from test_layering import FLOORS

from ngraph_core.passes.pipeline import PIPELINES

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CODE_DIRS = ("ngraph_core", "neon", "model_zoo", "benchmarks", "examples", "tests", "notebooks")


def _hooks() -> ModuleType:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (make docs installs it)")
    spec = importlib.util.spec_from_file_location("docs_reference_hooks", DOCS / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav_pages(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from _nav_pages(item)
    elif isinstance(node, dict):
        for value in node.values():
            yield from _nav_pages(value)


def test_every_nav_page_exists() -> None:
    yaml = pytest.importorskip("yaml")
    hooks = _hooks()
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    generated = {**{uri: uri for uri in hooks.NOTEBOOKS}, **hooks.EXTRA_PAGES}
    pages = list(_nav_pages(config["nav"]))
    assert len(pages) > 20, pages
    for page in pages:
        source = ROOT / generated[page] if page in generated else DOCS / page
        assert source.is_file(), f"mkdocs.yml's nav names {page!r}, but {source} does not exist"


def test_cli_page_holds_every_subcommand_help() -> None:
    hooks = _hooks()
    assert hooks.MARKER in (DOCS / "cli.md").read_text(), "docs/cli.md lost the marker the reference replaces"
    reference = hooks.cli_reference()
    commands = hooks.all_commands()
    names = {" ".join(path) for path, _ in commands}
    assert {"neon", "neon zoo", "neon zoo list", "neon train", "ngraph", "ngraph select", "ngraph run"} <= names
    for path, _ in commands:
        assert f"`{' '.join(path)}`" in reference, f"{' '.join(path)}: no section in the generated CLI page"
    for option in ("--backend", "--distributed", "--select", "--dim"):  # options of today's parsers
        assert option in reference


def test_architecture_page_is_current() -> None:
    text = (DOCS / "architecture.md").read_text()
    for floor in (name for name in FLOORS if name):
        assert f"`{floor}`" in text, f"docs/architecture.md: the floor {floor!r} of tests/test_layering.py is missing"
    passes = {name for modes in PIPELINES.values() for recipe in modes.values() for name in recipe}
    for name in passes:
        assert f"`{name}`" in text, f"docs/architecture.md: the pass {name!r} of passes/pipeline.py is missing"


def test_code_points_at_pages_that_exist() -> None:
    pointer = re.compile(r"docs/([\w\-/]+\.md)")
    missing = []
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            for match in pointer.finditer(path.read_text(encoding="utf-8")):
                if not (DOCS / match.group(1)).is_file():
                    missing.append(f"{path.relative_to(ROOT)}: docs/{match.group(1)}")
    assert not missing, missing
