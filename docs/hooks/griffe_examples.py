"""A Griffe extension: the project's ``Example:`` docstring sections render as examples.

The docstrings (STYLE.md habit 7) end with ``Example:`` and ``>>>`` lines. Google style's section
is ``Examples:``; Griffe reads the singular as an admonition, whose ``>>>`` lines would render as
prose (and ``x[-1]`` as a Markdown link). Renaming the section when a docstring is loaded makes
them code, without touching the sources. ``mkdocs.yml`` loads it under mkdocstrings' ``extensions``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

EXAMPLE_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    """Rename every docstring's ``Example:`` section heading to ``Examples:``."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = EXAMPLE_HEADING.sub(r"\1Examples:", obj.docstring.value)
