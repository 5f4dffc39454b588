"""The one JSON decoder for every file and message the project reads: bounded, never recursing too deep.

``json.loads`` recurses once per nested array or object, so text like ``[[[[...`` raises
``RecursionError`` — at a depth that depends on how deep the *caller* already is (980 levels
parse at the top of a fresh process and fail 30 frames down). It also raises ``ValueError`` for
an int of over 4,300 digits and ``UnicodeDecodeError`` for bytes that are not UTF-8. ``loads``
checks the text's length and its nesting depth first — by a scan of the brackets outside
strings, linear and without recursion — then parses, and turns every parser failure into the
caller's typed error (``error``), whose message names the document (``what``), says what was
expected and received, and ends with a ``hint:``.

The depth scan counts exactly over the part of the text the parser would accept; past the first
point the parser rejects (an unterminated or malformed string) the count may be off, but the
parser stops there anyway, before recursing into the rest.

Example:
    >>> from ngraph_core.errors import SerializationError
    >>> loads('{"a": [1, 2]}', what="settings", error=SerializationError)
    {'a': [1, 2]}
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["MAX_CHARS", "MAX_DEPTH", "loads", "nesting_depth"]

MAX_CHARS = 256 << 20
MAX_DEPTH = 64
HINT = "hint: the file is damaged, truncated or not of this kind; write it again with the program that made it"
_STRING = re.compile(r'"[^"\\]*(?:\\[\s\S][^"\\]*)*"')  # a JSON string literal (escapes included)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_CHUNK = 1 << 20


def nesting_depth(text: str, limit: int) -> int:
    """How deep ``text``'s arrays and objects nest (brackets inside strings do not count), or more than ``limit``.

    A scan of the brackets alone, vectorized and chunked, that stops once ``limit`` is passed:
    linear time, memory bounded by the text, no recursion.

    Args:
        text: JSON text (well-formed or not).
        limit: stop counting past this depth.

    Returns:
        the largest depth; past ``limit``, the largest found in the text scanned so far.

    Example:
        >>> nesting_depth('{"a": [[1], "]]]"]}', 64)
        3
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).encode("ascii")
    base, deepest = 0, 0
    for start in range(0, len(brackets), _DEPTH_CHUNK):
        codes = np.frombuffer(brackets, dtype=np.uint8, count=min(_DEPTH_CHUNK, len(brackets) - start), offset=start)
        depth = base + np.cumsum(np.where((codes == ord("[")) | (codes == ord("{")), 1, -1), dtype=np.int64)
        deepest = max(deepest, int(depth.max()))
        if deepest > limit:
            return deepest
        base = int(depth[-1])
    return deepest


def loads(text: str | bytes | bytearray, *, what: str, error: type[Exception], max_depth: int = MAX_DEPTH,
          max_chars: int = MAX_CHARS, hint: str = HINT, object_pairs_hook: Callable[[list], Any] | None = None,
          parse_constant: Callable[[str], Any] | None = None) -> Any:
    """The JSON value of ``text``, its type, length and nesting depth checked before parsing.

    Args:
        text: the JSON text; bytes must be UTF-8 (a leading byte-order mark is skipped).
        what: the document, for messages (``"the manifest of model.ngi"``).
        error: the exception class to raise (``SerializationError``, ``DeployError``...); it is
            called with one message string.
        max_depth: the deepest nesting of arrays and objects accepted.
        max_chars: the longest text accepted (characters; for bytes, bytes).
        hint: the message's last part, saying what to do.
        object_pairs_hook, parse_constant: passed to ``json.loads``; an ``error`` they raise
            propagates unchanged.

    Returns:
        the decoded value.

    Raises:
        error: text that is not str or bytes, longer or deeper than the limits, not UTF-8, or
            not complete JSON (an int of over 4,300 digits included).

    Example:
        >>> loads("[" * 100 + "]" * 100, what="a record", error=ValueError)
        Traceback (most recent call last):
        ValueError: a record: expected at most max_depth=64 levels of nesting, received 100; hint: ...
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise error(f"{what}: expected JSON text (str or bytes), received {type(text).__name__}; {hint}")
    if len(text) > max_chars:
        raise error(f"{what}: expected at most max_chars={max_chars} characters, received {len(text)}; {hint}")
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise error(f"{what}: expected UTF-8 JSON text, received a byte {exc.object[exc.start]:#04x} that is "
                        f"not UTF-8 at offset {exc.start}; {hint}") from None
    depth = nesting_depth(text, max_depth)
    if depth > max_depth:
        raise error(f"{what}: expected at most max_depth={max_depth} levels of nesting, received {depth}; {hint}")
    try:
        return json.loads(text, object_pairs_hook=_passing(object_pairs_hook),
                          parse_constant=_passing(parse_constant))
    except _HookError as exc:
        raise exc.original from None
    except json.JSONDecodeError as exc:
        raise error(f"{what}: expected complete JSON text, received {exc.msg} at line {exc.lineno} column "
                    f"{exc.colno}; {hint}") from None
    except (ValueError, RecursionError) as exc:  # an int of over 4,300 digits; the depth scan makes recursion moot
        raise error(f"{what}: expected complete JSON text, its JSON numbers of at most 4,300 digits, received "
                    f"{type(exc).__name__}: {str(exc)[:120]}; {hint}") from None


class _HookError(Exception):
    """What a caller's hook raised, carried past the parser's own error handling unchanged."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


def _passing(hook: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    """``hook``, its exceptions wrapped in ``_HookError`` (so they are not taken for the parser's)."""
    if hook is None:
        return None

    def call(arg: Any) -> Any:
        try:
            return hook(arg)
        except Exception as exc:
            raise _HookError(exc) from None

    return call
