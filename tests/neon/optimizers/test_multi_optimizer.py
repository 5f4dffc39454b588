"""MultiOptimizer: routing by layer name / layer class in meta.scope, and the steps each group takes."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from neon.optimizers import Adam, GradientDescentMomentum, MultiOptimizer, Schedule

A = ng.make_axis(3, "A")
INIT = {"W0": [0.5, -1.0, 2.0], "b0": [0.1, 0.2, 0.3], "W1": [1.5, 0.0, -0.5], "b1": [-0.3, 0.7, 0.0]}


def two_affines():
    """Variables as two Affine layers with nested Bias layers build them; cost = sum of (v - 2)**2 * k."""
    vs = {}
    for i in (0, 1):
        with ng.name_scope(f"Affine_{i}", kind="Affine"):
            vs[f"W{i}"] = ng.variable([A], np.array(INIT[f"W{i}"]), dtype="float64", name="W")
            with ng.name_scope(f"Bias_{i}", kind="Bias"):
                vs[f"b{i}"] = ng.variable([A], np.array(INIT[f"b{i}"]), dtype="float64", name="b")
    cost = None
    for k, v in enumerate(vs.values()):
        term = ng.sum(ng.square(v - 2.0)) * float(k + 1)
        cost = term if cost is None else cost + term
    return cost, vs


def test_route_most_specific_key_wins():
    _, vs = two_affines()
    opt = MultiOptimizer({"default": Adam(), "Bias": Adam(), "Affine_1": Adam()})
    assert opt.route(vs["W0"]) == "default"
    assert opt.route(vs["b0"]) == "Bias"  # class name of the innermost layer
    assert opt.route(vs["W1"]) == "Affine_1"  # layer name
    assert opt.route(vs["b1"]) == "Affine_1"  # a layer name beats a class name, even an inner one
    by_class = MultiOptimizer({"default": Adam(), "Affine": Adam()})
    assert by_class.route(vs["b0"]) == "Affine"  # an enclosing layer's class counts too
    by_inner_name = MultiOptimizer({"default": Adam(), "Affine_0": Adam(), "Bias_0": Adam()})
    assert by_inner_name.route(vs["b0"]) == "Bias_0"  # the innermost name wins among names


def test_each_group_steps_with_its_own_rule():
    torch = pytest.importorskip("torch", reason="the groups' steps are checked against PyTorch")
    cost, vs = two_affines()
    sgd, adam = GradientDescentMomentum(0.05, momentum_coef=0.9), Adam(0.1)
    opt = MultiOptimizer({"default": sgd, "Bias": adam})
    update = opt(cost, list(vs.values()))
    names = {v.name for v in opt.state_variables}
    assert names == {"Affine_0/W/velocity", "Affine_1/W/velocity", "Affine_0/Bias_0/b/m", "Affine_0/Bias_0/b/v",
                     "Affine_1/Bias_1/b/m", "Affine_1/Bias_1/b/v", "MultiOptimizer/Bias/t"}

    params = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in INIT.items()}
    t_sgd = torch.optim.SGD([params["W0"], params["W1"]], lr=0.05, momentum=0.9)
    t_adam = torch.optim.Adam([params["b0"], params["b1"]], lr=0.1)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        step = t.computation([cost, update])
        for _ in range(4):
            step()
            t_sgd.zero_grad()
            t_adam.zero_grad()
            sum(((p - 2.0) ** 2).sum() * (k + 1) for k, p in enumerate(params.values())).backward()
            t_sgd.step()
            t_adam.step()
            for name, var in vs.items():
                np.testing.assert_allclose(t.read_variable(var), params[name].detach().numpy(), rtol=1e-10,
                                           err_msg=name)


def test_each_group_has_its_learning_rate_variable():
    sgd = GradientDescentMomentum(0.1, schedule=Schedule(step_config=1, change=0.5))
    adam = Adam(0.01)
    opt = MultiOptimizer({"default": sgd, "Bias": adam, "Affine_1": adam})
    assert opt.optimizers == [sgd, adam]  # one optimizer under two keys is one group
    assert sgd.name == "MultiOptimizer/default" and adam.name == "MultiOptimizer/Bias"
    assert opt.lr_variable is sgd.lr_variable and opt.learning_rate_at(2) == 0.025
    assert opt.learning_rates_at(2) == {sgd.lr_variable: 0.025, adam.lr_variable: 0.01}
    assert adam.lr_variable.name == "MultiOptimizer/Bias/learning_rate"


def test_a_group_with_zero_learning_rate_stays_put():
    cost, vs = two_affines()
    opt = MultiOptimizer({"default": GradientDescentMomentum(0.1), "Affine_0": GradientDescentMomentum(0.0)})
    update = opt(cost, list(vs.values()))
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        t.computation(update)()
        np.testing.assert_array_equal(t.read_variable(vs["W0"]), INIT["W0"])
        np.testing.assert_array_equal(t.read_variable(vs["b0"]), INIT["b0"])
        assert not np.allclose(t.read_variable(vs["W1"]), INIT["W1"])
        assert not np.allclose(t.read_variable(vs["b1"]), INIT["b1"])


def test_clashing_explicit_names_are_refused():
    from neon.optimizers import OptimizerError

    with pytest.raises(OptimizerError, match="named 'opt'"):
        MultiOptimizer({"default": Adam(name="opt"), "Bias": Adam(name="opt")})
