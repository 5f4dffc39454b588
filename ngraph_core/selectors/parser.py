"""The selector language's syntax: a recursive-descent parser from query text to an immutable AST.

Grammar (docs/selectors.md, "The grammar"; whitespace around ``>``, ``<``, ``>>``, ``<<`` and ``,`` is optional)::

    list      := complex ("," complex)*
    complex   := compound (combinator compound)*          read left to right
    combinator:= ">" | ">>" | "<" | "<<" | whitespace     (whitespace: "inside")
    compound  := [type] test*                             at least one of the two
    type      := "*" | Name                               Capitalized: layer type; lowercase: op kind
    test      := "#" name | "." name | "[" name [operator value] "]" | ":" ("not" | "has") "(" list ")"
    operator  := "=" | "!=" | "^=" | "$=" | "*="
    name      := word | quoted string                     word: letters, digits, "_" and "-"
    value     := word (also ".", "+", "/") | quoted string

A query holds at most ``MAX_QUERY_LENGTH`` (4096) characters; a longer one is refused before it is
parsed (a ``SelectorError`` at column 4097), so no query can hold a select for long: matching costs
query length x graph size (``match.py``).

Every node prints back as canonical query text (``str(parse(" Conv>Pool  variable"))`` is
``"Conv > Pool variable"``), so the AST can be checked by its text. Malformed text raises a
``SelectorError`` carrying ``.column`` (1-based) and ``.query``, whose message has a caret line
under the query. Lowercase types are checked against ``OpType`` here, so an unknown op kind is
reported at its column with close matches.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache

from ..errors import SelectorError
from ..ir import OP_BY_NAME

OPERATORS = ("=", "!=", "^=", "$=", "*=")
PSEUDO_CLASSES = ("not", "has")
COMBINATORS = (" ", ">", ">>", "<", "<<")
MAX_NESTING = 32  # :not(:has(...)) depth; deeper queries are refused before Python's recursion limit
MAX_QUERY_LENGTH = 4096
"""The longest query ``parse`` accepts, in characters: hand-written queries are far shorter, and the bound keeps
the cost of any one ``select`` (linear in query length x graph size) small."""
_WORD = re.compile(r"[\w\-]+")
_VALUE = re.compile(r"[\w\-.+/]+")
_HINT = "hint: queries look like 'Conv > Pool variable', '.elementwise:not(Conv *)', '#conv1' or '[name^=W]'"


def _quote(text: str, bare: re.Pattern[str] = _WORD) -> str:
    """``text`` as it is written in a query: bare when it is a word, else a double-quoted string."""
    if bare.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- the AST ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NameTest:
    """``#name``: a scope or op whose name equals ``name``."""

    name: str

    def __str__(self) -> str:
        return "#" + _quote(self.name)


@dataclass(frozen=True, slots=True)
class LabelTest:
    """``.label``: an op carrying the label, or belonging to the op group of that name."""

    label: str

    def __str__(self) -> str:
        return "." + _quote(self.label)


@dataclass(frozen=True, slots=True)
class AttrTest:
    """``[name]`` (present) or ``[name<operator>value]`` (compared as text)."""

    name: str
    operator: str | None = None
    value: str | None = None

    def __str__(self) -> str:
        if self.operator is None:
            return f"[{_quote(self.name)}]"
        return f"[{_quote(self.name)}{self.operator}{_quote(self.value or '', _VALUE)}]"


@dataclass(frozen=True, slots=True)
class Pseudo:
    """``:not(S)`` or ``:has(S)``."""

    name: str
    arg: SelectorList

    def __str__(self) -> str:
        return f":{self.name}({self.arg})"


Test = NameTest | LabelTest | AttrTest | Pseudo


@dataclass(frozen=True, slots=True)
class Compound:
    """One compound selector: an optional type and tests, all of which an item must pass.

    ``type`` is ``"*"`` (any op), a capitalized layer type (scopes only), a lowercase op kind
    (ops only) or None (no type: ops and scopes alike, e.g. ``#conv1``).
    """

    type: str | None
    tests: tuple[Test, ...] = ()

    @property
    def matches_scopes(self) -> bool:
        return self.type is None or self.type[0].isupper()

    @property
    def matches_ops(self) -> bool:
        return self.type is None or not self.type[0].isupper()

    def __str__(self) -> str:
        return (self.type or "") + "".join(map(str, self.tests))


@dataclass(frozen=True, slots=True)
class Complex:
    """Compounds joined by combinators, read left to right: ``first``, then ``(combinator, compound)`` steps."""

    first: Compound
    steps: tuple[tuple[str, Compound], ...] = ()

    def __str__(self) -> str:
        return str(self.first) + "".join(f" {c}" if comb == " " else f" {comb} {c}" for comb, c in self.steps)


@dataclass(frozen=True, slots=True)
class SelectorList:
    """The whole query: a union of complex selectors (``S1, S2``)."""

    selectors: tuple[Complex, ...]

    def __str__(self) -> str:
        return ", ".join(map(str, self.selectors))


# -- errors ----------------------------------------------------------------------------------


def syntax_error(query: str, column: int, message: str, hint: str = _HINT) -> SelectorError:
    """A ``SelectorError`` pointing at ``column`` (1-based) of ``query``, with a caret line under it.

    Example:
        >>> str(syntax_error("Conv >", 7, "expected a selector after '>' at column 7, found end of query"))
        "selector: expected a selector after '>' at column 7, found end of query\\n  Conv >\\n        ^\\nhint: ..."
    """
    shown = "".join(ch if ch.isprintable() else " " for ch in query)  # one line, columns kept
    err = SelectorError(f"selector: {message}\n  {shown}\n  {' ' * (column - 1)}^\n{hint}")
    err.column = column  # type: ignore[attr-defined]
    err.query = query  # type: ignore[attr-defined]
    return err


# -- the parser ------------------------------------------------------------------------------


class _Parser:
    """A cursor over the query; each ``parse_*`` method reads one grammar rule."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.i = 0
        self.depth = 0

    # -- characters
    def peek(self, n: int = 1) -> str:
        return self.query[self.i:self.i + n]

    def found(self) -> str:
        return repr(self.query[self.i]) if self.i < len(self.query) else "end of query"

    def fail(self, expected: str, column: int | None = None, hint: str = _HINT) -> SelectorError:
        column = self.i + 1 if column is None else column
        return syntax_error(self.query, column, f"expected {expected} at column {column}, found {self.found()}", hint)

    def skip_space(self) -> bool:
        start = self.i
        while self.i < len(self.query) and self.query[self.i].isspace():
            self.i += 1
        return self.i > start

    def expect(self, char: str, where: str) -> None:
        if self.peek() != char:
            raise self.fail(f"{char!r} {where}")
        self.i += 1

    # -- tokens
    def word(self, pattern: re.Pattern[str] = _WORD) -> str | None:
        match = pattern.match(self.query, self.i)
        if not match:
            return None
        self.i = match.end()
        return match.group()

    def string(self) -> str:
        quote, start = self.query[self.i], self.i
        self.i += 1
        out = []
        while self.i < len(self.query):
            ch = self.query[self.i]
            if ch == quote:
                self.i += 1
                return "".join(out)
            if ch == "\\" and self.i + 1 < len(self.query):
                self.i += 1
                ch = self.query[self.i]
            out.append(ch)
            self.i += 1
        raise syntax_error(self.query, start + 1,
                           f"expected a closing {quote} for the string opened at column {start + 1}, "
                           "found end of query",
                           "hint: close the quote, and write a quote inside a string as \\\" or \\'")

    def name(self, what: str, pattern: re.Pattern[str] = _WORD) -> str:
        if self.peek() and self.peek() in "'\"":
            return self.string()
        text = self.word(pattern)
        if text is None:
            raise self.fail(what, hint="hint: names are words (letters, digits, '_', '-') or quoted strings")
        return text

    # -- grammar rules
    def parse_list(self, after: str | None) -> SelectorList:
        items = [self.parse_complex(after)]
        while True:
            self.skip_space()
            if self.peek() != ",":
                return SelectorList(tuple(items))
            self.i += 1
            self.skip_space()
            items.append(self.parse_complex("','"))

    def parse_complex(self, after: str | None) -> Complex:
        first = self.parse_compound(after)
        steps = []
        while True:
            spaced = self.skip_space()
            if self.peek() in (">", "<"):
                comb = self.peek(2) if self.peek(2) in (">>", "<<") else self.peek()
                self.i += len(comb)
                self.skip_space()
                steps.append((comb, self.parse_compound(f"{comb!r}")))
            elif spaced and self.starts_compound():
                steps.append((" ", self.parse_compound(None)))
            else:
                return Complex(first, tuple(steps))

    def starts_compound(self) -> bool:
        ch = self.peek()
        return bool(ch) and (ch in "*#.[:" or bool(_WORD.match(ch)))

    def parse_compound(self, after: str | None) -> Compound:
        if not self.starts_compound():
            raise self.fail("a selector" + (f" after {after}" if after else ""))
        type_ = None
        if self.peek() == "*":
            self.i += 1
            type_ = "*"
        elif _WORD.match(self.peek()):
            type_ = self.parse_type()
        tests: list[Test] = []
        while self.peek() and self.peek() in "#.[:":
            tests.append(self.parse_test())
        return Compound(type_, tuple(tests))

    def parse_type(self) -> str:
        column = self.i + 1
        name = self.word() or ""
        if name[0].isupper():
            return name
        if not name[0].islower():
            raise syntax_error(self.query, column,
                               f"expected a layer type (Capitalized) or an op kind (lowercase) at column {column}, "
                               f"found {name!r}", "hint: names after '#' may start with anything: write #" + name)
        if name not in OP_BY_NAME:
            close = difflib.get_close_matches(name, OP_BY_NAME, n=3, cutoff=0.6)
            maybe = f"did you mean {', '.join(close)}? " if close else ""
            raise syntax_error(self.query, column,
                               f"expected an op kind (an ngraph_core.OpType value) at column {column}, found {name!r}",
                               f"hint: {maybe}layer types are Capitalized (Conv); op kinds are lowercase (conv, dot, "
                               "variable)")
        return name

    def parse_test(self) -> Test:
        column = self.i + 1
        mark = self.query[self.i]
        self.i += 1
        if mark == "#":
            return NameTest(self.name("a name after '#'"))
        if mark == ".":
            return LabelTest(self.name("a label or op group after '.'"))
        if mark == "[":
            return self.parse_attr()
        name = self.word() or ""
        if name not in PSEUDO_CLASSES:
            found = repr(name) if name else self.found()
            raise syntax_error(
                self.query, column + 1,
                f"expected a pseudo-class (:not or :has) at column {column + 1}, found {found}",
                "hint: ':not(S)' keeps what S does not match; ':has(S)' what holds (or reads) something S matches")
        self.expect("(", f"after ':{name}'")
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise syntax_error(self.query, column, f"expected at most {MAX_NESTING} nested pseudo-classes at "
                                                   f"column {column}, found more", _HINT)
        self.skip_space()
        arg = self.parse_list(f"':{name}('")
        self.depth -= 1
        self.skip_space()
        self.expect(")", f"to close ':{name}(' from column {column}")
        return Pseudo(name, arg)

    def parse_attr(self) -> AttrTest:
        self.skip_space()
        name = self.name("an attribute name after '['")
        self.skip_space()
        if self.peek() == "]":
            self.i += 1
            return AttrTest(name)
        column = self.i + 1
        operator = next((op for op in sorted(OPERATORS, key=len, reverse=True) if self.peek(len(op)) == op), None)
        if operator is None:
            raise self.fail(f"']' or an operator ({' '.join(OPERATORS)})", column,
                            "hint: attribute tests look like [nout=64], [name^=conv] or [dtype!=float32]")
        self.i += len(operator)
        self.skip_space()
        value = self.name(f"a value after {operator!r}", _VALUE)
        self.skip_space()
        self.expect("]", "to close the attribute test")
        return AttrTest(name, operator, value)

    def parse(self) -> SelectorList:
        self.skip_space()
        tree = self.parse_list(None)
        self.skip_space()
        if self.i < len(self.query):
            raise self.fail("a combinator (' ', '>', '>>', '<', '<<'), ',' or the end of the query")
        return tree


@lru_cache(maxsize=512)
def _parse_cached(query: str) -> SelectorList:
    return _Parser(query).parse()


def parse(query: str) -> SelectorList:
    """The AST of ``query`` (cached: the AST is immutable).

    Args:
        query: selector text, e.g. ``"Conv > Pool variable"``.

    Returns:
        a ``SelectorList``; ``str()`` of it is the canonical query text.

    Raises:
        SelectorError: ``query`` is not a str, is longer than ``MAX_QUERY_LENGTH`` (4096) characters,
            is empty or malformed; the error's ``.column`` (1-based) points at the problem and its
            message has a caret line under the query.

    Example:
        >>> str(parse("Conv>Pool  variable, .bias"))
        'Conv > Pool variable, .bias'
    """
    if not isinstance(query, str):
        raise SelectorError(f"selector: expected a query string, received {type(query).__name__}; "
                            "hint: e.g. ng.select(ops, 'Conv variable')")
    if len(query) > MAX_QUERY_LENGTH:
        err = SelectorError(f"selector: expected a query of at most {MAX_QUERY_LENGTH} characters, received "
                            f"{len(query)} (starting {query[:40]!r}); hint: split it into several queries and "
                            "combine their selections, or select by a shared label or name prefix "
                            "('.weight', '[name^=conv]')")
        err.column = MAX_QUERY_LENGTH + 1  # type: ignore[attr-defined]
        err.query = query  # type: ignore[attr-defined]
        raise err
    return _parse_cached(query)
