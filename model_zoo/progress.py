"""The ``--progress/--no-progress`` switch every recipe takes, and what "not given" means.

Not given, a recipe shows a tqdm bar when standard error is a terminal (a person is watching),
and otherwise only its one line per epoch (a log or CI). ``--progress`` forces the bar,
``--no-progress`` turns it off; ``neon train --progress/--no-progress`` passes the choice on.

Example:
    >>> parser = argparse.ArgumentParser()
    >>> add_progress_flag(parser)
    >>> show_progress(parser.parse_args(["--no-progress"]).progress)
    False
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

__all__ = ["add_progress_flag", "show_progress"]


def add_progress_flag(parser: argparse.ArgumentParser, what: str = "batches") -> None:
    """Add ``--progress/--no-progress`` (dest ``progress``: True, False, or None when not given).

    Args:
        parser: a recipe's parser.
        what: what the bar counts, for the help text (``batches``, ``environment steps``).
    """
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help=f"a tqdm bar over {what} (default: when stderr is a terminal; otherwise one line per "
                             "epoch)")


def show_progress(flag: bool | None, stream: TextIO | None = None) -> bool:
    """Whether to draw a progress bar: ``flag`` when given, else whether ``stream`` (stderr) is a terminal.

    Example:
        >>> show_progress(None)   # True in a terminal, False under CI or with stderr redirected
    """
    if flag is not None:
        return bool(flag)
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or file-like stream without isatty
        return False
