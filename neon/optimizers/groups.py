"""Parameter groups: hyper-parameters per selector, and per-variable rate attributes.

Every optimizer takes ``groups={"<selector>": {"lr": ..., "<hyper-parameter>": ...}}``:

* a variable takes the *first* group (in dict order) whose selection holds it — the
  selector is evaluated with ``ng.select`` over the cost graph the optimizer is applied to
  (``optimizer(cost, variables)``), so structural queries (``"Conv > Pool variable"``)
  work — else the optimizer's own hyper-parameters;
* a group sets ``lr`` and any per-variable hyper-parameter of its rule (``wdecay``,
  ``momentum_coef``, ``beta_1``...; ``group_hyperparameters`` lists them); what it leaves
  out is the optimizer's. Clipping is global (over all the optimizer's variables), the
  schedule is the optimizer's: a group's rate at an epoch is ``lr * schedule factor``, the
  factor being the base rate's at that epoch over the base rate;
* a selector that holds none of the optimizer's variables warns (``UserWarning``).

Independently of groups, two metadata attributes on a variable (set with
``Selection.set``, e.g. ``model.select("Conv variable").set(lr_scale=0.1)``) apply last:
``lr_scale`` multiplies the variable's learning rate (its group's, or the base one), and
``weight_decay`` replaces the L2 decay for that variable.

Example:
    >>> opt = Adam(1e-3, groups={"Conv variable": {"lr": 1e-4}, ".bias": {"wdecay": 0.0}})
    >>> update = opt(cost, model.variables)  # conv weights step at 1e-4, biases without decay
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import ngraph_core as ng

# constructor arguments that are the optimizer's as a whole, never a group's
OPTIMIZER_WIDE = ("learning_rate", "schedule", "name", "groups", "gradient_clip_norm", "gradient_clip_value")
RATE_ATTRS = ("lr_scale", "weight_decay")


def group_hyperparameters(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The names a group may set, given the optimizer's ``get_config()``: ``lr`` and the per-variable ones.

    Example:
        >>> group_hyperparameters(GradientDescentMomentum(0.1).get_config())
        ('lr', 'wdecay', 'momentum_coef', 'nesterov')
    """
    return ("lr", *(key for key in config if key not in OPTIMIZER_WIDE))


def check_groups(who: str, groups: Any, valid: Sequence[str], error: type[Exception]) -> dict[str, dict[str, Any]]:
    """``groups`` as a plain ``{selector: {name: value}}`` dict, or raise ``error`` saying what is wrong.

    Each selector is parsed now (``ng.select`` over no ops), so a malformed one fails where
    the optimizer is made, with ``SelectorError`` pointing at the column.

    Args:
        who: the optimizer named in errors.
        groups: the ``groups=`` argument (None: no groups).
        valid: the hyper-parameter names a group may set (``group_hyperparameters``).
        error: the exception class for a malformed argument (``OptimizerError``).

    Returns:
        a copy of ``groups`` (``{}`` for None).

    Raises:
        error: not a dict of str -> dict, or a group setting a name not in ``valid``.
        SelectorError: a malformed selector.
    """
    if groups is None:
        return {}
    if not isinstance(groups, Mapping):
        raise error(f"{who}: expected groups to be a dict {{selector: {{hyper-parameter: value}}}}, received "
                    f"{type(groups).__name__}; hint: groups={{'Conv variable': {{'lr': 1e-4}}}}")
    checked: dict[str, dict[str, Any]] = {}
    for selector, overrides in groups.items():
        if not isinstance(selector, str) or not selector.strip():
            raise error(f"{who}: expected each group key to be a selector string, received {selector!r}; "
                        "hint: groups={'Conv variable': {'lr': 1e-4}}")
        if not isinstance(overrides, Mapping):
            raise error(f"{who}: expected group {selector!r} to map hyper-parameter names to values, received "
                        f"{type(overrides).__name__}; hint: {{'lr': 1e-4}}")
        unknown = sorted(str(name) for name in overrides if name not in valid)
        if unknown:
            raise error(f"{who}: parameter group {selector!r}: expected hyper-parameter names among "
                        f"{', '.join(valid)}, received {', '.join(unknown)}; hint: clipping and the schedule are "
                        "the optimizer's as a whole, not a group's")
        ng.select((), selector)  # parse it now: a malformed selector fails here, pointing at the column
        checked[selector] = dict(overrides)
    return checked


def assign_groups(who: str, selectors: Sequence[str], source: Any, variables: Sequence[ng.Op]) -> list[int | None]:
    """Per variable, the index of the first selector whose selection over ``source`` holds it (None: none).

    Args:
        who: the optimizer named in warnings.
        selectors: the group keys, in order.
        source: what to select over (the cost op, or the gradient ops).
        variables: the variables being updated.

    Returns:
        one entry per variable.

    Warns:
        UserWarning: a selector that holds none of ``variables``.

    Example:
        >>> assign_groups("Adam", ["Conv variable"], cost, [conv_W, affine_W])
        [0, None]
    """
    owner: dict[int, int] = {}
    wanted = {id(v) for v in variables}
    for index, selector in enumerate(selectors):
        held = [v for v in ng.select(source, selector).variables if id(v) in wanted]
        if not held:
            warnings.warn(f"{who}: the parameter group {selector!r} selects none of the {len(variables)} variables "
                          "it updates, so it changes nothing; hint: check the selector with "
                          f"model.select({selector!r}).names", UserWarning, stacklevel=2)
        for var in held:
            owner.setdefault(id(var), index)
    return [owner.get(id(v)) for v in variables]


def rate_attrs(var: ng.Op, who: str, error: type[Exception]) -> tuple[float, float | None]:
    """``var``'s ``lr_scale`` (default 1) and ``weight_decay`` (None: not set) metadata attributes.

    Raises:
        error: an attribute that is not a finite number >= 0.

    Example:
        >>> ng.update_meta(W, attrs={"lr_scale": 0.1}); rate_attrs(W, "Adam", OptimizerError)
        (0.1, None)
    """
    values: list[float | None] = []
    for key, default in (("lr_scale", 1.0), ("weight_decay", None)):
        value = var.meta.attrs.get(key, default)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0):
            path = "/".join([*(e.name for e in var.meta.scope), str(var.name)])
            raise error(f"{who}: expected the {key} attribute of variable {path} to be a finite number >= 0, "
                        f"received {value!r}; hint: model.select(...).set({key}=0.1), or {key}=None to clear it")
        values.append(None if value is None else float(value))
    return values[0], values[1]  # type: ignore[return-value]  # lr_scale has a default


def rate_signature(variables: Iterable[ng.Op]) -> Hashable:
    """What the optimizer reads from the variables' attributes (``lr_scale``, ``weight_decay``), as a hashable
    value: a training graph built for one signature is out of date under another.

    Example:
        >>> cache = ComputationCache(lambda: (trainable_set(vs), rate_signature(vs)))
    """
    return frozenset((id(v), key, v.meta.attrs[key]) for v in variables for key in RATE_ATTRS
                     if key in v.meta.attrs and isinstance(v.meta.attrs[key], Hashable))
