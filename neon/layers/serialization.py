"""Layer configs as plain data: ``serialize_layer`` / ``deserialize_layer``.

A serialized layer is ``{"class_name": "Affine", "config": layer.get_config()}``;
containers nest these for their children. Deserializing looks the class up among the
subclasses of ``Layer`` (so user-defined layers work once their module is imported),
or in ``custom_objects``.

One layer object may appear several times in a model (weights shared, a ``BranchNode``
used by two branches of a ``Tree``). Its config then appears several times with the
same class and name; ``deserialize_layer`` given one ``memo`` dict builds it once, so
sharing survives the round trip. Generated names (``Affine_0``) are relative to the parent, so
they are remembered per container (two containers may each have an ``Affine_0``); names users
gave are remembered across the whole model.

Configs are untrusted data (a model file may be hand-edited or hostile), so decoding is
bounded and total: the outermost call first walks the data without recursion and refuses
nesting deeper than ``MAX_CONFIG_DEPTH`` or more than ``MAX_CONFIG_ITEMS`` values (a cycle
counts as too deep), and whatever a class's ``from_config`` raises on a bad config becomes a
``LayerError`` — never a ``TypeError``, ``KeyError`` or ``RecursionError``.

Example:
    >>> cfg = serialize_layer(Affine(10, name="fc"))
    >>> clone = deserialize_layer(cfg)
"""

from __future__ import annotations

import contextvars
import copy
import inspect
import reprlib
from typing import Any

import ngraph_core as ng

from ..registry import subclasses
from .base import Layer, LayerError, is_generated_name

_LOCAL = "__generated_names_of_this_container__"  # the memo entry holding one container's generated names
MAX_CONFIG_DEPTH = 100  # nested lists and dicts; each nested container takes ~3 levels
MAX_CONFIG_ITEMS = 1_000_000  # values in one config, all levels together
_HINT = "hint: pass what serialize_layer (or a container's get_config) produced"
_inside: contextvars.ContextVar[bool] = contextvars.ContextVar("deserialize_layer_inside", default=False)
_short = reprlib.Repr()  # Python 3.11's Repr takes no keyword arguments
_short.maxlevel, _short.maxdict, _short.maxlist, _short.maxstring, _short.maxother = 3, 6, 6, 60, 60


def short_repr(value: Any) -> str:
    """``repr(value)`` cut short at every level: bounded in time and length, whatever the value."""
    return _short.repr(value)


def check_plain_data(data: Any, where: str, max_depth: int = MAX_CONFIG_DEPTH,
                     max_items: int = MAX_CONFIG_ITEMS) -> None:
    """Refuse data nesting deeper than ``max_depth`` or holding more than ``max_items`` values.

    An explicit stack, not recursion, so hostile data (a million levels, a cycle) is refused
    in time linear in ``max_items`` and never raises ``RecursionError``.

    Raises:
        LayerError: too deep (a cyclic structure is infinitely deep) or too many values.
    """
    stack, count = [(data, 1)], 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if depth > max_depth or count > max_items:
            what = f"nesting at most {max_depth} deep" if depth > max_depth else f"at most {max_items} values"
            raise LayerError(f"{where}: expected a config {what}, received more; {_HINT} (a config that refers to "
                             "itself is infinitely deep)")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)


def layer_classes() -> dict[str, type[Layer]]:
    """Every ``Layer`` subclass by class name (neon's own win a name clash)."""
    return subclasses(Layer)


def serialize_layer(layer: Layer) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` for ``layer``."""
    if not isinstance(layer, Layer):
        raise LayerError(f"serialize_layer: expected a neon Layer, received {type(layer).__name__}")
    return {"class_name": type(layer).__name__, "config": layer.get_config()}


def _check_arguments(data: Any, custom_objects: Any, memo: Any) -> None:
    if not isinstance(data, dict) or not isinstance(data.get("class_name"), str) or not isinstance(
            data.get("config", {}), dict) or set(data) - {"class_name", "config"}:
        raise LayerError(f"deserialize_layer: expected {{'class_name': str, 'config': {{...}}}}, received: "
                         f"{short_repr(data)}; {_HINT}")
    if custom_objects is not None and not (isinstance(custom_objects, dict) and all(
            isinstance(k, str) and isinstance(v, type) for k, v in custom_objects.items())):
        raise LayerError(f"deserialize_layer: expected custom_objects as {{name: class}}, received "
                         f"{short_repr(custom_objects)}; hint: e.g. custom_objects={{'MyLayer': MyLayer}}")
    if memo is not None and not isinstance(memo, dict):
        raise LayerError(f"deserialize_layer: expected memo as a dict or None, received {type(memo).__name__}")
    name = data.get("config", {}).get("name")
    if name is not None and not isinstance(name, str):
        raise LayerError(f"deserialize_layer: expected a {data['class_name']} config whose name is a string or null, "
                         f"received name {short_repr(name)}; {_HINT}")


def deserialize_layer(data: dict[str, Any], custom_objects: dict[str, type[Layer]] | None = None,
                      memo: dict[tuple[str, str], Layer] | None = None) -> Layer:
    """A new, unbuilt layer from ``serialize_layer``'s output.

    Args:
        data: ``{"class_name": ..., "config": ...}``.
        custom_objects: extra classes by name (they win over the ``Layer`` subclasses).
        memo: ``(class_name, name) -> layer`` shared across one model's configs, so a layer
            that appears twice is built once.

    Returns:
        the layer (containers with their children built from their configs).

    Raises:
        LayerError: malformed data, an unknown class name, a config its class refuses, or
            data nested deeper than ``MAX_CONFIG_DEPTH`` or larger than ``MAX_CONFIG_ITEMS``.

    Example:
        >>> clone = deserialize_layer({"class_name": "Affine", "config": {"nout": 10, "name": "fc"}})
    """
    if _inside.get():
        return _deserialize(data, custom_objects, memo)
    check_plain_data(data, "deserialize_layer")  # once, at the outermost call: children are part of it
    token = _inside.set(True)
    try:
        return _deserialize(data, custom_objects, memo)
    finally:
        _inside.reset(token)


def _deserialize(data: Any, custom_objects: dict[str, type[Layer]] | None, memo: dict | None) -> Layer:
    _check_arguments(data, custom_objects, memo)
    name = data["class_name"]
    classes = {**layer_classes(), **(custom_objects or {})}
    cls = classes.get(name)
    if cls is None:
        raise LayerError(
            f"deserialize_layer: expected a known layer class, received: {short_repr(name)}; "
            "hint: import the module that defines it, or pass custom_objects={name: cls}"
        )
    config = copy.deepcopy(data.get("config", {}))
    key = (name, config.get("name"))
    store = memo
    if memo is not None and isinstance(key[1], str) and is_generated_name(name, key[1]):
        store = memo.setdefault(_LOCAL, {})
    if store is not None and key[1] is not None and key in store:
        return store[key]
    # containers take the context along to build their children; plain layers take the config only
    try:
        if "memo" in inspect.signature(cls.from_config).parameters:
            inner = None if memo is None else {**{k: v for k, v in memo.items() if k != _LOCAL}, _LOCAL: {}}
            layer = cls.from_config(config, custom_objects=custom_objects, memo=inner)
            if memo is not None and inner is not None:  # user-named layers built inside are shared model-wide
                memo.update({k: v for k, v in inner.items() if k != _LOCAL})
        else:
            layer = cls.from_config(config)
    except ng.NgraphError:
        raise
    except Exception as exc:  # a hand-edited config can make a constructor raise anything
        raise LayerError(
            f"deserialize_layer: expected a valid {name} config, received {short_repr(config)}: "
            f"{type(exc).__name__}: {str(exc)[:200]}; {_HINT}"
        ) from exc
    if not isinstance(layer, Layer):
        raise LayerError(f"deserialize_layer: expected {name}.from_config to return a Layer, received "
                         f"{type(layer).__name__}; hint: from_config must return an instance of the class")
    if store is not None and key[1] is not None:
        store[key] = layer
    return layer
