"""Finding neon objects by name: subclasses by class name, and ``get``-style lookups.

Activations, initializers and layers are found from a name (``"relu"``, ``"GlorotUniform"``)
or a ``{"class_name", "config"}`` dict; this module holds that logic once.
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
