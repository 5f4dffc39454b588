"""Containers: ``Sequential``, ``Tree`` (with ``BranchNode``), ``MergeBroadcast`` and ``MergeSum``.

Containers name their unnamed children ``<Class>_<k>`` relative to themselves (``name_children``:
``k`` counts the earlier children of the same class), and are layers whose ``variables`` and
``updates`` include their children's and
whose ``get_config()`` lists the children as ``{"class_name", "config"}`` dicts, so a
whole model rebuilds from plain data (``from_config``), weight sharing included.

Branch outputs that are summed or concatenated must agree on their axes. Named axes
make that explicit: ``Affine(64)`` outputs ``[Affine_0:64, N]``, an identity branch
``[F:64, N]``. The merge *conforms* each output to the first branch's: axes with the same
names are aligned by name; otherwise the feature axes (all but ``N`` and ``REC``) are
renamed position by position to the first branch's, which needs the same number of
feature axes with the same lengths. Anything else raises ``LayerError``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import ngraph_core as ng
from neon.layers.base import Layer, LayerError, name_children
from neon.layers.checks import describe, feature_axes, fmt_axes, layer_error
from neon.layers.composite import CompositeLayer, unique
from neon.layers.serialization import deserialize_layer, serialize_layer


def flatten_layers(owner: str, layers: Any) -> list[Layer]:
    """``layers`` (a layer or nested lists/tuples of layers) as a flat list; ``LayerError`` otherwise."""
    if isinstance(layers, Layer):
        return [layers]
    if not isinstance(layers, (list, tuple)):
        raise LayerError(
            f"{owner}: expected a layer or a list of layers, received: {type(layers).__name__}; "
            "hint: e.g. Sequential([Affine(10), Activation('relu')])"
        )
    flat: list[Layer] = []
    for item in layers:
        flat.extend(flatten_layers(owner, item))
    return flat


def child_configs(owner: str, config: Any, key: str, allowed: tuple[str, ...], nested: bool = False) -> list:
    """``config[key]``: a list of layer configs (``nested``: a list of such lists), checked.

    Args:
        owner: the container class, for messages.
        config: the container's config; its keys must be among ``allowed``.
        key: ``"layers"`` or ``"branches"``.
        allowed: the keys the container's ``get_config`` writes.
        nested: True when ``config[key]`` is a list of branches.

    Returns:
        ``config[key]``.

    Raises:
        LayerError: not a dict, unknown keys, ``key`` missing, or not a list (of lists).
    """
    hint = f"hint: pass what {owner}.get_config() produced"
    if not isinstance(config, dict) or set(config) - set(allowed) or key not in config:
        got = sorted(map(str, config)) if isinstance(config, dict) else type(config).__name__
        raise LayerError(f"{owner}.from_config: expected a dict with {key!r} and keys among {list(allowed)}, "
                         f"received: {got}; {hint}")
    items = config[key]
    if not isinstance(items, list) or (nested and not all(isinstance(b, list) for b in items)):
        form = "a list of branches, each a list of layer configs" if nested else "a list of layer configs"
        raise LayerError(f"{owner}.from_config: expected {key!r} as {form}, received: {type(items).__name__} "
                         f"{repr(items)[:80]}; {hint}")
    return items


def apply_layers(owner: Layer, layers: Sequence[Layer], x: ng.Op) -> ng.Op:
    """``x`` through ``layers`` in order (``LayerError`` if a multi-output layer is followed by more)."""
    for i, layer in enumerate(layers):
        if not isinstance(x, ng.Op):
            raise layer_error(owner, f"a single op to feed {describe(layer)}",
                              f"{type(x).__name__} from {describe(layers[i - 1])}",
                              "a Tree returns one output per branch: put it last")
        x = layer(x)
    return x


class Sequential(CompositeLayer):
    """Applies layers in order; nested lists are flattened.

    Args:
        layers: a list of layers (nested lists allowed) or one layer.
        name: the layer's name.

    Example:
        >>> mlp = Sequential([Affine(100, activation="relu"), Affine(10, activation="softmax")])
        >>> probs = mlp(x)
        >>> len(mlp), mlp[0]
    """

    def __init__(self, layers: Any, name: str | None = None) -> None:
        super().__init__(name)
        self.layers = flatten_layers(describe(self), layers)
        name_children(self.layers)

    @property
    def sublayers(self) -> list[Layer]:
        return unique(self.layers)

    def call(self, x: ng.Op) -> ng.Op:
        return apply_layers(self, self.layers, x)

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, index: int) -> Layer:
        return self.layers[index]

    def __iter__(self) -> Iterator[Layer]:
        return iter(self.layers)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "layers": [serialize_layer(layer) for layer in self.layers]}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None, memo: dict | None = None):
        configs = child_configs(cls.__name__, config, "layers", ("name", "layers"))
        memo = {} if memo is None else memo
        return cls([deserialize_layer(c, custom_objects, memo) for c in configs], name=config.get("name"))


class BranchNode(Layer):
    """The identity, marking a point of a ``Tree`` that later branches start from.

    Example:
        >>> fork = BranchNode()
        >>> Tree([[Affine(32), fork, Affine(10)], [fork, Affine(2)]])
    """

    def call(self, x: ng.Op) -> ng.Op:
        return x


class _Branches(CompositeLayer):
    """Shared by the containers holding a list of branches (each a list of layers)."""

    def __init__(self, branches: Any, name: str | None = None, allow_empty: bool = True) -> None:
        super().__init__(name)
        if not isinstance(branches, (list, tuple)) or len(branches) == 0:
            raise layer_error(self, "a non-empty list of branches (each a list of layers)", repr(branches),
                              "e.g. [[Affine(10)], []] (an empty branch is the identity)")
        self.branches = [flatten_layers(describe(self), b) for b in branches]
        name_children(layer for b in self.branches for layer in b)
        if not allow_empty and any(len(b) == 0 for b in self.branches):
            raise layer_error(self, "branches with at least one layer", "an empty branch",
                              "an empty branch is allowed in MergeSum and MergeBroadcast only")

    @property
    def sublayers(self) -> list[Layer]:
        return unique([layer for b in self.branches for layer in b])

    def _branch_configs(self) -> list[list[dict[str, Any]]]:
        return [[serialize_layer(layer) for layer in b] for b in self.branches]

    @classmethod
    def _branches_from(cls, config: dict[str, Any], custom_objects: dict | None, memo: dict | None,
                       allowed: tuple[str, ...]) -> list:
        branches = child_configs(cls.__name__, config, "branches", ("name", "branches", *allowed), nested=True)
        memo = {} if memo is None else memo
        return [[deserialize_layer(c, custom_objects, memo) for c in b] for b in branches]


class Tree(_Branches):
    """Several outputs from one input: a trunk and branches forking off it (neon's ``Tree``).

    The first branch runs from the input. A later branch runs from the input too, unless
    its first layer is a ``BranchNode`` that an earlier branch passed through: then it
    starts from that node's output (an auxiliary classifier forking off a trunk, as in
    GoogLeNet). Calling a ``Tree`` returns a tuple with one output per branch, so it goes
    last in a model; ``combine(costs)`` weighs one cost per output by ``alphas``.

    Args:
        branches: a list of branches, each a list of layers.
        alphas: one weight per branch for ``combine`` (default all 1).
        name: the layer's name.

    Raises:
        LayerError: an empty branch, a wrong number of alphas; at call, a branch starting at a
            ``BranchNode`` that no earlier branch reached.

    Example:
        >>> fork = BranchNode()
        >>> tree = Tree([[Affine(64, activation="relu"), fork, Affine(10, activation="softmax")],
        ...              [fork, Affine(2, activation="softmax")]], alphas=[1.0, 0.3])
        >>> main, aux = tree(x)
        >>> loss = tree.combine([cost_main, cost_aux])
    """

    def __init__(self, branches: Any, alphas: Sequence[float] | None = None, name: str | None = None) -> None:
        super().__init__(branches, name, allow_empty=False)
        alphas = [1.0] * len(self.branches) if alphas is None else alphas
        if not isinstance(alphas, (list, tuple)) or len(alphas) != len(self.branches) or not all(
                isinstance(a, (int, float)) and not isinstance(a, bool) for a in alphas):
            raise layer_error(self, f"{len(self.branches)} numbers as alphas (one per branch)", repr(alphas),
                              "leave alphas out to weigh every branch 1")
        self.alphas = [float(a) for a in alphas]

    def call(self, x: ng.Op) -> tuple[ng.Op, ...]:
        reached: dict[int, ng.Op] = {}
        outputs = []
        for i, branch in enumerate(self.branches):
            h, layers = x, branch
            if i > 0 and isinstance(branch[0], BranchNode):
                if id(branch[0]) not in reached:
                    raise layer_error(self, f"branch {i} to start at a BranchNode an earlier branch passed through",
                                      f"{describe(branch[0])}, not in an earlier branch",
                                      "put the BranchNode in the trunk (branch 0) before using it as a start")
                h, layers = reached[id(branch[0])], branch[1:]
            for layer in layers:
                h = apply_layers(self, [layer], h)
                if isinstance(layer, BranchNode):
                    reached[id(layer)] = h
            outputs.append(h)
        return tuple(outputs)

    def combine(self, costs: Sequence[Any]) -> ng.Op:
        """``sum(alpha_i * cost_i)``: one scalar to minimise from one cost per branch output."""
        if len(costs) != len(self.alphas):
            raise layer_error(self, f"{len(self.alphas)} costs (one per branch)", f"{len(costs)} costs",
                              "compute one cost per output of the tree")
        total = None
        for alpha, cost in zip(self.alphas, costs):
            term = ng.as_op(cost, where="Tree.combine") * alpha
            total = term if total is None else total + term
        return total

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "branches": self._branch_configs(), "alphas": list(self.alphas)}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None, memo: dict | None = None):
        return cls(cls._branches_from(config, custom_objects, memo, ("alphas",)), alphas=config.get("alphas"),
                   name=config.get("name"))


def axis_renames(owner: Layer, axes: ng.Axes, template: ng.Axes, index: int) -> dict[ng.Axis, ng.Axis]:
    """How to rename ``axes`` (a branch output's) to match ``template`` (branch 0's); see the module docstring."""
    axes, template = ng.make_axes(axes), ng.make_axes(template)
    if axes.same_set(template):
        return {}
    special = ng.make_axes(a for a in axes if a.is_batch or a.is_recurrent)
    mine, theirs = axes - special, ng.make_axes(a for a in template if not (a.is_batch or a.is_recurrent))
    if special.same_set(template - theirs) and mine.lengths == theirs.lengths:
        return dict(zip(mine, theirs))
    raise layer_error(owner, f"branch {index}'s output to match branch 0's axes {fmt_axes(template)}", fmt_axes(axes),
                      "branch outputs need the same axes, or the same number of feature axes with the same "
                      "lengths (they are renamed to branch 0's); e.g. end each branch with Affine(nout) of one nout")


def rename(x: ng.Op, renames: dict[ng.Axis, ng.Axis]) -> ng.Op:
    """``x`` with the axes in ``renames`` renamed (same order, same lengths)."""
    return ng.cast_axes(x, [renames.get(a, a) for a in x.axes]) if renames else x


class MergeBroadcast(_Branches):
    """Feeds one input to every branch and merges their outputs by ``"concat"`` or ``"sum"``.

    ``"sum"``: the outputs are conformed to branch 0's axes and added. ``"concat"``: each
    output's first feature axis (the feature/channel axis) is renamed to one axis named
    after this layer, the other axes are conformed to branch 0's, and the outputs are
    concatenated along it: ``[A:3, N]`` and ``[B:5, N]`` give ``[<name>:8, N]``. An empty
    branch is the identity.

    Args:
        branches: a list of branches, each a list of layers (``[]``: the identity).
        merge: ``"concat"`` or ``"sum"``.
        name: the layer's name.

    Raises:
        LayerError: an unknown merge; at call, branch outputs that cannot be conformed.

    Example:
        >>> inception = MergeBroadcast([[Affine(16)], [Affine(8), Affine(8)]], merge="concat")
        >>> h = inception(x)  # [MergeBroadcast_0:24, N]
    """

    def __init__(self, branches: Any, merge: str = "concat", name: str | None = None) -> None:
        super().__init__(branches, name)
        if merge not in ("concat", "sum"):
            raise layer_error(self, "merge to be 'concat' or 'sum'", repr(merge), "e.g. merge='concat'")
        self.merge = merge

    def call(self, x: ng.Op) -> ng.Op:
        outputs = [apply_layers(self, branch, x) for branch in self.branches]
        if len(outputs) == 1:
            return outputs[0]
        return self._sum(outputs) if self.merge == "sum" else self._concat(outputs)

    def _sum(self, outputs: list[ng.Op]) -> ng.Op:
        template = outputs[0].axes
        total = outputs[0]
        for i, out in enumerate(outputs[1:], start=1):
            total = total + rename(out, axis_renames(self, out.axes, template, i))
        return total

    def _concat(self, outputs: list[ng.Op]) -> ng.Op:
        joined, rest0 = [], None
        for i, out in enumerate(outputs):
            found = feature_axes(out)
            if len(found) == 0:
                raise layer_error(self, f"branch {i}'s output to have a feature axis to concatenate along",
                                  fmt_axes(out.axes), "concat joins outputs along their first feature axis")
            axis, rest = found[0], out.axes - found[:1]
            if rest.find(self.name) is not None:
                raise layer_error(self, f"branch {i}'s output without an axis named {self.name!r}",
                                  fmt_axes(out.axes), "give the MergeBroadcast another name")
            rest0 = rest if rest0 is None else rest0
            renames = axis_renames(self, rest, rest0, i)
            renames[axis] = ng.make_axis(axis.length, name=self.name)
            joined.append(rename(out, renames))
        return ng.concat_along_axis(joined, self.name)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "branches": self._branch_configs(), "merge": self.merge}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None, memo: dict | None = None):
        return cls(cls._branches_from(config, custom_objects, memo, ("merge",)), merge=config.get("merge", "concat"),
                   name=config.get("name"))


class MergeSum(MergeBroadcast):
    """A residual block: the sum of its branches' outputs on one input (``[]`` is the identity).

    Outputs are conformed to branch 0's axes (see the module docstring), so
    ``MergeSum([[Affine(64, activation="relu"), Affine(64)], []])`` on ``[F:64, N]``
    gives ``[<branch 0's output axis>:64, N]``.

    Example:
        >>> residual = MergeSum([[Affine(64, activation="relu"), Affine(64)], []])
        >>> h = residual(x)
    """

    def __init__(self, branches: Any, name: str | None = None) -> None:
        super().__init__(branches, merge="sum", name=name)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "branches": self._branch_configs()}

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None, memo: dict | None = None):
        return cls(cls._branches_from(config, custom_objects, memo, ()), name=config.get("name"))


__all__ = ["Sequential", "Tree", "BranchNode", "MergeBroadcast", "MergeSum", "flatten_layers"]
