"""Optimizer behaviour beyond the update rules: variable selection, state, lr variable, errors, config."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ngraph_core as ng
from neon.optimizers import (
    Adadelta,
    Adagrad,
    Adam,
    ExpSchedule,
    GradientDescentMomentum,
    MultiOptimizer,
    Optimizer,
    OptimizerError,
    RMSProp,
    Schedule,
    StepSchedule,
    optimizer_from_config,
    optimizer_to_config,
)


def quadratic(**variables):
    """cost = sum over variables of sum((v - 1)**2); returns (cost, dict of variables)."""
    cost = None
    for v in variables.values():
        term = ng.sum(ng.square(v - 1.0))
        cost = term if cost is None else cost + term
    return cost, variables


def run(update, cost, variables, steps=1):
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        f = t.computation([cost, update])
        before = {k: t.read_variable(v) for k, v in variables.items()}
        for _ in range(steps):
            f()
        return before, {k: t.read_variable(v) for k, v in variables.items()}


def test_frozen_and_non_trainable_variables_are_untouched():
    A = ng.make_axis(3, "A")
    cost, vs = quadratic(w=ng.variable([A], 0.0, name="w"),
                         frozen=ng.variable([A], 0.0, name="frozen").labeled("frozen"),
                         fixed=ng.variable([A], 0.0, name="fixed", trainable=False))
    opt = Adam(0.1)
    before, after = run(opt(cost, list(vs.values())), cost, vs, steps=2)
    assert not np.allclose(after["w"], before["w"])
    np.testing.assert_array_equal(after["frozen"], before["frozen"])
    np.testing.assert_array_equal(after["fixed"], before["fixed"])
    assert {v.name for v in opt.state_variables} == {"w/m", "w/v", "Adam/t"}


def test_nothing_to_update_returns_a_harmless_op():
    A = ng.make_axis(2, "A")
    cost, vs = quadratic(frozen=ng.variable([A], 0.0, name="frozen").labeled("frozen"))
    opt = GradientDescentMomentum(0.1, 0.9)
    before, after = run(opt(cost, list(vs.values())), cost, vs)
    np.testing.assert_array_equal(after["frozen"], before["frozen"])
    assert opt.state_variables == []


def test_state_variables_names_labels_and_values():
    A = ng.make_axis(2, "A")
    with ng.name_scope("Affine_0", kind="Affine"):
        w = ng.variable([A], 0.0, name="W")
    cost, vs = quadratic(w=w)
    opt = GradientDescentMomentum(0.5, momentum_coef=0.9)
    update = opt(cost, [w])
    (velocity,) = opt.state_variables
    assert velocity.name == "Affine_0/W/velocity"
    assert {"optimizer_state", "velocity"} <= velocity.meta.labels
    assert "trainable" not in velocity.meta.labels
    assert velocity.axes == w.axes
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        t.computation(update)()
        np.testing.assert_allclose(t.read_variable(velocity), [-2.0, -2.0])  # grad of (w-1)^2 at 0
        np.testing.assert_allclose(t.read_variable(w), [1.0, 1.0])


def test_step_count_is_shared_and_counts_steps():
    A = ng.make_axis(2, "A")
    cost, vs = quadratic(a=ng.variable([A], 0.0, name="a"), b=ng.variable([A], 0.0, name="b"))
    opt = Adam(0.1)
    update = opt(cost, list(vs.values()))
    (t_var,) = [v for v in opt.state_variables if "step" in v.meta.labels]
    with ng.transformers.make_transformer() as t:
        f = t.computation(update)
        for _ in range(3):
            f()
        assert t.read_variable(t_var) == 3.0


def test_lr_variable_and_learning_rate_at():
    opt = GradientDescentMomentum(0.1, schedule=Schedule(step_config=[2], change=0.5))
    lr = opt.lr_variable
    assert lr.axes == ng.make_axes([]) and "learning_rate" in lr.meta.labels and "trainable" not in lr.meta.labels
    assert opt.learning_rate_at(0) == 0.1 and opt.learning_rate_at(2) == 0.05
    assert opt.learning_rates_at(3) == {lr: 0.05}
    with ng.transformers.make_transformer() as t:
        assert math.isclose(float(t.read_variable(lr)), 0.1, rel_tol=1e-6)


def test_lr_write_changes_the_step_without_recompiling():
    A = ng.make_axis(1, "A")
    w = ng.variable([A], 0.0, name="w")
    cost = ng.sum(-2.0 * w)  # gradient -2 everywhere: each step moves w by 2 * lr
    opt = GradientDescentMomentum(0.5)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        f = t.computation(opt(cost, [w]))
        f()
        t.write_variable(opt.lr_variable, 0.25)
        f()
        np.testing.assert_allclose(t.read_variable(w), [1.0 + 0.5])


@pytest.mark.parametrize("make, expected", [
    (lambda: GradientDescentMomentum(-0.1), "learning_rate"),
    (lambda: GradientDescentMomentum(float("nan")), "learning_rate"),
    (lambda: Adam(float("inf")), "learning_rate"),
    (lambda: GradientDescentMomentum("0.1"), "learning_rate"),
    (lambda: GradientDescentMomentum(0.1, momentum_coef=1.0), "momentum_coef"),
    (lambda: GradientDescentMomentum(0.1, momentum_coef=-0.5), "momentum_coef"),
    (lambda: GradientDescentMomentum(0.1, nesterov=True), "nesterov"),
    (lambda: GradientDescentMomentum(0.1, wdecay=-1.0), "wdecay"),
    (lambda: GradientDescentMomentum(0.1, gradient_clip_norm=0.0), "gradient_clip_norm"),
    (lambda: Adam(beta_1=1.0), "beta_1"),
    (lambda: Adam(beta_2=-0.1), "beta_2"),
    (lambda: Adam(epsilon=-1e-8), "epsilon"),
    (lambda: RMSProp(decay_rate=1.5), "decay_rate"),
    (lambda: Adagrad(gradient_clip_value=-1.0), "gradient_clip_value"),
    (lambda: Adadelta(epsilon=0.0), "epsilon"),
    (lambda: Adam(schedule="cosine"), "schedule"),
    (lambda: MultiOptimizer({"Bias": Adam()}), "default"),
    (lambda: MultiOptimizer({"default": "sgd"}), "optimizers"),
])
def test_bad_hyper_parameters_raise_typed_errors(make, expected):
    with pytest.raises(OptimizerError, match=expected) as info:
        make()
    assert isinstance(info.value, ng.NgraphError)
    assert "expected" in str(info.value)


def test_negative_learning_rate_message_says_expected_and_received():
    with pytest.raises(OptimizerError) as info:
        GradientDescentMomentum(-0.1)
    assert "[0, inf)" in str(info.value) and "-0.1" in str(info.value)


def test_a_schedule_giving_a_negative_rate_raises_at_that_epoch():
    class Broken(Schedule):
        def get_learning_rate(self, learning_rate, epoch):
            return learning_rate - epoch

    opt = Adam(1.0, schedule=Broken())
    assert opt.learning_rate_at(1) == 0.0
    with pytest.raises(OptimizerError, match="epoch 2"):
        opt.learning_rate_at(2)


def test_bad_call_arguments():
    A = ng.make_axis(2, "A")
    w = ng.variable([A], 0.0)
    with pytest.raises(OptimizerError, match="scalar cost"):
        Adam()(w * 2.0, [w])
    with pytest.raises(OptimizerError, match="variables"):
        Adam()(ng.sum(w), [w * 2.0])


@pytest.mark.parametrize("opt", [
    GradientDescentMomentum(0.1, 0.9, wdecay=1e-4, nesterov=True, gradient_clip_norm=5.0,
                            schedule=StepSchedule([2, 4], [0.05, 0.01])),
    Adam(2e-3, beta_1=0.8, gradient_clip_value=1.0, schedule=ExpSchedule(0.1)),
    RMSProp(1e-3, decay_rate=0.9, epsilon=1e-5),
    Adagrad(0.02, epsilon=1e-7),
    Adadelta(0.9, 1e-5),
    MultiOptimizer({"default": Adam(), "Bias": GradientDescentMomentum(0.1)}),
], ids=lambda o: type(o).__name__)
def test_get_config_round_trip(opt):
    config = optimizer_to_config(opt)
    rebuilt = optimizer_from_config(config)
    assert type(rebuilt) is type(opt)
    assert optimizer_to_config(rebuilt) == config
    assert [rebuilt.learning_rate_at(e) for e in range(6)] == [opt.learning_rate_at(e) for e in range(6)]
    assert isinstance(rebuilt, Optimizer)


def test_unknown_config_type():
    with pytest.raises(OptimizerError, match="expected a type"):
        optimizer_from_config({"type": "Lion", "config": {}})
