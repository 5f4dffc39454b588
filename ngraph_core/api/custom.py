"""User-defined gradients: ``ng.custom_gradient`` and the registry autodiff reads.

The forward value is an ordinary subgraph; a ``custom_gradient`` op wraps it with
the inputs the gradient goes to. The gradient function is kept in a registry by
name (serialized graphs store the name), so a deserialized graph finds it again
once the module defining it is imported. The decorator lives with the API (it
builds an op, and ``batch_norm`` uses it); autodiff looks functions up with
``registered_gradient`` and never the other way round.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import NgraphError
from ..ir import Op, OpType, make

Builder = Callable[..., tuple[Op, Callable[[Op], Sequence[Op | None]]]]

_REGISTRY: dict[str, Builder] = {}


def registered_gradient(name: str) -> Builder | None:
    """The function registered under ``name`` by ``custom_gradient``, or None.

    Args:
        name: the registry key (a ``custom_gradient`` op's ``arg``).

    Returns:
        the decorated ``fn(*inputs) -> (value, grad)``, or None when no module registered it.

    Example:
        >>> registered_gradient("ngraph_core.batch_norm_training")  # the training batch norm builder
    """
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

    Args:
        fn: the function to decorate (omitted when called as ``@custom_gradient(name=...)``).
        name: the registry key; default ``module.qualname`` of ``fn``.

    Returns:
        a function of the same inputs returning the ``custom_gradient`` op (or, without
        ``fn``, a decorator).

    Raises:
        NgraphError: (when the decorated function is called) an input that is not an op.

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
                raise NgraphError(
                    f"custom_gradient {key}: expected ops as inputs, received {type(x).__name__}; "
                    "hint: wrap arrays and numbers with ng.constant"
                )
        value, _ = fn(*inputs)
        return make(OpType.CUSTOM_GRADIENT, [value, *inputs], arg=key)

    return wrapper
