"""``Layer``: the base every neon layer, container and cost builds on.

A layer is a callable that *builds ngraph ops* (it never computes anything itself):

* ``__init__`` validates and stores the configuration (plain data, see ``get_config``);
* the first call runs ``build(x)``, which creates the layer's variables from the input's
  axes — so calling a layer twice shares its weights;
* every call runs ``call(x)``, which returns the output op.

Both run inside ``ng.name_scope(self.name, kind=<class name>, kinds=<class hierarchy>)``, so
every op records the layer that made it and the classes it derives from (selectors, saving and
optimizer groups read ``meta.scope``; a selector for ``Conv`` matches a subclass of ``Conv``).

**Names are relative to the parent.** A layer built without a name gets a provisional,
process-unique one (``Affine_17``) so that layers used on their own never clash. A container
(and ``Model``/``GAN`` for their top layers) renames its unnamed, unbuilt children
``<Class>_<k>``, ``k`` counting the earlier children of the same class (names users gave are
skipped), so the same architecture gives the same scope paths — and checkpoint keys — however
many models the process built before. A name the user gives always wins; a name of the
generated form (``Affine_0``, as a config round trip passes back) counts as generated.

**Updates are declared.** A layer's side effects (``BatchNorm``'s running averages) are ops
registered with ``add_update``: they carry the label ``update`` and the layer's scope, and
``layer.updates`` collects them over the layer tree; the training loop takes those that read
the graph's own inputs (``neon.training.graph_updates``).

Train vs inference behaviour (Dropout, BatchNorm) is a mode flag read while building:
``Model`` builds its training graph inside ``training_mode(True)`` and its inference
graph inside ``training_mode(False)`` from the same layer objects, so both graphs share
one set of variables — never two models.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import ngraph_core as ng

from ..initializers import Initializer, filling_shapes_only

_training: contextvars.ContextVar[bool] = contextvars.ContextVar("neon_training", default=False)
_counters: defaultdict[str, itertools.count] = defaultdict(itertools.count)


class LayerError(ng.NgraphError, ValueError):
    """A layer was given a configuration or an input it cannot handle."""


@contextmanager
def training_mode(on: bool = True) -> Iterator[None]:
    """Build ops in training mode (Dropout drops, BatchNorm uses batch statistics) or not."""
    token = _training.set(on)
    try:
        yield
    finally:
        _training.reset(token)


def is_training() -> bool:
    """True while building the training graph (see ``training_mode``)."""
    return _training.get()


def auto_name(kind: str) -> str:
    """``Affine_0``, ``Affine_1``...: a process-unique *provisional* name (a parent renames the layer)."""
    return f"{kind}_{next(_counters[kind])}"


def is_generated_name(kind: str, name: str) -> bool:
    """True for names of the generated form ``<kind>_<k>`` (``Affine_3``)."""
    return re.fullmatch(rf"{re.escape(kind)}_\d+", name) is not None


@functools.cache
def class_kinds(cls: type) -> tuple[str, ...]:
    """``cls``'s class hierarchy, most derived first, down to ``Layer`` (``("Conv", "LayerStack", ..., "Layer")``)."""
    kinds: list[str] = []
    for base in cls.__mro__:
        if isinstance(base, type) and issubclass(base, Layer):
            kinds.append(base.__name__)
        if base is Layer:
            break
    return tuple(kinds)


def name_children(children: Iterable[Layer]) -> None:
    """Give unnamed, unbuilt ``children`` (of one parent) names relative to it: ``<Class>_<k>``.

    ``k`` counts the earlier children of the same class; names the user gave are never
    changed nor reused. A layer that appears several times is named once.

    Example:
        >>> a, b = Affine(3), Affine(4)
        >>> name_children([a, b]); (a.name, b.name)
        ('Affine_0', 'Affine_1')
    """
    unique: dict[int, Layer] = {}
    for child in children:
        unique.setdefault(id(child), child)
    taken = {c.name for c in unique.values() if c.explicit_name or c.built}
    counts: defaultdict[str, int] = defaultdict(int)
    for child in unique.values():
        if child.explicit_name or child.built:
            continue
        kind = type(child).__name__
        name = f"{kind}_{counts[kind]}"
        while name in taken:
            counts[kind] += 1
            name = f"{kind}_{counts[kind]}"
        counts[kind] += 1
        taken.add(name)
        child.rename(name)


class Layer:
    """Base class of neon layers.

    Args:
        name: the layer's name (its scope); default ``<Class>_<k>``.

    Example:
        >>> class Scale(Layer):
        ...     def build(self, x):
        ...         self.s = self.add_variable("s", [], 1.0)
        ...     def call(self, x):
        ...         return x * self.s
    """

    def __init__(self, name: str | None = None) -> None:
        if name is not None:
            ng.check_name(name, f"{type(self).__name__} layer name", LayerError)
            if "/" in name:
                raise LayerError(f"{type(self).__name__}: name must be a non-empty str without '/', received {name!r}; "
                                 "hint: '/' separates scope levels in checkpoint keys")
        kind = type(self).__name__
        self.explicit_name = name is not None and not is_generated_name(kind, name)
        self.name = name or auto_name(kind)
        self.built = False
        self._variables: dict[str, ng.Op] = {}
        self._updates: list[ng.Op] = []

    # -- the protocol subclasses implement -------------------------------------------------------
    def build(self, x: ng.Op) -> None:
        """Create the layer's variables from the first input (default: none)."""

    def call(self, x: ng.Op) -> ng.Op:
        """The ops computing the layer's output from ``x``."""
        raise NotImplementedError(f"{type(self).__name__} must implement call(x)")

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments as plain data; ``type(layer).from_config(cfg)`` rebuilds it."""
        return {"name": self.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Layer:
        """A new, unbuilt layer from ``get_config()``'s output."""
        return cls(**config)

    # -- what the base provides ------------------------------------------------------------------
    def __call__(self, x: ng.Op) -> ng.Op:
        if not isinstance(x, ng.Op):
            raise LayerError(
                f"{self.name}: expected an ngraph op as input, received {type(x).__name__}; "
                "hint: feed data through ng.placeholder (Model does this for you)"
            )
        with ng.name_scope(self.name, kind=type(self).__name__, kinds=class_kinds(type(self))):
            if not self.built:
                self.build(x)
                self.built = True
            return self.call(x)

    def add_variable(self, name: str, axes: Any, init: Any, trainable: bool = True,
                     labels: tuple[str, ...] = ()) -> ng.Op:
        """Create a variable of this layer (``init``: an initializer, a number or an array).

        Inside ``neon.initializers.shapes_only()`` the variable gets the scalar 0 as its initial
        value whatever ``init`` is, so nothing of its size is allocated.
        """
        axes = ng.make_axes(axes)
        initial_value: Any = init
        if filling_shapes_only():  # a build for the shapes alone: the caller writes every value (load_model)
            initial_value = 0.0
        elif isinstance(init, Initializer):
            # filled now, at build time: the weights then depend only on the order layers are
            # built (set_seed, then build, reproduces them) and every transformer sees the same ones
            initial_value = np.asarray(init.fill(axes.lengths))
        var = ng.variable(axes, initial_value=initial_value, name=name, trainable=trainable,
                          labels=(name, *labels))
        self._variables[name] = var
        return var

    def rename(self, name: str) -> None:
        """Set the layer's (generated) name before it is built; its parent calls it (``name_children``).

        Raises:
            LayerError: the layer is built already (its ops recorded the old name).
        """
        if self.built:
            raise LayerError(f"{self.name} ({type(self).__name__}): expected an unbuilt layer to rename, received "
                             "a built one; hint: name layers before calling them")
        self.name = ng.check_name(name, f"{type(self).__name__} layer name", LayerError)

    def add_update(self, op: ng.Op) -> None:
        """Declare a side effect the training step must run (e.g. BatchNorm's running averages).

        The op gets the label ``update`` (it already carries this layer's scope when built in
        ``call``); ``updates`` lists it, and the training loop runs those of its graph.
        """
        if not any(op is u for u in self._updates):
            self._updates.append(op.labeled("update"))

    @property
    def updates(self) -> list[ng.Op]:
        """Side effects declared while building in training mode (containers add their children's)."""
        return list(self._updates)

    @property
    def variables(self) -> list[ng.Op]:
        """The layer's own variables (containers add their children's)."""
        return list(self._variables.values())

    @property
    def trainable_variables(self) -> list[ng.Op]:
        return [v for v in self.variables if "trainable" in v.meta.labels]

    def __repr__(self) -> str:
        config = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "name")
        return f"{type(self).__name__}({config})"

