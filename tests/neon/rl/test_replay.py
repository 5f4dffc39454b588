"""neon.rl.replay: the ring buffer's contents and wraparound, prioritized sampling and its weights."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from neon.rl import PrioritizedReplayBuffer, ReplayBuffer
from neon.rl.replay import ReplayError


def fill(buffer: ReplayBuffer, count: int) -> None:
    for i in range(count):
        buffer.add([i, -i], i % 3, float(i) / 2, [i + 1, -i - 1], i % 4 == 3)


def test_ring_wraps_around_and_keeps_exact_contents():
    buffer = ReplayBuffer(4, obs_shape=(2,))
    fill(buffer, 6)  # transitions 4 and 5 overwrite slots 0 and 1
    assert len(buffer) == 4 and buffer.position == 2
    np.testing.assert_array_equal(buffer.obs, [[4, -4], [5, -5], [2, -2], [3, -3]])
    np.testing.assert_array_equal(buffer.next_obs, [[5, -5], [6, -6], [3, -3], [4, -4]])
    np.testing.assert_array_equal(buffer.actions, [1, 2, 2, 0])
    np.testing.assert_array_equal(buffer.rewards, [2.0, 2.5, 1.0, 1.5])
    np.testing.assert_array_equal(buffer.dones, [0, 0, 0, 1])


def test_partial_buffer_samples_only_stored_slots_with_unit_weights():
    buffer = ReplayBuffer(10, obs_shape=(2,), seed=3)
    fill(buffer, 3)
    batch = buffer.sample(200)
    assert set(batch.indices.tolist()) == {0, 1, 2}
    np.testing.assert_array_equal(batch.obs[:, 0], batch.indices)  # obs i sits in slot i
    np.testing.assert_array_equal(batch.rewards, batch.indices / 2)
    np.testing.assert_array_equal(batch.weights, np.ones(200))
    assert batch.obs.shape == (200, 2) and batch.actions.dtype == np.int64


def test_uint8_frames_are_stored_as_uint8():
    buffer = ReplayBuffer(3, obs_shape=(2, 2), obs_dtype=np.uint8)
    buffer.add(np.full((2, 2), 255), 0, 1.0, np.zeros((2, 2)), False)
    assert buffer.obs.dtype == np.uint8 and buffer.obs[0, 0, 0] == 255


def test_errors_are_typed_and_say_what_was_expected():
    buffer = ReplayBuffer(3, obs_shape=(2,))
    with pytest.raises(ReplayError, match="empty"):
        buffer.sample(1)
    with pytest.raises(ReplayError, match=r"expected observations of shape \(2,\), received \(3,\)"):
        buffer.add([1, 2, 3], 0, 0.0, [1, 2, 3], False)
    with pytest.raises(ng.NgraphError, match="capacity"):
        ReplayBuffer(0, obs_shape=(2,))
    with pytest.raises(ReplayError, match="alpha"):
        PrioritizedReplayBuffer(4, (2,), alpha=-1)


def test_prioritized_frequencies_follow_priority_to_the_alpha():
    alpha = 0.7
    buffer = PrioritizedReplayBuffer(5, obs_shape=(2,), alpha=alpha, seed=0)
    fill(buffer, 5)
    priorities = np.array([1.0, 2.0, 4.0, 0.5, 8.0])
    buffer.update_priorities(np.arange(5), priorities - buffer.eps)
    expected = priorities ** alpha / np.sum(priorities ** alpha)
    np.testing.assert_allclose(buffer.probabilities(), expected, rtol=1e-9)
    counts = np.zeros(5)
    for _ in range(400):
        counts += np.bincount(buffer.sample(50).indices, minlength=5)
    freq = counts / counts.sum()
    # 20,000 draws: the standard error of each frequency is below 0.0035; 0.012 is > 3 of them
    np.testing.assert_allclose(freq, expected, atol=0.012)


def test_importance_weights_formula():
    alpha, beta = 0.6, 0.4
    buffer = PrioritizedReplayBuffer(8, obs_shape=(2,), alpha=alpha, beta=beta, eps=1e-6, seed=1)
    fill(buffer, 4)
    td = np.array([0.5, -3.0, 1.0, 0.1])
    buffer.update_priorities(np.arange(4), td)
    batch = buffer.sample(16)
    p = (np.abs(td) + 1e-6) ** alpha
    probs = p / p.sum()
    w = (4 * probs) ** -beta
    np.testing.assert_allclose(batch.weights, (w / w.max())[batch.indices], rtol=1e-5)
    assert batch.weights.max() <= 1.0
    full = buffer.sample(16, beta=1.0)  # beta=1 fully corrects: P(i) * w_i is the same for every sample
    np.testing.assert_allclose(probs[full.indices] * full.weights, probs.min(), rtol=1e-5)


def test_new_transitions_get_the_largest_priority_and_the_tree_sums_stay_exact():
    buffer = PrioritizedReplayBuffer(3, obs_shape=(2,), alpha=1.0, seed=0)
    fill(buffer, 2)
    buffer.update_priorities(np.array([0, 1]), np.array([5.0, 1.0]))
    buffer.add([9, 9], 0, 0.0, [9, 9], False)
    np.testing.assert_allclose(buffer.probabilities() * buffer.sums[1], [5 + 1e-6, 1 + 1e-6, 5 + 1e-6])
    fill(buffer, 4)  # wraps around: the ring overwrote every slot, priorities stay at the max
    assert len(buffer) == 3 and buffer.sums[1] == pytest.approx(3 * (5 + 1e-6))
    with pytest.raises(ReplayError, match="non-finite"):
        buffer.update_priorities(np.array([0]), np.array([np.nan]))
    with pytest.raises(ReplayError, match="slots in"):
        buffer.update_priorities(np.array([7]), np.array([1.0]))
