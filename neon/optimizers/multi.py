"""``MultiOptimizer``: a different optimizer per layer name or layer class."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import ngraph_core as ng

from .base import Optimizer, optimizer_from_config, optimizer_to_config, select_candidates
from .checks import OptimizerError


class MultiOptimizer(Optimizer):
    """Route each variable to an optimizer by the layers that made it (neon's ``MultiOptimizer``).

    Keys are ``"default"`` (required), layer class names (``"Bias"``, ``"Affine"``: the
    ``kind`` of a scope entry) and layer names (``"Affine_0"``, ``"conv1"``: its ``name``).
    A variable's ``meta.scope`` is a path of such entries (``Affine_0 > Bias_0``); the most
    specific key wins:

    1. a layer name anywhere in the path (the innermost one if several match), else
    2. a layer class name anywhere in the path (the innermost one if several match), else
    3. ``"default"``.

    So ``{"default": a, "Bias": b, "Affine_1": c}`` sends ``Affine_1``'s weights *and* its bias
    to ``c``, every other bias to ``b`` and everything else to ``a``. Each optimizer sees only
    its variables (its global-norm clipping covers only them); gradients are built once for
    all. An optimizer given under several keys is called once with all its variables.

    Sub-optimizers built without a ``name`` are renamed ``<name>/<key>`` (e.g.
    ``MultiOptimizer/Bias``) so that their state variables and learning rates have distinct names.

    Parameter groups (``groups=``) belong to the sub-optimizers: each selects among the
    variables routed to it, over the same cost graph. ``MultiOptimizer`` routes to different
    *rules*; groups vary one rule's hyper-parameters by selector.

    Learning rates: ``lr_variable`` and ``learning_rate_at`` are the ``"default"`` optimizer's;
    ``learning_rates_at(epoch)`` lists every sub-optimizer's variable and rate — write them all
    to follow each group's schedule.

    Args:
        optimizer_mapping: key -> optimizer, with a ``"default"`` entry.
        name: the name prefix of renamed sub-optimizers.

    Raises:
        OptimizerError: no ``"default"``, a value that is not an optimizer (or is a
            MultiOptimizer), or two sub-optimizers with one explicit name.

    Example:
        >>> opt = MultiOptimizer({"default": GradientDescentMomentum(0.1, 0.9), "Bias": Adam(1e-3)})
        >>> update = opt(cost, model.variables)
    """

    def __init__(self, optimizer_mapping: Mapping[str, Optimizer], name: str | None = None) -> None:
        if not isinstance(optimizer_mapping, Mapping) or "default" not in optimizer_mapping:
            got = sorted(optimizer_mapping) if isinstance(optimizer_mapping, Mapping) else type(optimizer_mapping)
            raise OptimizerError(f"MultiOptimizer: expected a dict with a 'default' optimizer, received {got}; "
                                 "hint: MultiOptimizer({'default': opt, 'Bias': opt2})")
        for key, opt in optimizer_mapping.items():
            if not isinstance(key, str) or not isinstance(opt, Optimizer) or isinstance(opt, MultiOptimizer):
                raise OptimizerError(f"MultiOptimizer: expected str keys and optimizers (not MultiOptimizer) as "
                                     f"values, received {key!r}: {type(opt).__name__}")
        if name is not None and (not isinstance(name, str) or not name):
            raise OptimizerError(f"MultiOptimizer: expected name to be a non-empty str, received {name!r}")
        self.name = name or "MultiOptimizer"
        self.explicit_name = name is not None
        self.optimizer_mapping = dict(optimizer_mapping)
        self.schedule = None
        seen: dict[str, Optimizer] = {}
        for key, opt in self.optimizer_mapping.items():
            if any(o is opt for o in seen.values()):
                continue
            if not opt.explicit_name:
                opt.rename(f"{self.name}/{key}")
            if opt.name in seen:
                raise OptimizerError(f"MultiOptimizer: two optimizers are named {opt.name!r}; expected distinct "
                                     "names; hint: leave name unset and MultiOptimizer names them by key")
            seen[opt.name] = opt

    @property
    def optimizers(self) -> list[Optimizer]:
        """The distinct sub-optimizers, in mapping order."""
        out: list[Optimizer] = []
        for opt in self.optimizer_mapping.values():
            if not any(o is opt for o in out):
                out.append(opt)
        return out

    def route(self, var: ng.Op) -> str:
        """The mapping key that decides ``var``'s optimizer (see the class docstring)."""
        scope = list(reversed(var.meta.scope))
        for entry in scope:
            if entry.name != "default" and entry.name in self.optimizer_mapping:
                return entry.name
        for entry in scope:
            if entry.kind != "default" and entry.kind in self.optimizer_mapping:
                return entry.kind
        return "default"

    def optimizer_for(self, var: ng.Op) -> Optimizer:
        """The optimizer that updates ``var``."""
        return self.optimizer_mapping[self.route(var)]

    def build(self, variables: Sequence[ng.Op]) -> None:
        """Create each sub-optimizer's state for the variables routed to it (see ``Optimizer.build``)."""
        groups: dict[int, tuple[Optimizer, list[ng.Op]]] = {}
        for var in select_candidates(variables):
            opt = self.optimizer_for(var)
            groups.setdefault(id(opt), (opt, []))[1].append(var)
        for opt, chosen in groups.values():
            opt.build(chosen)

    def apply_gradients(self, grads_and_vars: Sequence[tuple[ng.Op, ng.Op]], cost: ng.Op | None = None) -> ng.Op:
        """Hand each ``(gradient, variable)`` pair to its optimizer; one op for all the groups.

        ``cost`` goes on to each sub-optimizer, whose parameter groups (``groups=``) select over it.
        """
        groups: dict[int, tuple[Optimizer, list[tuple[ng.Op, ng.Op]]]] = {}
        for g, var in grads_and_vars:
            opt = self.optimizer_for(var)
            groups.setdefault(id(opt), (opt, []))[1].append((g, var))
        return ng.doall([opt.apply_gradients(pairs, cost=cost) for opt, pairs in groups.values()])

    def set_groups(self, groups: Any) -> None:
        """MultiOptimizer takes no groups of its own: give them to its sub-optimizers.

        Raises:
            OptimizerError: ``groups`` is not None.
        """
        if groups is not None:
            raise OptimizerError("MultiOptimizer: expected groups=None, received parameter groups; hint: give them "
                                 "to a sub-optimizer: MultiOptimizer({'default': Adam(1e-3, groups={...})})")

    @property
    def lr_variable(self) -> ng.Op:
        """The ``"default"`` optimizer's learning-rate variable (see ``learning_rates_at`` for all)."""
        return self.optimizer_mapping["default"].lr_variable

    def learning_rate_at(self, epoch: int) -> float:
        """The ``"default"`` optimizer's learning rate for ``epoch``."""
        return self.optimizer_mapping["default"].learning_rate_at(epoch)

    def learning_rates_at(self, epoch: int) -> dict[ng.Op, float]:
        rates: dict[ng.Op, float] = {}
        for opt in self.optimizers:
            rates.update(opt.learning_rates_at(epoch))
        return rates

    @property
    def state_variables(self) -> list[ng.Op]:
        return [v for opt in self.optimizers for v in opt.state_variables]

    def rename(self, name: str) -> None:
        self.name = name

    def get_config(self) -> dict[str, Any]:
        mapping = {key: optimizer_to_config(opt) for key, opt in self.optimizer_mapping.items()}
        return {"optimizer_mapping": mapping, "name": self.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> MultiOptimizer:
        # one optimizer under several keys comes back as several optimizers (configs are plain data)
        mapping = {key: optimizer_from_config(c) for key, c in config["optimizer_mapping"].items()}
        return cls(mapping, name=config.get("name"))

    def __repr__(self) -> str:
        return f"MultiOptimizer({self.optimizer_mapping!r})"
