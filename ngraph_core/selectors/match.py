"""Evaluating a parsed selector over a graph: which ops and scopes it matches, in graph order.

The *universe* is every op reachable from the source's roots, sub-graph bodies included
(``ir.walk``), and every scope path prefix those ops record. ``GraphIndex`` computes the facts
a query needs once per ``select``: op positions, the ops inside each scope, and edges and
reachability as bit masks over positions (Python ints), so ``>>`` / ``<<`` cost a mask AND per
candidate instead of a walk.

Cost: linear in query x graph. Matching never backtracks: each compound is evaluated once over
the graph (equal compounds and complex selectors once per query: ``Evaluator`` memoizes them by
value), and each combinator step is one pass over the left side's matches. Per op, lookups hash
an int (scope paths are interned, ``GraphIndex.path_id``), never a tuple of scope entries. A
query of the maximum length (``parser.MAX_QUERY_LENGTH``, 4096 characters) on a graph of a few
hundred ops answers in well under a second (``tests/ngraph_core/selectors/test_selector_limits.py``).

Semantics (docs/selectors.md, "What a query matches", states them for users):

* A Capitalized type matches scopes only (``ScopeEntry.is_a``: the class or a subclass), a
  lowercase type or ``*`` ops only; a compound without a type (``#conv1``, ``[name^=W]``)
  matches ops and scopes alike.
* ``.x`` matches ops labelled ``x`` or in the op group ``x`` (``GROUPS``); scopes carry no labels.
* Attributes of an op: ``name``, ``kind`` (its op type), ``dtype``, ``axes`` (``"C,N"``),
  ``shape`` (``"4,32"``), ``scope`` (``"Sequential/conv1"``), then its ``meta.attrs``. Of a
  scope: ``name``, ``kind``, ``path``, then what the ``scope_attrs`` callback returns (a neon
  layer's config). Values compare as text; lists and tuples read as comma-joined items. A
  missing attribute fails every test except ``!=``.
* ``A B``: B inside scope A (an op whose scope path starts with A's; a scope whose path is
  longer). An op contains nothing.
* ``A > B`` (and ``<``, ``>>``, ``<<``) need A and B *disjoint* (neither holds the other) and an
  edge (or a path) from A's ops into B's ops; the subject stays A. So a scope is never
  "followed by" the container it sits in.
* ``:has(S)`` on a scope: something inside it (an op, or a deeper scope) matches S. On an op:
  one of its inputs, at any distance, is among S's ops (matched ops and the ops of matched scopes).
* ``:not(S)``: not matched by S evaluated over the same universe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import cached_property
from typing import Any

from ..errors import SelectorError
from ..ir import Op, OpGroup, ScopeEntry
from .parser import AttrTest, Complex, Compound, LabelTest, NameTest, Pseudo, SelectorList

Path = tuple[ScopeEntry, ...]
ScopeAttrs = Callable[[Path], Mapping[str, Any]]

# the op groups ``.name`` selects (OpGroup's user-facing sets)
GROUPS: dict[str, frozenset] = {
    "leaf": OpGroup.LEAF, "random": OpGroup.RANDOM, "unary": OpGroup.UNARY, "binary": OpGroup.BINARY,
    "comparison": OpGroup.COMPARISON, "elementwise": OpGroup.ELEMENTWISE, "reduce": OpGroup.REDUCE,
    "movement": OpGroup.MOVEMENT, "contraction": OpGroup.CONTRACTION, "nn": OpGroup.NN, "control": OpGroup.CONTROL,
}
_DEEPEST = 1 << 30  # an op item's "deepest matched scope": deeper than any path


def bits(positions: Iterable[int], size: int) -> int:
    """A bit mask (Python int) with the given bit positions set."""
    buf = bytearray(size // 8 + 1)
    for p in positions:
        buf[p >> 3] |= 1 << (p & 7)
    return int.from_bytes(buf, "little")


def as_text(value: Any) -> str:
    """An attribute value as the text selectors compare: list and tuple items comma-joined."""
    if isinstance(value, (list, tuple)):
        return ",".join(as_text(v) for v in value)
    return str(value)


def path_text(path: Path) -> str:
    """A scope path as ``"Sequential/conv1"``."""
    return "/".join(entry.name for entry in path)


class GraphIndex:
    """The universe of one ``select`` and the facts queries read, computed once (masks lazily).

    Args:
        order: every op, sources first (``ir.walk(roots)``).
        scope_attrs: optional callback ``(scope path) -> mapping`` of a scope's extra attributes.
    """

    def __init__(self, order: list[Op], scope_attrs: ScopeAttrs | None = None) -> None:
        self.order = order
        self.size = len(order)
        self.pos: dict[Op, int] = {op: i for i, op in enumerate(order)}
        self.scope_attrs = scope_attrs
        # every scope path prefix -> the positions of the ops inside it (nested ones too), ascending
        self.inside: dict[Path, list[int]] = {}
        self.exact: dict[Path, list[int]] = {}  # the ops recorded in exactly that scope
        # scope paths interned as ints (the empty path is 0): per-op lookups then hash an int, not a
        # tuple of ScopeEntry dataclasses, whose hash is recomputed on every lookup
        self.paths: list[Path] = [()]
        self.path_id: dict[Path, int] = {(): 0}
        self.holding: list[frozenset[int]] = [frozenset()]  # path id -> the ids of its prefixes, itself included
        self.op_path: list[int] = []  # op position -> the id of the scope it is recorded in
        self.kinds: dict[str, list[int]] = {}  # op kind -> positions
        for i, op in enumerate(order):
            scope = op.meta.scope
            self.exact.setdefault(scope, []).append(i)
            for k in range(1, len(scope) + 1):
                self.inside.setdefault(scope[:k], []).append(i)
            self.op_path.append(self._intern(scope))
            self.kinds.setdefault(op.op.value, []).append(i)
        self._masks: dict[Path, int] = {(): (1 << self.size) - 1}
        self._attrs: dict[Path, Mapping[str, Any]] = {}

    def _intern(self, path: Path) -> int:
        """The id of ``path``, interning it and its prefixes on first sight."""
        found = self.path_id.get(path)
        if found is None:
            outer = self._intern(path[:-1])
            found = self.path_id[path] = len(self.paths)
            self.paths.append(path)
            self.holding.append(self.holding[outer] | {found})
        return found

    @cached_property
    def names(self) -> dict[str, list[int]]:
        """Op name -> the positions of the ops of that name (``#name`` reads it instead of every op)."""
        found: dict[str, list[int]] = {}
        for i, op in enumerate(self.order):
            found.setdefault(op.meta.name, []).append(i)
        return found

    def first_computing(self, path: Path) -> int:
        """The position of the first op inside ``path`` that is not a leaf (its first op if all are)."""
        positions = self.inside[path]
        return next((i for i in positions if self.order[i].op not in OpGroup.LEAF), positions[0])

    @property
    def scopes(self) -> list[Path]:
        """Every scope path in the universe, in order of first appearance."""
        return list(self.inside)

    def scope_mask(self, path: Path) -> int:
        """The ops inside ``path`` as a mask (every op for the empty path)."""
        mask = self._masks.get(path)
        if mask is None:
            mask = self._masks[path] = bits(self.inside.get(path, ()), self.size)
        return mask

    # -- edges and reachability, as masks per op position
    @cached_property
    def consumers(self) -> list[list[int]]:
        users: list[list[int]] = [[] for _ in self.order]
        for i, op in enumerate(self.order):
            for s in dict.fromkeys(op.src):
                users[self.pos[s]].append(i)
        return users

    @cached_property
    def consumer_masks(self) -> list[int]:
        return [bits(users, self.size) for users in self.consumers]

    @cached_property
    def source_masks(self) -> list[int]:
        return [bits((self.pos[s] for s in op.src), self.size) for op in self.order]

    @cached_property
    def descendant_masks(self) -> list[int]:
        """Every op reachable downstream of each op (consumers of consumers...), the op excluded."""
        masks = [0] * self.size
        for i in range(self.size - 1, -1, -1):  # consumers come later in the order
            mask = self.consumer_masks[i]
            for c in self.consumers[i]:
                mask |= masks[c]
            masks[i] = mask
        return masks

    @cached_property
    def ancestor_masks(self) -> list[int]:
        """Every op each op reads, at any distance, the op excluded."""
        masks = [0] * self.size
        for i, op in enumerate(self.order):
            mask = self.source_masks[i]
            for s in op.src:
                mask |= masks[self.pos[s]]
            masks[i] = mask
        return masks

    # -- attributes
    def op_attr(self, op: Op, name: str) -> Any:
        """The value of attribute ``name`` of ``op`` (None when it has none)."""
        if name == "name":
            return op.meta.name
        if name == "kind":
            return op.op.value
        if name == "dtype":
            return op.dtype
        if name == "axes":
            return tuple(axis.name for axis in op.axes)
        if name == "shape":
            return op.axes.lengths
        if name == "scope":
            return path_text(op.meta.scope)
        return op.meta.attrs.get(name)

    def scope_attr(self, path: Path, name: str) -> Any:
        """The value of attribute ``name`` of the scope ``path`` (None when it has none)."""
        if name == "name":
            return path[-1].name
        if name == "kind":
            return path[-1].kind
        if name == "path":
            return path_text(path)
        if self.scope_attrs is None:
            return None
        attrs = self._attrs.get(path)
        if attrs is None:
            attrs = self.scope_attrs(path)
            if not isinstance(attrs, Mapping):
                raise SelectorError(f"selector: scope_attrs({path_text(path)!r}) returned {type(attrs).__name__}; "
                                    "expected a mapping of attribute names to values; hint: return {} for none")
            self._attrs[path] = attrs
        return attrs.get(name)


def compare(test: AttrTest, value: Any) -> bool:
    """Whether an attribute ``value`` (None: absent) passes ``test``."""
    if value is None:
        return test.operator == "!="
    if test.operator is None:
        return True
    text, want = as_text(value), test.value or ""
    if test.operator == "=":
        return text == want
    if test.operator == "!=":
        return text != want
    if test.operator == "^=":
        return text.startswith(want)
    if test.operator == "$=":
        return text.endswith(want)
    return want in text  # "*="


class Matches:
    """What a selector matched: op positions and scope paths."""

    __slots__ = ("ops", "scopes")

    def __init__(self, ops: set[int] | None = None, scopes: set[Path] | None = None) -> None:
        self.ops: set[int] = ops if ops is not None else set()
        self.scopes: set[Path] = scopes if scopes is not None else set()


class Evaluator:
    """Evaluates selectors over one ``GraphIndex``; every sub-result is computed once.

    Compounds and complex selectors are memoized by value (a query repeating ``Conv > Pool`` evaluates
    it once, and a repeated ``:not(S)`` reads one result), selector lists by the identity of the
    (immutable, parse-cached) tree node: ``:not``/``:has`` look theirs up once per op, and a per-op
    lookup must not hash a whole sub-tree.
    """

    def __init__(self, index: GraphIndex) -> None:
        self.index = index
        self._lists: dict[int, Matches] = {}
        self._complexes: dict[Complex, Matches] = {}
        self._compounds: dict[Compound, Matches] = {}
        self._targets: dict[int, tuple[Matches, _Targets]] = {}  # id(right) -> (right, its targets)
        self._reach: dict[tuple[str, Path], int] = {}
        self._covered: dict[int, int] = {}
        self._holders: dict[int, set[Path]] = {}

    def run(self, tree: SelectorList) -> list[int | Path]:
        """The items ``tree`` matches, in graph order: op positions and scope paths.

        A scope sorts just before its first op that computes something (a walk reaches leaves such
        as variables early, wherever they are used), an outer scope before an inner one.
        """
        found = self.select(tree)
        keyed: list[tuple[tuple[int, int, int], int | Path]] = [((i, 1, 0), i) for i in found.ops]
        keyed += [((self.index.first_computing(p), 0, len(p)), p) for p in found.scopes]
        keyed.sort(key=lambda pair: pair[0])
        return [item for _, item in keyed]

    def select(self, tree: SelectorList) -> Matches:
        found = self._lists.get(id(tree))
        if found is None:
            found = Matches()
            for sel in tree.selectors:
                part = self.complex(sel)
                found.ops |= part.ops
                found.scopes |= part.scopes
            self._lists[id(tree)] = found
        return found

    def complex(self, sel: Complex) -> Matches:
        found = self._complexes.get(sel)
        if found is None:
            found = self.compound(sel.first)
            for comb, comp in sel.steps:
                right = self.compound(comp)
                found = self.inside(found, right) if comb == " " else self.related(found, right, comb)
            self._complexes[sel] = found
        return found

    # -- compounds
    def compound(self, comp: Compound) -> Matches:
        found = self._compounds.get(comp)
        if found is None:
            tests = tuple(dict.fromkeys(comp.tests))  # a repeated test decides nothing new
            found = self._compounds[comp] = Matches(
                self.compound_ops(comp.type, tests) if comp.matches_ops else set(),
                self.compound_scopes(comp.type, tests) if comp.matches_scopes else set())
        return found

    def compound_ops(self, type_: str | None, tests: tuple[Any, ...]) -> set[int]:
        """The ops of kind ``type_`` (None, ``*``: any) passing ``tests``, filtered one test at a time.

        The candidates start from an index (the ops of a name, or of a kind) where the compound has
        one, and ``:not`` removes its matches with one set difference.
        """
        index = self.index
        name = next((t.name for t in tests if isinstance(t, NameTest)), None)
        if name is not None:
            found = set(index.names.get(name, ()))
            if type_ not in (None, "*"):
                found = {i for i in found if index.order[i].op.value == type_}
        else:
            found = set(range(index.size)) if type_ in (None, "*") else set(index.kinds.get(type_ or "", ()))
        for test in tests:
            if not found:
                break
            if isinstance(test, Pseudo) and test.name == "not":
                found -= self.select(test.arg).ops
            elif not isinstance(test, NameTest) or test.name != name:
                found = {i for i in found if self.op_passes(test, i, index.order[i])}
        return found

    def compound_scopes(self, type_: str | None, tests: tuple[Any, ...]) -> set[Path]:
        """The scopes of layer type ``type_`` (None: any) passing ``tests``."""
        return {path for path in self.index.inside
                if (type_ is None or path[-1].is_a(type_)) and all(self.scope_passes(t, path) for t in tests)}

    def op_passes(self, test: Any, i: int, op: Op) -> bool:
        if isinstance(test, NameTest):
            return op.meta.name == test.name
        if isinstance(test, LabelTest):
            return test.label in op.meta.labels or op.op in GROUPS.get(test.label, ())
        if isinstance(test, AttrTest):
            return compare(test, self.index.op_attr(op, test.name))
        if test.name == "not":
            return i not in self.select(test.arg).ops
        return (self.index.ancestor_masks[i] & self.covered(test.arg)) != 0  # :has

    def scope_passes(self, test: Any, path: Path) -> bool:
        if isinstance(test, NameTest):
            return path[-1].name == test.name
        if isinstance(test, LabelTest):
            return False
        if isinstance(test, AttrTest):
            return compare(test, self.index.scope_attr(path, test.name))
        if test.name == "not":
            return path not in self.select(test.arg).scopes
        return path in self.holders(test.arg)  # :has

    def covered(self, tree: SelectorList) -> int:
        """The ops ``tree`` matches, and those inside the scopes it matches, as a mask."""
        mask = self._covered.get(id(tree))
        if mask is None:
            found = self.select(tree)
            mask = bits(found.ops, self.index.size)
            for path in found.scopes:
                mask |= self.index.scope_mask(path)
            self._covered[id(tree)] = mask
        return mask

    def holders(self, tree: SelectorList) -> set[Path]:
        """The scopes holding something ``tree`` matches (an op inside, or a deeper scope)."""
        paths = self._holders.get(id(tree))
        if paths is None:
            found, order = self.select(tree), self.index.order
            paths = set()
            for scope in {order[i].meta.scope for i in found.ops}:
                paths.update(scope[:k] for k in range(1, len(scope) + 1))
            for scope in found.scopes:
                paths.update(scope[:k] for k in range(1, len(scope)))
            self._holders[id(tree)] = paths
        return paths

    # -- combinators
    def inside(self, left: Matches, right: Matches) -> Matches:
        """``left right``: the items of ``right`` inside a scope of ``left``."""
        if not left.scopes:
            return Matches()
        index = self.index
        outer = {index.path_id[p] for p in left.scopes}
        held = [not outer.isdisjoint(prefixes) for prefixes in index.holding]  # per path id: inside ``outer``
        ops = {i for i in right.ops if held[index.op_path[i]]}
        scopes = set()
        for path in right.scopes:
            k = index.path_id[path]
            if held[k] and (k not in outer or len(outer & index.holding[k]) > 1):  # a strictly outer scope
                scopes.add(path)
        return Matches(ops, scopes)

    def related(self, left: Matches, right: Matches, comb: str) -> Matches:
        """``left > right`` and kin: the items of ``left`` with an edge (or path) to or from a disjoint
        item of ``right`` (see the module docstring)."""
        index = self.index
        masks = {">": index.consumer_masks, ">>": index.descendant_masks,
                 "<": index.source_masks, "<<": index.ancestor_masks}[comb]
        cached = self._targets.get(id(right))
        if cached is None:
            cached = self._targets[id(right)] = (right, _Targets(index, right))
        disjoint_from, op_path = cached[1].disjoint_from, index.op_path
        ops = {i for i in left.ops if masks[i] & disjoint_from(op_path[i], True)}
        scopes = set()
        for path in left.scopes:
            reach = self._reach.get((comb, path))
            if reach is None:
                reach = 0
                for i in index.inside[path]:
                    reach |= masks[i]
                self._reach[(comb, path)] = reach
            if reach & disjoint_from(index.path_id[path], False):
                scopes.add(path)
        return Matches(ops, scopes)


class _Targets:
    """The ops of a selector's matches, grouped so that "the ops of the matches disjoint from item a"
    is a few mask operations per distinct scope path of a (memoized by the path's id).

    For an op y, ``deepest(y)`` is the length of the longest matched scope holding y (unbounded
    when y itself is matched). A match holding y is disjoint from a exactly when it is longer than
    the common prefix c of y's scope and a's path, so the wanted ops are, over c = 0..len(path),
    the ops sharing exactly c levels with a's path whose ``deepest`` exceeds c.
    """

    def __init__(self, index: GraphIndex, right: Matches) -> None:
        self.index = index
        scopes = right.scopes
        depth_of_path = {}
        for path in index.exact:
            depth_of_path[path] = max((k for k in range(1, len(path) + 1) if path[:k] in scopes), default=0)
        self.max_depth = max((len(p) for p in index.exact), default=0)
        by_depth: dict[int, list[int]] = {}
        for path, positions in index.exact.items():
            by_depth.setdefault(depth_of_path[path], []).extend(positions)
        # deeper[j]: the ops whose deepest matched holder is longer than j (a suffix union of the buckets)
        self.deeper = [0] * (self.max_depth + 1)
        running = bits(right.ops, index.size)
        for j in range(self.max_depth, -1, -1):
            running |= bits(by_depth.get(j + 1, ()), index.size)
            self.deeper[j] = running
        self._memo: dict[tuple[int, bool], int] = {}

    def disjoint_from(self, path_id: int, is_op: bool) -> int:
        """The ops inside matches disjoint from an op recorded in the path ``path_id`` (``is_op``) or
        from the scope of that id (``GraphIndex.path_id``)."""
        key = (path_id, is_op)
        mask = self._memo.get(key)
        if mask is None:
            index, mask, path = self.index, 0, self.index.paths[path_id]
            for j in range(len(path)):
                mask |= index.scope_mask(path[:j]) & ~index.scope_mask(path[:j + 1]) & self.deeper[j]
            if is_op:
                mask |= index.scope_mask(path) & self.deeper[len(path)]
            self._memo[key] = mask
        return mask
