"""Finding neon objects by name: subclasses by class name, and ``get``-style lookups.

Activations, initializers and layers are found from a name (``"relu"``, ``"GlorotUniform"``)
or a ``{"class_name", "config"}`` dict; this module holds that logic once. Model classes
(``Model``'s siblings: ``GAN``, ``DQNAgent``, the character models) register themselves under the
name their checkpoints record, so ``neon.load_model`` can rebuild any file the project writes;
``Model`` itself, whose files' first record is a layer config, registers as the layers model
(``layers_model_class``), so ``neon.saving`` rebuilds every model class without importing one.
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def subclasses(base: type[T]) -> dict[str, type[T]]:
    """Every subclass of ``base`` (at any depth) by class name; neon's own win a name clash."""
    found: dict[str, type[T]] = {}
    stack: list[type[T]] = [base]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            known = found.get(sub.__name__)
            if known is None or (not known.__module__.startswith("neon.") and sub.__module__.startswith("neon.")):
                found[sub.__name__] = sub
    return found


def lookup(identifier: Any, base: type[T], aliases: dict[str, type[T]], error: type[Exception], where: str,
           what: str, hint: str) -> T:
    """An instance of ``base`` from an instance, a name (a class name or a case-insensitive alias)
    or a ``{"class_name", "config"}`` dict; raises ``error`` naming ``where`` otherwise."""
    if isinstance(identifier, base):
        return identifier
    classes = subclasses(base)
    if isinstance(identifier, str):
        cls = classes.get(identifier) or aliases.get(identifier.lower())
        if cls is None:
            raise error(f"{where}: unknown {what} {identifier!r}; expected one of {sorted(aliases)} "
                        f"or a class name among {sorted(classes)}")
        return cls()
    if isinstance(identifier, dict) and "class_name" in identifier:
        cls = classes.get(identifier["class_name"])
        if cls is None:
            raise error(
                f"{where}: unknown {what} class {identifier['class_name']!r}; expected one of {sorted(classes)}"
            )
        return cls.from_config(dict(identifier.get("config", {})))  # type: ignore[attr-defined]
    raise error(f"{where}: expected {hint}, received {identifier!r}")


# -- model classes --------------------------------------------------------------------------------
# Every class that can rebuild itself from its checkpoint record (``TrainingOwner.from_record``)
# registers here when its module is imported (``TrainingOwner.__init_subclass__``), under the
# ``class_name`` its ``save_params`` writes; ``neon.load_model`` looks a file's record up here.
_MODEL_CLASSES: dict[str, type] = {}

# where the project's own model classes are defined: imported (a fixed list, never a name read
# from a file) when a record names a class not registered yet, so any file the project writes loads
MODEL_MODULES = ("neon.gan", "neon.rl.dqn", "model_zoo.char_seq2seq", "model_zoo.char_lm",
                 "model_zoo.char_transformer")


def register_model_class(cls: type[T], name: str | None = None) -> type[T]:
    """Register ``cls`` as the class that rebuilds checkpoints whose model record is ``name`` (its class name).

    A later class of the same name replaces an earlier one (a module reloaded), except that a
    user's class never replaces one of neon's or model_zoo's.

    Example:
        >>> register_model_class(MyAgent)   # TrainingOwner subclasses with a from_record do this themselves
    """
    key = name or cls.__name__
    known = _MODEL_CLASSES.get(key)
    ours = ("neon.", "model_zoo.")
    if known is None or not known.__module__.startswith(ours) or cls.__module__.startswith(ours):
        _MODEL_CLASSES[key] = cls
    return cls


def model_class(name: str) -> type | None:
    """The registered model class for a checkpoint record's ``class_name``, or None.

    The project's own model modules (``MODEL_MODULES``) are imported on the first miss, so
    ``neon.load_model`` finds ``GAN``, ``DQNAgent``, ``Seq2Seq`` and ``CharLM`` without the caller
    importing them first.

    Example:
        >>> model_class("GAN")
        <class 'neon.gan.GAN'>
    """
    if name not in _MODEL_CLASSES:
        from importlib import import_module

        for module in MODEL_MODULES:
            try:
                import_module(module)
            except ImportError:  # an optional dependency of one recipe: the others still register
                continue
    return _MODEL_CLASSES.get(name)


def model_classes() -> dict[str, type]:
    """Every registered model class by record name (after importing ``MODEL_MODULES``)."""
    model_class("")
    return dict(_MODEL_CLASSES)


# the class that rebuilds files whose first model record is a layer config: ``neon.model`` registers ``Model``
_LAYERS_MODEL: list[type] = []


def register_layers_model(cls: type[T]) -> type[T]:
    """Register ``cls`` as the class ``neon.load_model`` builds around a file's layers (``Model``).

    Example:
        >>> register_layers_model(Model)   # neon.model does this once
    """
    _LAYERS_MODEL[:] = [cls]
    return cls


def layers_model_class() -> type:
    """The class registered by ``register_layers_model`` (``neon.model.Model``; imported on first use).

    Example:
        >>> layers_model_class()
        <class 'neon.model.Model'>
    """
    if not _LAYERS_MODEL:
        from importlib import import_module

        import_module("neon.model")
    return _LAYERS_MODEL[0]
