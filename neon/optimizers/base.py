"""``Optimizer``: the base every update rule builds on, and the checks on hyper-parameters.

An optimizer *builds ops*: ``optimizer(cost, variables)`` returns ONE op (an
``ng.doall`` of assignments) that performs one training step on ``variables``.
Compile it with the cost (``t.computation([cost, update], X, Y)``) and every call
of the computation takes one step.

* Gradients come from ``ng.gradients(cost, variables)`` (one backward graph).
* Only variables labelled ``trainable`` and not ``frozen`` are updated.
* Gradients are clipped element-wise (``gradient_clip_value``), then by their global
  norm over all the optimizer's variables (``gradient_clip_norm``), then weight decay
  adds ``wdecay * W`` (L2 regularisation, as neon and PyTorch's ``weight_decay``).
* State (velocities, moments, the step count ``t``) lives in variables labelled
  ``optimizer_state`` and named ``<variable path>/<slot>``, created when the optimizer is
  bound to its variables (``optimizer.build(variables)``: ``Model.fit`` and ``GAN`` do it
  once the model is built, before any step), so a checkpoint's state can be written at
  once; they are listed by ``optimizer.state_variables``. Calling the optimizer on
  variables it was not built for creates their state then.
* The learning rate lives in a scalar variable (``optimizer.lr_variable``, label
  ``learning_rate``) that ``Model`` writes before each epoch with
  ``learning_rate_at(epoch)`` — changing the rate never recompiles the graph.
* Parameter groups (``groups={"<selector>": {"lr": ..., ...}}``, every optimizer) and the
  ``lr_scale``/``weight_decay`` attributes of variables set hyper-parameters per variable
  (``neon/optimizers/groups.py``). A group's rule is a copy of the optimizer with the
  group's values, sharing its state and step count, so state names do not depend on groups;
  a group that sets ``lr`` gets its own learning-rate variable (``<name>/group_<i>/learning_rate``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import ngraph_core as ng

from .checks import OptimizerError, check_number
from .groups import assign_groups, check_groups, group_hyperparameters, rate_attrs
from .schedules import schedule_from_config, schedule_to_config

OPTIMIZERS: dict[str, type[Optimizer]] = {}


def variable_path(var: ng.Op) -> str:
    """``Affine_0/W``: the variable's scope path and name, the stem of its state's names."""
    return "/".join([*(entry.name for entry in var.meta.scope), var.name])


def select_trainable(variables: Iterable[ng.Op], who: str = "optimizer") -> list[ng.Op]:
    """The variables labelled ``trainable`` and not ``frozen``, once each, in order.

    Raises:
        OptimizerError: an item that is not a variable op.
    """
    chosen: list[ng.Op] = []
    for v in variables:
        if not isinstance(v, ng.Op) or v.op is not ng.OpType.VARIABLE:
            got = v.op.value if isinstance(v, ng.Op) else type(v).__name__
            raise OptimizerError(f"{who}: expected a list of variables, received {got}; "
                                 "hint: pass model or layer .variables")
        if "trainable" in v.meta.labels and "frozen" not in v.meta.labels and v not in chosen:
            chosen.append(v)
    return chosen


def select_candidates(variables: Iterable[ng.Op]) -> list[ng.Op]:
    """The variables an optimizer keeps state for: labelled ``trainable`` or ``frozen`` (frozen ones
    may be unfrozen later, and keep their state and checkpoint keys meanwhile), once each, in order."""
    chosen: list[ng.Op] = []
    for v in variables:
        labels = v.meta.labels if isinstance(v, ng.Op) and v.op is ng.OpType.VARIABLE else frozenset()
        if ("trainable" in labels or "frozen" in labels) and not any(v is c for c in chosen):
            chosen.append(v)
    return chosen


def cost_gradients(cost: Any, variables: Sequence[ng.Op], who: str) -> tuple[list[ng.Op], list[ng.Op]] | None:
    """The gradients of a scalar ``cost`` for the trainable, non-frozen ``variables``, and those variables
    (None when there are none): the first half of every optimizer's ``__call__``.

    Raises:
        OptimizerError: a cost that is not a scalar op, or items that are not variables.
    """
    if not isinstance(cost, ng.Op) or len(cost.axes) != 0:
        got = f"axes {cost.axes}" if isinstance(cost, ng.Op) else type(cost).__name__
        raise OptimizerError(f"{who}: expected a scalar cost op, received {got}; "
                             "hint: costs return the batch mean; reduce with ng.mean")
    chosen = select_trainable(variables, who)
    if not chosen:
        return None
    return ng.gradients(cost, chosen), chosen


class _Grouped(type):
    """Takes every optimizer's keyword ``groups`` and applies it once the most derived ``__init__``
    has run, so the groups are checked against the finished optimizer (its rule's own
    hyper-parameters: ``momentum_coef``, ``beta_1``...) without each subclass passing them on."""

    def __call__(cls, *args: Any, groups: Any = None, **kwargs: Any) -> Any:
        optimizer = super().__call__(*args, **kwargs)
        optimizer.set_groups(groups)
        return optimizer


@dataclass(frozen=True)
class ParamGroup:
    """One parameter group: its selector, the values it sets, its rule and its learning-rate op.

    Attributes:
        selector: the group's key (``"Conv variable"``).
        overrides: the hyper-parameters it sets (``{"lr": 1e-4}``).
        rule: the optimizer with those values (sharing the parent's state and step count).
        lr: the learning rate its variables read (its own variable when it sets ``lr``).
    """

    selector: str
    overrides: dict[str, Any]
    rule: Optimizer
    lr: ng.Op


class Optimizer(metaclass=_Grouped):
    """Base class of the update rules.

    Args:
        learning_rate: the base rate (finite, >= 0).
        wdecay: L2 weight decay; ``wdecay * W`` is added to each gradient.
        gradient_clip_norm: clip the gradients by their global norm (PyTorch's
            ``clip_grad_norm_``): ``g *= min(1, c / (||g|| + 1e-6))``, with ``||g||`` over all
            the variables this optimizer updates.
        gradient_clip_value: clip each gradient element to ``[-c, c]``.
        schedule: a ``Schedule`` (``get_learning_rate(base_lr, epoch)``); default constant.
        name: names the optimizer's scope, its learning-rate variable and step count.
        groups: (keyword, every optimizer) ``{selector: {hyper-parameter: value}}``; a variable
            takes the first group whose ``ng.select`` over the cost graph holds it, else these
            values. A group sets ``lr`` and the rule's per-variable hyper-parameters
            (``wdecay``, ``momentum_coef``...); see ``neon/optimizers/groups.py``. Variables'
            ``lr_scale`` and ``weight_decay`` attributes (``Selection.set``) apply on top.

    Subclasses implement ``build_updates(grads_and_vars, lr) -> list[Op]`` and list the state
    they keep per variable in ``slot_names()`` (and set ``uses_step_count``), so ``build``
    creates it before any step.

    Raises:
        OptimizerError: a negative or non-finite learning rate, decay or clip, a schedule
            that is not a schedule, or a group setting an unknown or out-of-range value.
        SelectorError: a malformed group selector.

    Example:
        >>> opt = GradientDescentMomentum(0.1, momentum_coef=0.9)
        >>> update = opt(cost, model.variables)
        >>> step = t.computation([cost, update], X, Y)
        >>> Adam(1e-3, groups={"Conv variable": {"lr": 1e-4}, ".bias": {"wdecay": 0.0}})
    """

    uses_step_count = False  # True: the rule reads the 1-based step count ``step_count()``
    groups: tuple[ParamGroup, ...] = ()  # set by ``set_groups`` (the ``groups=`` keyword)
    _parent: Optimizer | None = None  # a group's rule: the optimizer whose state and step count it shares

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        OPTIMIZERS[cls.__name__] = cls

    def __init__(self, learning_rate: float, wdecay: float = 0.0, gradient_clip_norm: float | None = None,
                 gradient_clip_value: float | None = None, schedule: Any = None, name: str | None = None) -> None:
        who = type(self).__name__
        self.learning_rate = check_number(who, "learning_rate", learning_rate, 0.0)
        self.wdecay = check_number(who, "wdecay", wdecay, 0.0)
        self.gradient_clip_norm = check_number(who, "gradient_clip_norm", gradient_clip_norm, 0.0, low_open=True,
                                               optional=True)
        self.gradient_clip_value = check_number(who, "gradient_clip_value", gradient_clip_value, 0.0,
                                                low_open=True, optional=True)
        if schedule is not None and not callable(getattr(schedule, "get_learning_rate", None)):
            raise OptimizerError(f"{who}: expected schedule to be a Schedule (with get_learning_rate) or None, "
                                 f"received {type(schedule).__name__}")
        if name is not None and (not isinstance(name, str) or not name):
            raise OptimizerError(f"{who}: expected name to be a non-empty str, received {name!r}")
        self.schedule = schedule
        self.name = name or who
        self.explicit_name = name is not None
        self._state: dict[tuple[ng.Op, str], ng.Op] = {}
        self._t: ng.Op | None = None
        self._step: ng.Op | None = None
        initial = self.learning_rate_at(0)
        self._lr_variable = ng.variable([], initial_value=initial, name=f"{self.name}/learning_rate",
                                        trainable=False, labels=("learning_rate",))

    # -- learning rate ---------------------------------------------------------------------------
    @property
    def lr_variable(self) -> ng.Op:
        """The scalar variable holding the current learning rate (label ``learning_rate``)."""
        return self._lr_variable

    def learning_rate_at(self, epoch: int) -> float:
        """The learning rate for ``epoch`` (0-based) from ``schedule``.

        Raises:
            OptimizerError: the schedule gives a negative or non-finite rate.

        Example:
            >>> t.write_variable(opt.lr_variable, opt.learning_rate_at(epoch))
        """
        if self.schedule is None:
            return self.learning_rate
        rate = self.schedule.get_learning_rate(self.learning_rate, epoch)
        return check_number(f"{type(self).__name__} schedule {type(self.schedule).__name__}",
                            f"the learning rate at epoch {epoch}", rate, 0.0)

    def learning_rates_at(self, epoch: int) -> dict[ng.Op, float]:
        """Every learning-rate variable this optimizer reads, with its value for ``epoch``.

        The base rate first, then one per parameter group that sets ``lr`` (its ``lr`` times
        the schedule's factor at ``epoch``); ``MultiOptimizer`` has one per sub-optimizer. Writing
        all of them (``for var, lr in opt.learning_rates_at(epoch).items(): t.write_variable(var, lr)``)
        updates every group.

        Example:
            >>> opt = GradientDescentMomentum(0.1, groups={".bias": {"lr": 0.01}},
            ...                               schedule=Schedule(step_config=[2], change=0.5))
            >>> list(opt.learning_rates_at(2).values())  # [0.05, 0.005]
        """
        base = self.learning_rate_at(epoch)
        rates = {self.lr_variable: base}
        for group in self.groups:
            if "lr" in group.overrides:
                rates[group.lr] = group.rule.learning_rate * self._schedule_factor(base, epoch)
        return rates

    def _schedule_factor(self, base: float, epoch: int) -> float:
        """The schedule's factor at ``epoch``: the base rate then over the base rate (1 without a schedule)."""
        if self.schedule is None:
            return 1.0
        if self.learning_rate > 0:
            return base / self.learning_rate
        return float(self.schedule.get_learning_rate(1.0, epoch))  # a base rate of 0 says nothing of the factor

    # -- parameter groups --------------------------------------------------------------------------
    def set_groups(self, groups: Any) -> None:
        """Use these parameter groups (the ``groups=`` keyword of every optimizer calls it); call it before
        the optimizer builds an update (a computation compiled earlier keeps the groups it was built with).

        Each group becomes a rule: this optimizer's class built from its config with the group's
        values (so the constructor checks them), sharing this optimizer's state and step count.

        Args:
            groups: ``{selector: {hyper-parameter: value}}``, or None for none.

        Raises:
            OptimizerError: not a dict of dicts, an unknown hyper-parameter name (the error lists
                the valid ones) or a value the optimizer rejects.
            SelectorError: a malformed selector.

        Example:
            >>> opt.set_groups({"Conv variable": {"lr": 1e-4}})
        """
        if groups is None and not self.groups:
            return
        who = type(self).__name__
        config = self.get_config()
        checked = check_groups(who, groups, group_hyperparameters(config), OptimizerError)
        made: list[ParamGroup] = []
        for index, (selector, overrides) in enumerate(checked.items()):
            values = {("learning_rate" if key == "lr" else key): value for key, value in overrides.items()}
            try:
                rule = type(self).from_config({**config, **values, "schedule": None, "groups": None,
                                               "name": f"{self.name}/group_{index}"})
            except OptimizerError as exc:
                raise OptimizerError(f"{who}: parameter group {selector!r}: {exc}") from None
            rule._parent = self
            if "lr" in overrides and self.schedule is not None:  # start at epoch 0's rate, as the base does
                rule._lr_variable = ng.variable([], initial_value=rule.learning_rate * self._schedule_factor(
                    self.learning_rate_at(0), 0), name=rule.lr_variable.name, trainable=False,
                    labels=("learning_rate",))
            made.append(ParamGroup(selector, dict(overrides), rule,
                                   rule.lr_variable if "lr" in overrides else self.lr_variable))
        self.groups = tuple(made)

    # -- state -------------------------------------------------------------------------------------
    @property
    def state_variables(self) -> list[ng.Op]:
        """The optimizer's state variables (velocities, moments, step count), in creation order."""
        state = list(self._state.values())
        return state + ([self._t] if self._t is not None else [])

    def slot_names(self) -> tuple[str, ...]:
        """The state this rule keeps per variable (``("m", "v")`` for Adam); ``build`` creates it."""
        return ()

    def build(self, variables: Iterable[ng.Op]) -> None:
        """Bind the optimizer to ``variables``: create its state for them now, before any step.

        Only ``trainable`` (or ``frozen``) variables get state. Calling it again (another batch
        size, a resumed fit) creates nothing twice, so checkpoints can write the state at once.

        Raises:
            OptimizerError: an item that is not a variable op.

        Example:
            >>> opt.build(model.variables)
            >>> len(opt.state_variables)  # velocities exist before the first step
        """
        variables = list(variables)
        select_trainable(variables, type(self).__name__)  # type checks only
        chosen = select_candidates(variables)
        # groups may keep more state (momentum in one group only): every variable gets every slot, since
        # which group a variable falls in is known only once the cost graph exists
        slots = dict.fromkeys([*self.slot_names(), *(n for g in self.groups for n in g.rule.slot_names())])
        with ng.name_scope(self.name, kind=type(self).__name__):
            for var in chosen:
                for name in slots:
                    self.slot(var, name)
            if self.uses_step_count and chosen:
                self.step_variable()

    def slot(self, var: ng.Op, slot: str, initial_value: float = 0.0) -> ng.Op:
        """The state variable ``slot`` of ``var`` (made by ``build``, else on first use; shaped like ``var``)."""
        if self._parent is not None:  # a group's rule keeps its state in the optimizer's
            return self._parent.slot(var, slot, initial_value)
        key = (var, slot)
        if key not in self._state:
            self._state[key] = ng.variable(var.axes, initial_value=initial_value, dtype=var.dtype,
                                           name=f"{variable_path(var)}/{slot}", trainable=False,
                                           labels=("optimizer_state", slot))
        return self._state[key]

    def step_variable(self) -> ng.Op:
        """The step-count variable ``t`` (steps taken; made by ``build``, else on first use)."""
        if self._parent is not None:
            return self._parent.step_variable()
        if self._t is None:
            self._t = ng.variable([], initial_value=0.0, name=f"{self.name}/t", trainable=False,
                                  labels=("optimizer_state", "step"))
        return self._t

    def step_count(self) -> ng.Op:
        """``assign(t, t + 1)``: the 1-based number of the step being taken (shared by all variables)."""
        if self._parent is not None:  # one count for every group
            return self._parent.step_count()
        if self._step is None:
            t = self.step_variable()
            self._step = ng.assign(t, t + 1.0)
        return self._step

    # -- building the update -----------------------------------------------------------------------
    def __call__(self, cost: ng.Op, variables: Sequence[ng.Op]) -> ng.Op:
        """One op performing one step of this rule on ``variables`` to decrease ``cost``.

        Args:
            cost: a scalar op.
            variables: candidate variables; only ``trainable``, non-``frozen`` ones are updated.

        Returns:
            an ``ng.doall`` of the assignments (just evaluating ``cost`` when there is
            nothing to update).

        Raises:
            OptimizerError: a cost that is not a scalar op, or items that are not variables.
        """
        found = cost_gradients(cost, variables, type(self).__name__)
        if found is None:
            return ng.doall([cost])
        return self.apply_gradients(list(zip(*found)), cost=cost)

    def apply_gradients(self, grads_and_vars: Sequence[tuple[ng.Op, ng.Op]], cost: ng.Op | None = None) -> ng.Op:
        """One op applying this rule to given ``(gradient, variable)`` pairs (clipping and decay included).

        Clipping covers all the pairs; then each variable is decayed and stepped with its
        group's values (``groups``), its learning rate times its ``lr_scale`` attribute, and its
        ``weight_decay`` attribute when set (it replaces the group's ``wdecay``).

        Args:
            grads_and_vars: ``(gradient, variable)`` pairs.
            cost: the cost the gradients are of; group selectors are evaluated over its graph
                (default: over the gradients' graph).

        Returns:
            an ``ng.doall`` of the assignments.

        Raises:
            OptimizerError: no pairs, or an ``lr_scale``/``weight_decay`` attribute that is not a
                finite number >= 0.
        """
        who = type(self).__name__
        if not grads_and_vars:
            raise OptimizerError(f"{who}: expected at least one (gradient, variable) pair")
        grads = [g for g, _ in grads_and_vars]
        variables = [v for _, v in grads_and_vars]
        owners: list[int | None] = [None] * len(variables)
        if self.groups:
            source = cost if cost is not None else [*grads, *variables]
            owners = assign_groups(who, [g.selector for g in self.groups], source, variables)
        with ng.name_scope(self.name, kind=who):
            grads = self.clip_gradients(grads)
            # one build_updates call per (rule, lr_scale): without groups or attributes, one call for all
            parts: dict[tuple[int, float], tuple[Optimizer, ng.Op, list[tuple[ng.Op, ng.Op]]]] = {}
            for g, var, owner in zip(grads, variables, owners):
                rule, lr = (self, self.lr_variable) if owner is None else (self.groups[owner].rule,
                                                                           self.groups[owner].lr)
                scale, weight_decay = rate_attrs(var, who, OptimizerError)
                decay = rule.wdecay if weight_decay is None else weight_decay
                if decay:
                    g = g + decay * var
                key = (id(rule), scale)
                if key not in parts:
                    parts[key] = (rule, lr if scale == 1.0 else lr * scale, [])
                parts[key][2].append((g, var))
            updates = [u for rule, lr, pairs in parts.values() for u in rule.build_updates(pairs, lr)]
        return ng.doall(updates)

    def clip_gradients(self, grads: list[ng.Op]) -> list[ng.Op]:
        """Clip element-wise to ``gradient_clip_value``, then by global norm to ``gradient_clip_norm``."""
        if self.gradient_clip_value is not None:
            c = self.gradient_clip_value
            grads = [ng.minimum(ng.maximum(g, -c), c) for g in grads]
        if self.gradient_clip_norm is not None:
            total = ng.sum(ng.square(grads[0]))
            for g in grads[1:]:
                total = total + ng.sum(ng.square(g))
            scale = ng.minimum(self.gradient_clip_norm / (ng.sqrt(total) + 1e-6), 1.0)
            grads = [g * scale for g in grads]
        return grads

    def build_updates(self, grads_and_vars: list[tuple[ng.Op, ng.Op]], lr: ng.Op) -> list[ng.Op]:
        """The assignments of one step, given the final gradients and the learning-rate op."""
        raise NotImplementedError(f"{type(self).__name__} must implement build_updates")

    # -- configuration -----------------------------------------------------------------------------
    def rename(self, name: str) -> None:
        """Rename the optimizer (and its learning-rate variable) before it builds any update."""
        self.name = name
        self._lr_variable.named(f"{name}/learning_rate")
        for index, group in enumerate(self.groups):
            group.rule.rename(f"{name}/group_{index}")

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments as plain data (a schedule as ``{"type", "config"}``)."""
        return {
            "learning_rate": self.learning_rate, "wdecay": self.wdecay,
            "gradient_clip_norm": self.gradient_clip_norm, "gradient_clip_value": self.gradient_clip_value,
            "schedule": schedule_to_config(self.schedule), "name": self.name,
            **({"groups": {g.selector: dict(g.overrides) for g in self.groups}} if self.groups else {}),
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Optimizer:
        """A new optimizer from ``get_config()``'s output (on the concrete class)."""
        config = dict(config)
        if config.get("schedule") is not None:
            config["schedule"] = schedule_from_config(config["schedule"])
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if v is not None and k != "name")
        return f"{type(self).__name__}({args})"


def optimizer_to_config(optimizer: Optimizer) -> dict[str, Any]:
    """``{"type": class name, "config": get_config()}``."""
    return {"type": type(optimizer).__name__, "config": optimizer.get_config()}


def optimizer_from_config(config: dict[str, Any]) -> Optimizer:
    """The optimizer ``optimizer_to_config`` described.

    Raises:
        OptimizerError: an unknown type.
    """
    kind = config.get("type") if isinstance(config, dict) else None
    if kind not in OPTIMIZERS:
        raise OptimizerError(f"optimizer_from_config: expected a type among {sorted(OPTIMIZERS)}, received {kind!r}")
    return OPTIMIZERS[kind].from_config(config.get("config", {}))
