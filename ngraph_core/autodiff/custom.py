"""User-defined gradients: ``ng.custom_gradient``.

The forward value is an ordinary subgraph; a ``custom_gradient`` op wraps it with
the inputs the gradient goes to. The gradient function is kept in a registry by
name (serialized graphs store the name), so a deserialized graph finds it again
once the module defining it is imported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import NgraphError, UnsupportedOpError
from ..ir import Op, OpType, make

Builder = Callable[..., tuple[Op, Callable[[Op], Sequence[Op | None]]]]

_REGISTRY: dict[str, Builder] = {}


def registered_gradient(name: str) -> Builder | None:
    """The function registered under ``name`` by ``custom_gradient``, or None."""
    return _REGISTRY.get(name)


def custom_gradient(fn: Builder | None = None, *, name: str | None = None) -> Any:
    """Decorate ``fn(*inputs) -> (value, grad)`` so its gradient is ``grad(ctx) -> [one per input]``.

    ``grad`` receives the upstream gradient (with the value's axes) and returns one
    gradient per input (None: no gradient); nothing flows through the forward
    subgraph itself. The decorated function is registered under ``name`` (default:
    its module and qualified name); the op stores that name, so a deserialized
    graph is differentiable once the defining module is imported. Autodiff calls
    ``fn`` again on the same inputs to get ``grad`` (hash-consing makes the rebuilt
    forward ops the same objects).

    Example:
        >>> @custom_gradient
        ... def clip_grad(x):
        ...     return x * 1.0, lambda ctx: [ng.minimum(ng.maximum(ctx, -1.0), 1.0)]
    """
    if fn is None:
        return functools.partial(custom_gradient, name=name)
    key = name or f"{fn.__module__}.{fn.__qualname__}"
    _REGISTRY[key] = fn

    @functools.wraps(fn)
    def wrapper(*inputs: Op) -> Op:
        for x in inputs:
            if not isinstance(x, Op):
                raise NgraphError(f"custom_gradient {key}: inputs must be ops, received {type(x).__name__}")
        value, _ = fn(*inputs)
        return make(OpType.CUSTOM_GRADIENT, [value, *inputs], arg=key)

    return wrapper


def custom_rule(ctx: Op, op: Op) -> tuple[Op | None, ...]:
    """The autodiff rule of ``custom_gradient`` ops: rebuild ``grad`` and call it."""
    fn = _REGISTRY.get(op.arg)
    if fn is None:
        raise UnsupportedOpError(
            f"custom_gradient {op.arg!r}: no function is registered under this name; "
            "hint: import the module that defines it before differentiating a deserialized graph"
        )
    inputs = op.src[1:]
    _, grad = fn(*inputs)
    grads = list(grad(ctx))
    if len(grads) != len(inputs):
        raise NgraphError(
            f"custom_gradient {op.arg!r}: expected {len(inputs)} gradient(s), one per input, received {len(grads)}"
        )
    return (None, *grads)
