"""Parameter groups (``groups={selector: {...}}``) and the ``lr_scale``/``weight_decay`` variable attributes.

The graph: two "layers" made with ``ng.name_scope`` as neon layers make them (an ``Affine``
scope holding a weight ``W`` and a nested ``Bias`` scope holding ``b`` labelled ``bias``), and a
quadratic cost, so every step has a closed form to compare with.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ngraph_core as ng
from neon.optimizers import (
    Adam,
    GradientDescentMomentum,
    MultiOptimizer,
    OptimizerError,
    Schedule,
    optimizer_from_config,
    optimizer_to_config,
)

A = ng.make_axis(3, "A")
INIT = {"W0": [0.5, -1.0, 2.0], "b0": [0.1, 0.2, 0.3], "W1": [1.5, 0.0, -0.5], "b1": [-0.3, 0.7, 0.0]}
TARGET = 2.0


def two_layers():
    """cost = sum_k (k + 1) * sum((v_k - 2)**2), so d cost / d v_k = 2 (k + 1) (v_k - 2)."""
    vs = {}
    for i in (0, 1):
        with ng.name_scope(f"Affine_{i}", kind="Affine"):
            vs[f"W{i}"] = ng.variable([A], np.array(INIT[f"W{i}"]), dtype="float64", name="W", labels=("weight",))
            with ng.name_scope("Bias_0", kind="Bias"):
                vs[f"b{i}"] = ng.variable([A], np.array(INIT[f"b{i}"]), dtype="float64", name="b", labels=("bias",))
    cost = None
    for k, v in enumerate(vs.values()):
        term = ng.sum(ng.square(v - TARGET)) * float(k + 1)
        cost = term if cost is None else cost + term
    return cost, vs


def grad_of(key: str, value: np.ndarray) -> np.ndarray:
    k = list(INIT).index(key)
    return 2.0 * (k + 1) * (value - TARGET)


def run(optimizer, steps: int = 1, setup=None) -> dict[str, np.ndarray]:
    """The variables' values after ``steps`` steps of ``optimizer`` on ``two_layers``."""
    cost, vs = two_layers()
    if setup is not None:
        setup(cost, vs)
    update = optimizer(cost, list(vs.values()))
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        step = t.computation([cost, update])
        for var, rate in optimizer.learning_rates_at(0).items():
            t.write_variable(var, rate)
        for _ in range(steps):
            step()
        return {key: t.read_variable(v) for key, v in vs.items()}


def sgd_step(key: str, lr: float, wdecay: float = 0.0) -> np.ndarray:
    w = np.array(INIT[key])
    return w - lr * (grad_of(key, w) + wdecay * w)


def test_a_group_of_lr_zero_leaves_its_variables_unchanged() -> None:
    after = run(GradientDescentMomentum(0.1, groups={"#Affine_0 variable": {"lr": 0.0}}), steps=3)
    assert np.array_equal(after["W0"], INIT["W0"]) and np.array_equal(after["b0"], INIT["b0"])
    assert not np.allclose(after["W1"], INIT["W1"]) and not np.allclose(after["b1"], INIT["b1"])


def test_group_lr_steps_exactly_at_its_rate_and_the_rest_at_the_base_rate() -> None:
    after = run(GradientDescentMomentum(0.1, groups={"#Affine_1 variable": {"lr": 0.01}}))
    for key in ("W0", "b0"):
        np.testing.assert_allclose(after[key], sgd_step(key, 0.1), rtol=0, atol=1e-15)
    for key in ("W1", "b1"):
        np.testing.assert_allclose(after[key], sgd_step(key, 0.01), rtol=0, atol=1e-15)


def test_the_first_matching_group_wins_and_groups_select_by_label_and_type() -> None:
    # b1 is in both groups: the first (".bias") decides; W1 is only in the second
    opt = GradientDescentMomentum(0.1, groups={".bias": {"lr": 0.05}, "#Affine_1 *": {"lr": 0.2, "wdecay": 0.5}})
    after = run(opt)
    np.testing.assert_allclose(after["W0"], sgd_step("W0", 0.1), atol=1e-15)
    np.testing.assert_allclose(after["b0"], sgd_step("b0", 0.05), atol=1e-15)
    np.testing.assert_allclose(after["b1"], sgd_step("b1", 0.05), atol=1e-15)
    np.testing.assert_allclose(after["W1"], sgd_step("W1", 0.2, wdecay=0.5), atol=1e-15)
    by_type = run(GradientDescentMomentum(0.1, groups={"Bias variable": {"lr": 0.0}}))
    assert np.array_equal(by_type["b0"], INIT["b0"]) and np.array_equal(by_type["b1"], INIT["b1"])


def test_a_group_sets_the_rules_own_hyperparameters() -> None:
    # momentum 0.9 everywhere but on the biases (plain SGD there); two steps tell them apart
    opt = GradientDescentMomentum(0.1, momentum_coef=0.9, groups={".bias": {"momentum_coef": 0.0}})
    after = run(opt, steps=2)
    w = np.array(INIT["W0"])
    v = grad_of("W0", w)
    w = w - 0.1 * v
    v = 0.9 * v + grad_of("W0", w)
    np.testing.assert_allclose(after["W0"], w - 0.1 * v, atol=1e-14)
    b = np.array(INIT["b0"])
    for _ in range(2):
        b = b - 0.1 * grad_of("b0", b)
    np.testing.assert_allclose(after["b0"], b, atol=1e-14)


def test_groups_share_the_state_names_and_step_count_of_the_optimizer() -> None:
    plain, grouped = Adam(0.1), Adam(0.1, groups={".bias": {"lr": 0.01, "beta_1": 0.5}})
    run(plain)
    run(grouped)
    names = sorted(v.name for v in plain.state_variables)
    assert sorted(v.name for v in grouped.state_variables) == names  # checkpoint keys do not change
    assert [v.name for v in grouped.state_variables if "step" in v.meta.labels] == ["Adam/t"]  # one count


def test_groups_that_add_state_create_it_at_build() -> None:
    opt = GradientDescentMomentum(0.1, groups={".bias": {"momentum_coef": 0.9}})
    _, vs = two_layers()
    opt.build(list(vs.values()))  # before any cost exists: every variable gets the slot
    assert len(opt.state_variables) == 4
    assert {v.name for v in opt.state_variables} == {"Affine_0/W/velocity", "Affine_0/Bias_0/b/velocity",
                                                     "Affine_1/W/velocity", "Affine_1/Bias_0/b/velocity"}


def test_lr_scale_attribute_multiplies_the_rate_of_its_group() -> None:
    def halve_affine_1(cost, vs):
        ng.select(cost, "#Affine_1 variable").set(lr_scale=0.5)

    after = run(GradientDescentMomentum(0.1, groups={".bias": {"lr": 0.02}}), setup=halve_affine_1)
    np.testing.assert_allclose(after["W0"], sgd_step("W0", 0.1), atol=1e-15)
    np.testing.assert_allclose(after["b0"], sgd_step("b0", 0.02), atol=1e-15)
    np.testing.assert_allclose(after["W1"], sgd_step("W1", 0.05), atol=1e-15)
    np.testing.assert_allclose(after["b1"], sgd_step("b1", 0.01), atol=1e-15)


def test_weight_decay_attribute_overrides_wdecay() -> None:
    def no_decay_on_biases(cost, vs):
        ng.select(cost, ".bias").set(weight_decay=0)

    after = run(GradientDescentMomentum(0.1, wdecay=0.5), setup=no_decay_on_biases)
    np.testing.assert_allclose(after["W0"], sgd_step("W0", 0.1, wdecay=0.5), atol=1e-15)
    np.testing.assert_allclose(after["b0"], sgd_step("b0", 0.1), atol=1e-15)


def test_a_bad_lr_scale_attribute_is_an_optimizer_error() -> None:
    cost, vs = two_layers()
    ng.update_meta(vs["W0"], attrs={"lr_scale": -1.0})
    with pytest.raises(OptimizerError, match=r"lr_scale attribute of variable Affine_0/W .*received -1.0"):
        GradientDescentMomentum(0.1)(cost, list(vs.values()))


def test_schedules_scale_group_rates_like_the_base_rate() -> None:
    opt = GradientDescentMomentum(0.1, groups={".bias": {"lr": 0.02}, ".weight": {"wdecay": 0.1}},
                                  schedule=Schedule(step_config=[2], change=0.5))
    rates = opt.learning_rates_at(3)
    assert list(rates) == [opt.lr_variable, opt.groups[0].lr]  # base first: the one the logs show
    assert list(rates.values()) == pytest.approx([0.05, 0.01])
    assert opt.groups[1].lr is opt.lr_variable  # a group without lr reads the base rate
    assert opt.groups[0].lr.name == "GradientDescentMomentum/group_0/learning_rate"


def test_unknown_hyperparameter_lists_the_valid_ones() -> None:
    with pytest.raises(OptimizerError, match=r"expected hyper-parameter names among lr, wdecay, momentum_coef, "
                                             r"nesterov, received beta_1"):
        GradientDescentMomentum(0.1, groups={".bias": {"beta_1": 0.9}})
    with pytest.raises(OptimizerError, match="gradient_clip_norm"):
        Adam(groups={".bias": {"gradient_clip_norm": 1.0}})


def test_out_of_range_group_values_and_malformed_groups_fail_at_construction() -> None:
    with pytest.raises(OptimizerError, match=r"parameter group '.bias'.*momentum_coef .*received 1.5"):
        GradientDescentMomentum(0.1, groups={".bias": {"momentum_coef": 1.5}})
    with pytest.raises(OptimizerError, match="expected group '.bias' to map"):
        Adam(groups={".bias": 0.1})
    with pytest.raises(OptimizerError, match="expected groups to be a dict"):
        Adam(groups=[(".bias", {"lr": 0.1})])
    with pytest.raises(ng.SelectorError, match="column"):
        Adam(groups={"Conv >": {"lr": 0.1}})
    with pytest.raises(OptimizerError, match="give them to a sub-optimizer"):
        MultiOptimizer({"default": Adam()}, groups={".bias": {"lr": 0.1}})


def test_a_group_that_selects_nothing_warns_with_its_selector() -> None:
    with pytest.warns(UserWarning, match=r"parameter group 'Conv variable' selects none"):
        after = run(GradientDescentMomentum(0.1, groups={"Conv variable": {"lr": 0.0}}))
    np.testing.assert_allclose(after["W0"], sgd_step("W0", 0.1), atol=1e-15)


def test_a_group_that_selects_something_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(GradientDescentMomentum(0.1, groups={".bias": {"lr": 0.0}}))


def test_groups_round_trip_through_config() -> None:
    opt = Adam(1e-3, groups={"Conv variable": {"lr": 1e-4}, ".bias": {"wdecay": 0.0, "beta_1": 0.5}})
    config = optimizer_to_config(opt)
    assert config["config"]["groups"] == {"Conv variable": {"lr": 1e-4}, ".bias": {"wdecay": 0.0, "beta_1": 0.5}}
    rebuilt = optimizer_from_config(config)
    assert optimizer_to_config(rebuilt) == config
    assert [g.rule.beta_1 for g in rebuilt.groups] == [0.9, 0.5]
    assert "groups" not in Adam().get_config()  # configs of optimizers without groups are as before


def test_multi_optimizer_passes_the_cost_to_sub_optimizer_groups() -> None:
    opt = MultiOptimizer({"default": GradientDescentMomentum(0.1, groups={"#Affine_1 variable": {"lr": 0.0}}),
                          "Bias": GradientDescentMomentum(0.3)})
    after = run(opt)
    np.testing.assert_allclose(after["W0"], sgd_step("W0", 0.1), atol=1e-15)
    assert np.array_equal(after["W1"], INIT["W1"])  # the default's group: "Bias" took the biases first
    np.testing.assert_allclose(after["b1"], sgd_step("b1", 0.3), atol=1e-15)
    rebuilt = optimizer_from_config(optimizer_to_config(opt))
    assert optimizer_to_config(rebuilt) == optimizer_to_config(opt)
