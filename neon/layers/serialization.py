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

Example:
    >>> cfg = serialize_layer(Affine(10, name="fc"))
    >>> clone = deserialize_layer(cfg)
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import ngraph_core as ng

from ..registry import subclasses
from .base import Layer, LayerError, is_generated_name

_LOCAL = "__generated_names_of_this_container__"  # the memo entry holding one container's generated names


def layer_classes() -> dict[str, type[Layer]]:
    """Every ``Layer`` subclass by class name (neon's own win a name clash)."""
    return subclasses(Layer)


def serialize_layer(layer: Layer) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` for ``layer``."""
    if not isinstance(layer, Layer):
        raise LayerError(f"serialize_layer: expected a neon Layer, received {type(layer).__name__}")
    return {"class_name": type(layer).__name__, "config": layer.get_config()}


def deserialize_layer(data: dict[str, Any], custom_objects: dict[str, type[Layer]] | None = None,
                      memo: dict[tuple[str, str], Layer] | None = None) -> Layer:
    """A new, unbuilt layer from ``serialize_layer``'s output.

    Args:
        data: ``{"class_name": ..., "config": ...}``.
        custom_objects: extra classes by name (they win over the ``Layer`` subclasses).
        memo: ``(class_name, name) -> layer`` shared across one model's configs, so a layer
            that appears twice is built once.

    Raises:
        LayerError: malformed data or an unknown class name.
    """
    if not isinstance(data, dict) or "class_name" not in data or not isinstance(data.get("config", {}), dict):
        raise LayerError(
            f"deserialize_layer: expected {{'class_name': ..., 'config': {{...}}}}, received: {data!r}; "
            "hint: pass what serialize_layer (or a container's get_config) produced"
        )
    name = data["class_name"]
    classes = {**layer_classes(), **(custom_objects or {})}
    cls = classes.get(name)
    if cls is None:
        raise LayerError(
            f"deserialize_layer: expected a known layer class, received: {name!r}; "
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
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a hand-edited config: one error type
        raise LayerError(
            f"deserialize_layer: expected a valid {name} config, received {config!r}: {exc}; "
            "hint: pass what serialize_layer (or a container's get_config) produced"
        ) from exc
    if store is not None and key[1] is not None:
        store[key] = layer
    return layer
