"""Every optimizer against PyTorch's optimizer of the same name, step by step, in float64.

The problem: a tiny tanh regression ``cost = sum((tanh(W x) + b - y)**2) / N`` with the
same initial weights and the same fresh batch each step in both frameworks; the
weights are compared after each of 5 steps.
"""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from neon.optimizers import (
    Adadelta,
    Adagrad,
    Adam,
    GradientDescentMomentum,
    RMSProp,
)

torch = pytest.importorskip("torch", reason="the optimizers are checked against PyTorch")

C, H, B, STEPS = 4, 3, 6, 5
RNG = np.random.default_rng(7)
W0 = RNG.normal(size=(H, C))
B0 = RNG.normal(size=(H,))
XS = RNG.normal(size=(STEPS, C, B))
YS = RNG.normal(size=(STEPS, H, B))


def ng_run(opt, lrs=None, clip_rows=None):
    """Weights (W, b) after each step; ``lrs[i]`` is written into the lr variable before step i."""
    Ca, Ha, N = ng.make_axis(C, "C"), ng.make_axis(H, "H"), ng.make_axis(B, "N")
    W = ng.variable([Ha, Ca], initial_value=W0, dtype="float64", name="W")
    b = ng.variable([Ha], initial_value=B0, dtype="float64", name="b")
    X, Y = ng.placeholder([Ca, N], "float64"), ng.placeholder([Ha, N], "float64")
    cost = ng.sum(ng.square(ng.tanh(ng.dot(W, X)) + b - Y)) / float(B)
    update = opt(cost, [W, b])
    out = []
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        step = t.computation([cost, update], X, Y)
        for i in range(STEPS):
            if lrs is not None:
                t.write_variable(opt.lr_variable, lrs[i])
            step(XS[i], YS[i])
            out.append((t.read_variable(W), t.read_variable(b)))
    return out


def torch_run(make_opt, lrs=None, clip=None):
    W = torch.tensor(W0, requires_grad=True)
    b = torch.tensor(B0, requires_grad=True)
    opt = make_opt([W, b])
    out = []
    for i in range(STEPS):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[i]
        opt.zero_grad()
        x, y = torch.tensor(XS[i]), torch.tensor(YS[i])
        cost = ((torch.tanh(W @ x) + b[:, None] - y) ** 2).sum() / B
        cost.backward()
        if clip is not None:
            clip([W, b])
        opt.step()
        out.append((W.detach().numpy().copy(), b.detach().numpy().copy()))
    return out


def assert_same_steps(ours, theirs, rtol=1e-9, atol=1e-12):
    for i, ((w, b), (tw, tb)) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(w, tw, rtol=rtol, atol=atol, err_msg=f"W after step {i + 1}")
        np.testing.assert_allclose(b, tb, rtol=rtol, atol=atol, err_msg=f"b after step {i + 1}")
    # the weights must actually move, or the comparison proves nothing
    assert not np.allclose(ours[-1][0], W0)


CASES = {
    "sgd": (lambda: GradientDescentMomentum(0.1),
            lambda p: torch.optim.SGD(p, lr=0.1)),
    "sgd_momentum": (lambda: GradientDescentMomentum(0.1, momentum_coef=0.9),
                     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
    "sgd_nesterov": (lambda: GradientDescentMomentum(0.05, momentum_coef=0.8, nesterov=True),
                     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
    "sgd_wdecay": (lambda: GradientDescentMomentum(0.1, momentum_coef=0.5, wdecay=0.05),
                   lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5, weight_decay=0.05)),
    "adam": (lambda: Adam(learning_rate=0.05, beta_1=0.8, beta_2=0.95, epsilon=1e-3),
             lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.8, 0.95), eps=1e-3)),
    "adam_wdecay": (lambda: Adam(learning_rate=0.01, wdecay=0.1),
                    lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1)),
    # neon's RMSProp divides by sqrt(s + eps) + eps, PyTorch's by sqrt(s) + eps: equal at eps = 0
    "rmsprop": (lambda: RMSProp(learning_rate=0.01, decay_rate=0.9, epsilon=0.0),
                lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, eps=0.0)),
    # neon's Adagrad divides by sqrt(G + eps), PyTorch's by sqrt(G) + eps: equal at eps = 0
    "adagrad": (lambda: Adagrad(learning_rate=0.1, epsilon=0.0, wdecay=0.01),
                lambda p: torch.optim.Adagrad(p, lr=0.1, eps=0.0, weight_decay=0.01)),
    "adadelta": (lambda: Adadelta(decay=0.9, epsilon=1e-6),
                 lambda p: torch.optim.Adadelta(p, lr=1.0, rho=0.9, eps=1e-6)),
    "adadelta_lr": (lambda: Adadelta(decay=0.5, epsilon=1e-2, learning_rate=0.5),
                    lambda p: torch.optim.Adadelta(p, lr=0.5, rho=0.5, eps=1e-2)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch(case):
    ours, theirs = CASES[case]
    assert_same_steps(ng_run(ours()), torch_run(theirs))


def test_gradient_clip_norm_matches_clip_grad_norm():
    ours = ng_run(GradientDescentMomentum(0.1, momentum_coef=0.9, gradient_clip_norm=0.5))
    theirs = torch_run(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                       clip=lambda p: torch.nn.utils.clip_grad_norm_(p, 0.5))
    assert_same_steps(ours, theirs)


def test_gradient_clip_norm_larger_than_norm_is_a_no_op():
    ours = ng_run(Adam(0.05, gradient_clip_norm=1e6))
    assert_same_steps(ours, torch_run(lambda p: torch.optim.Adam(p, lr=0.05)))


def test_gradient_clip_value_matches_clip_grad_value():
    ours = ng_run(Adam(0.05, gradient_clip_value=0.3))
    theirs = torch_run(lambda p: torch.optim.Adam(p, lr=0.05),
                       clip=lambda p: torch.nn.utils.clip_grad_value_(p, 0.3))
    assert_same_steps(ours, theirs)


def test_lr_variable_write_takes_effect_without_recompiling():
    lrs = [0.1, 0.1, 0.01, 0.01, 0.3]
    # ng_run compiles once and writes the lr variable before every step
    ours = ng_run(GradientDescentMomentum(0.1, momentum_coef=0.9), lrs=lrs)
    theirs = torch_run(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), lrs=lrs)
    assert_same_steps(ours, theirs)


def test_adam_lr_write_matches_torch():
    lrs = [0.05, 0.02, 0.02, 0.1, 0.0]
    ours = ng_run(Adam(0.05), lrs=lrs)
    assert_same_steps(ours, torch_run(lambda p: torch.optim.Adam(p, lr=0.05), lrs=lrs))
    np.testing.assert_array_equal(ours[-1][0], ours[-2][0])  # lr 0: no move


def _neon_reference(rule, eps, lr, rho=0.9):
    """neon's RMSProp / Adagrad written in NumPy from the docstring formulas, with autograd from torch."""
    W, b = torch.tensor(W0, requires_grad=True), torch.tensor(B0, requires_grad=True)
    state = [np.zeros_like(W0), np.zeros_like(B0)]
    out = []
    for i in range(STEPS):
        cost = ((torch.tanh(W @ torch.tensor(XS[i])) + b[:, None] - torch.tensor(YS[i])) ** 2).sum() / B
        gw, gb = torch.autograd.grad(cost, [W, b])
        with torch.no_grad():
            for k, (p, g) in enumerate(((W, gw), (b, gb))):
                g = g.numpy()
                if rule == "rmsprop":
                    state[k] = rho * state[k] + (1 - rho) * g ** 2
                    p -= torch.tensor(lr * g / (np.sqrt(state[k] + eps) + eps))
                else:
                    state[k] = state[k] + g ** 2
                    p -= torch.tensor(lr * g / np.sqrt(state[k] + eps))
        out.append((W.detach().numpy().copy(), b.detach().numpy().copy()))
    return out


def test_rmsprop_epsilon_placement_is_neons():
    ours = ng_run(RMSProp(learning_rate=0.01, decay_rate=0.9, epsilon=1e-2))
    assert_same_steps(ours, _neon_reference("rmsprop", 1e-2, 0.01))


def test_adagrad_epsilon_placement_is_neons():
    ours = ng_run(Adagrad(learning_rate=0.1, epsilon=1e-2))
    assert_same_steps(ours, _neon_reference("adagrad", 1e-2, 0.1))
