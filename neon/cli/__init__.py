"""The command line: ``neon`` (``neon_main``: recipes, saved models) and ``ngraph`` (``ngraph_main``: saved
graphs and models). Both are installed as console scripts; ``python -m neon`` runs ``neon``.

Example:
    >>> from neon.cli import neon_main
    >>> neon_main(["zoo", "list"])
    0
"""

from .neon_main import main as neon_main
from .ngraph_main import main as ngraph_main

__all__ = ["neon_main", "ngraph_main"]
