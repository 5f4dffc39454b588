"""What a user-given name may hold, and how names are shown safely.

Names (of ops, axes, scopes, labels, layers) travel into printed graphs, generated
plans, error messages, file keys and documents other people open. A name is any
non-empty string of *printable* characters: letters of every script, digits,
punctuation, quotes, backslashes and spaces are fine; control characters (newline,
carriage return, NUL, escape...) and invisible format characters (bidi overrides,
zero-width joiners) are not, because they change how a line reads — or, in generated
source, where it ends.

``check_name`` enforces that where names are made and where documents are decoded;
``printable`` is the second wall: text shown beside generated code is escaped so no
name can end a comment, even one that bypassed the check.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidNameError

MAX_NAME_LENGTH = 256


def check_name(value: Any, what: str, error: type[Exception] = InvalidNameError) -> str:
    """``value`` if it is a valid name, else ``error`` naming ``what`` and the first bad character.

    Args:
        value: the candidate name.
        what: where it was given, for the message (``"placeholder name"``, ``"axis name"``).
        error: the exception class to raise (a subclass of ``NgraphError``).

    Returns:
        ``value`` unchanged.

    Raises:
        InvalidNameError (or ``error``): not a str, empty, longer than 256 characters, or
            holding a control or invisible format character.

    Example:
        >>> check_name("conv1/W", "op name")
        'conv1/W'
    """
    if not isinstance(value, str) or not value:
        raise error(f"{what}: expected a non-empty str, received: {value!r}")
    if len(value) > MAX_NAME_LENGTH:
        raise error(f"{what}: expected at most {MAX_NAME_LENGTH} characters, received {len(value)}: {value[:40]!r}...")
    if not value.isprintable():
        bad = next(ch for ch in value if not ch.isprintable())
        raise error(
            f"{what}: expected printable characters only, received {value!r} holding {bad!r} at position "
            f"{value.index(bad)}; hint: control and invisible format characters (newlines, NUL, bidi marks) "
            "are not allowed in names"
        )
    return value


def printable(text: str) -> str:
    """``text`` with every non-printable character written as its escape (``\\n``, ``\\x00``, ``\\u202e``).

    The result is one line whatever ``text`` holds.

    Example:
        >>> printable("a\\nb")
        'a\\\\nb'
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
