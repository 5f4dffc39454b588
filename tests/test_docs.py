"""The documentation site stays whole and current (``make docs`` builds it strictly; these are the fast checks).

* every page in ``mkdocs.yml``'s nav exists (in ``docs/``, or one the hooks add from the repository);
* the command-line page is generated from the current argparse parsers, every subcommand included;
* the ops page is generated from the op catalog (``ngraph_core/catalog.py``) and explains every column;
* the architecture page names every floor of ``tests/test_layering.py`` and every pass of the pipelines;
* every ``docs/<page>.md`` a code comment points to exists;
* the code quotes no dated measurements (they live in ``benchmarks/RESULTS.md``, which the code points to);
* every run-derived figure README.md and docs/ quote is marked and equals ``docs/figures.json`` (``make figures``).
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


def test_ops_page_is_the_catalog() -> None:
    hooks = _hooks()
    from ngraph_core import catalog

    page = hooks.ops_page((DOCS / "ops.md").read_text())
    assert catalog.table() in page, "docs/ops.md lost the marker the op catalog's matrix replaces"
    for capability in catalog.NAMES:
        assert f"| {capability} |" in page, f"docs/ops.md: the column {capability!r} is not explained"


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


DATED = re.compile(r"(?<![\"'\w-])20\d\d-[01]\d-[0-3]\d(?![\"'\w])")
"""A date such as 2026-11-25 outside quotes (a date inside quotes is data: ``model_zoo/char_seq2seq.py``'s task)."""
DATED_ALLOWED: dict[str, str] = {}
"""Files allowed to keep dated figures for now, each with the reason (empty: every module is clean)."""
MEASURED_DIRS = ("ngraph_core", "neon", "model_zoo")


def test_code_quotes_no_dated_measurements() -> None:
    """A dated figure in a docstring drifts from the code it explains; the code states the decision and points to
    benchmarks/RESULTS.md, which keeps the dated figures (``"Behind the code: <module>"`` sections)."""
    found = []
    for folder in MEASURED_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if DATED.search(line) and name not in DATED_ALLOWED:
                    found.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not found, ("dated measurements in the code: move the figures to benchmarks/RESULTS.md and point there "
                       "(see its \"Behind the code\" sections):\n" + "\n".join(found))


def test_code_pointers_to_results_resolve() -> None:
    """Every ``"Behind the code: <module>"`` the code points to is a section of benchmarks/RESULTS.md."""
    headings = set(re.findall(r"^### Behind the code: (.+)$", (ROOT / "benchmarks" / "RESULTS.md").read_text(), re.M))
    missing = []
    for folder in MEASURED_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            for name in re.findall(r'"Behind\s+the\s+code:\s+([^"\s]+)"', path.read_text(encoding="utf-8")):
                if name not in headings:
                    missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, f"no such section in benchmarks/RESULTS.md: {missing}"


def _figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmark_figures", ROOT / "benchmarks" / "figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


QUOTED = {  # the figures each page must quote (marked), so a page cannot state one in plain text instead
    "README.md": {"mnist_mlp.accuracy", "mnist_mlp.seconds", "mnist_mlp.first_run_seconds"},
    "docs/getting-started.md": {"mnist_mlp.accuracy", "mnist_mlp.seconds", "mnist_mlp.first_run_seconds"},
    "docs/onnx.md": {"onnx_suite.passed", "onnx_suite.failed", "onnx_suite.errors", "onnx_suite.cases"},
    "docs/rl.md": {"dqn_cartpole.seed0_solved_at"},
}


def test_pages_quote_the_generated_figures() -> None:
    figures = _figures()
    values = figures.load()
    wrong = []
    for page in figures.pages():
        name = str(page.relative_to(ROOT))
        marked = {}
        for match in figures.MARKER.finditer(page.read_text()):
            marked[match.group(1)] = match.group(2)
            try:
                expected = figures.value(values, match.group(1))
            except KeyError as error:
                wrong.append(f"{name}: {error}")
                continue
            if match.group(2) != expected:
                wrong.append(f"{name}: {match.group(1)} says {match.group(2)!r}, docs/figures.json {expected!r}")
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if line.lstrip().startswith("<!--fig:"):  # Markdown would read the line as an HTML block
                wrong.append(f"{name}:{number}: a line starts with a figure marker (break the line elsewhere)")
        missing = QUOTED.get(name, set()) - set(marked)
        if missing:
            wrong.append(f"{name}: no marked figure {sorted(missing)}")
    assert not wrong, "run `make figures` (or fix the marker):\n" + "\n".join(wrong)


def test_readme_percentages_are_marked_figures() -> None:
    """Outside code blocks, every percentage README.md and getting-started state is a marked figure."""
    figures = _figures()
    for name in ("README.md", "docs/getting-started.md"):
        prose = re.sub(r"```.*?```", "", (ROOT / name).read_text(), flags=re.S)
        prose = figures.MARKER.sub("", prose)
        assert not re.findall(r"\d+(?:\.\d+)?%", prose.replace("below 95%", "")), \
            f"{name}: a percentage outside <!--fig:...--> markers (quote it from docs/figures.json)"


def test_figures_hook_fills_and_tabulates() -> None:
    hooks = _hooks()
    figures = _figures()
    table = hooks.figures_table(figures.load())
    assert "`mnist_mlp.accuracy`" in table and "`machine.cpu`" in table
    assert figures.fill("<!--fig:machine.cores-->x<!--/fig-->", {"machine": {"cores": "8"}}) == \
        "<!--fig:machine.cores-->8<!--/fig-->"
    with pytest.raises(KeyError, match="make figures"):
        figures.fill("<!--fig:nope.none-->1<!--/fig-->", {})
    assert hooks.FIGURES_MARKER in (DOCS / "performance.md").read_text()
