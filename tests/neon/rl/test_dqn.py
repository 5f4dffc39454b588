"""neon.rl.dqn: the Huber loss, target sync (hard and soft), Double DQN targets, the update and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from neon.initializers import Constant
from neon.layers import Affine
from neon.optimizers import Adam, GradientDescentMomentum
from neon.rl import Batch, DQNAgent, RLError, huber

OBS, ACTIONS = 3, 4


def make_agent(double: bool = True, optimizer: object = None, seed: int = 0) -> DQNAgent:
    layers = [Affine(8, activation="relu", bias=Constant(0.1)), Affine(ACTIONS, bias=Constant(0))]
    return DQNAgent(layers, obs_shape=(OBS,), n_actions=ACTIONS, optimizer=optimizer, gamma=0.9, double=double,
                    batch_size=6, seed=seed)


def fixed_batch(n: int = 6, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    return Batch(rng.standard_normal((n, OBS)).astype(np.float32), rng.integers(0, ACTIONS, n),
                 rng.standard_normal(n).astype(np.float32), rng.standard_normal((n, OBS)).astype(np.float32),
                 np.array([0, 1, 0, 0, 1, 0][:n], np.float32), rng.uniform(0.2, 1.0, n).astype(np.float32),
                 np.arange(n))


def scramble_target(agent: DQNAgent, seed: int = 5) -> None:
    """Give the target network weights of its own, so its argmax differs from the online one's."""
    rng = np.random.default_rng(seed)
    for var in agent.target.variables:
        value = agent.transformer.read_variable(var)
        agent.transformer.write_variable(var, rng.standard_normal(value.shape).astype(np.float32))


def np_huber(x: np.ndarray, delta: float) -> np.ndarray:
    return np.where(np.abs(x) <= delta, 0.5 * x ** 2, delta * (np.abs(x) - 0.5 * delta))


@pytest.mark.parametrize("delta", [1.0, 0.5, 2.0])
def test_huber_value_and_gradient_match_numpy(delta):
    x = ng.placeholder([ng.make_axis(7, "F")], dtype="float64")
    value = huber(x, delta)
    grad = ng.deriv(ng.sum(value), x)
    data = np.array([-3.0, -delta, -0.3, 0.0, 0.2, delta * 0.99, 4.0])
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        got, got_grad = t.computation([value, grad], x)(data)
    np.testing.assert_allclose(got, np_huber(data, delta), rtol=1e-12)
    np.testing.assert_allclose(got_grad, np.clip(data, -delta, delta), rtol=1e-12)  # d huber = clip(x)
    with pytest.raises(RLError, match="delta"):
        huber(x, 0.0)


def test_hard_sync_copies_the_online_weights():
    agent = make_agent()
    t = agent.transformer
    pairs = list(zip(agent.online.variables, agent.target.variables, strict=True))
    assert all(np.array_equal(t.read_variable(o), t.read_variable(tv)) for o, tv in pairs)  # equal at start
    agent.update(fixed_batch())
    assert not all(np.array_equal(t.read_variable(o), t.read_variable(tv)) for o, tv in pairs)
    agent.sync_target()
    assert all(np.array_equal(t.read_variable(o), t.read_variable(tv)) for o, tv in pairs)


def test_soft_sync_is_exact_polyak_arithmetic():
    agent = make_agent()
    scramble_target(agent)
    t = agent.transformer
    pairs = zip(agent.online.variables, agent.target.variables, strict=True)
    before = [(t.read_variable(o), t.read_variable(tv)) for o, tv in pairs]
    agent.sync_target(tau=0.25)
    for (o, tv), var in zip(before, agent.target.variables):
        np.testing.assert_allclose(t.read_variable(var), 0.25 * o + 0.75 * tv, rtol=1e-6, atol=1e-7)
    with pytest.raises(RLError, match=r"tau in \(0, 1\]"):
        agent.sync_target(tau=0.0)


@pytest.mark.parametrize("double", [True, False])
def test_targets_match_a_numpy_reference(double):
    agent = make_agent(double=double)
    scramble_target(agent)
    batch = fixed_batch()
    q_online = agent.q_values(batch.next_obs)
    q_target = agent.q_values(batch.next_obs, network="target")
    best = np.argmax(q_online, axis=1)
    assert np.any(best != np.argmax(q_target, axis=1))  # the two rules differ on this batch
    bootstrap = q_target[np.arange(6), best] if double else q_target.max(axis=1)
    expected = batch.rewards + 0.9 * (1 - batch.dones) * bootstrap
    np.testing.assert_allclose(agent.target_values(batch), expected, rtol=1e-5, atol=1e-6)


def test_update_returns_the_weighted_huber_loss_and_td_errors_then_learns():
    agent = make_agent(optimizer=Adam(0.02))
    scramble_target(agent)
    batch = fixed_batch()
    q = agent.q_values(batch.obs)[np.arange(6), batch.actions]
    y = agent.target_values(batch)
    loss, td = agent.update(batch)
    np.testing.assert_allclose(td, q - y, rtol=1e-5, atol=1e-6)
    assert loss == pytest.approx(float(np.mean(batch.weights * np_huber(q - y, 1.0))), rel=1e-5)
    for _ in range(200):
        last, _ = agent.update(batch)
    assert last < 0.1 * loss and agent.updates == 201


def test_act_is_greedy_at_epsilon_zero_and_uniform_at_one():
    agent = make_agent()
    obs = np.array([0.5, -1.0, 2.0], np.float32)
    assert agent.act(obs, 0.0) == int(np.argmax(agent.q_values(obs[None])[0]))
    counts = np.bincount([agent.act(obs, 1.0) for _ in range(2000)], minlength=ACTIONS)
    np.testing.assert_allclose(counts / 2000, 0.25, atol=0.04)


def test_save_and_load_round_trip(tmp_path):
    agent = make_agent()
    agent.update(fixed_batch())
    agent.save_params(tmp_path / "dqn.h5")
    other = make_agent(seed=1)
    obs = fixed_batch().obs
    assert not np.allclose(other.q_values(obs), agent.q_values(obs))
    other.load_params(tmp_path / "dqn.h5")
    np.testing.assert_array_equal(other.q_values(obs), agent.q_values(obs))
    np.testing.assert_array_equal(other.q_values(obs, "target"), agent.q_values(obs, "target"))
    assert other.updates == 1


def test_bad_layers_and_observations_raise():
    with pytest.raises(RLError, match=r"expected \[4, N\]"):
        DQNAgent([Affine(3)], obs_shape=(OBS,), n_actions=4)
    agent = make_agent()
    with pytest.raises(RLError, match=r"expected observations of shape \(1, 3\), received \(1, 2\)"):
        agent.q_values(np.zeros((1, 2)))
    with pytest.raises(RLError, match="gamma"):
        DQNAgent([Affine(4)], obs_shape=(OBS,), n_actions=4, gamma=1.5)


def test_gradient_clipping_bounds_the_step():
    agent = make_agent(optimizer=GradientDescentMomentum(1.0, gradient_clip_norm=1e-3))
    t = agent.transformer
    before = [t.read_variable(v) for v in agent.online.variables]
    batch = fixed_batch()._replace(rewards=np.full(6, 1e4, np.float32))  # a huge TD error
    agent.update(batch)
    moved = np.sqrt(sum(np.sum((t.read_variable(v) - b) ** 2) for v, b in zip(agent.online.variables, before)))
    assert moved == pytest.approx(1e-3, rel=1e-3)  # lr 1 * the clipped global gradient norm
