"""The measured convolution choice (``transformers/numpy/conv_choice.py``) and its one exception: a run of several
ranks never times, so every rank and every run takes the same kernel for a layer."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.distributed import LocalCommunicator
from ngraph_core.transformers.numpy import conv_choice


class TwoRanks(LocalCommunicator):
    """Rank 0 of a world of two whose peer always holds the same values (the allreduce is the identity)."""

    def __init__(self) -> None:
        super().__init__(timeout=5.0)
        self.size = 2


@pytest.fixture(autouse=True)
def private_choices(tmp_path, monkeypatch):
    monkeypatch.setattr(conv_choice, "choices_path", lambda: tmp_path / "conv_choices.json")  # compiled kernels: shared
    monkeypatch.delenv("NG_CONV", raising=False)
    monkeypatch.setattr(conv_choice, "MEASURED", {})
    monkeypatch.setattr(conv_choice, "_DECIDED", {})
    monkeypatch.setattr(conv_choice, "_loaded", False)


def conv_step(communicator=None, calls: int = 1) -> list[np.ndarray]:
    """A 3x3 convolution's output and its data and filter gradients (each has a Winograd and an im2col kernel),
    from the last of ``calls`` calls; every call's values agree with the first's."""
    rng = np.random.default_rng(0)
    C, H, W, N, K = (ng.make_axis(n, name) for n, name in ((4, "C"), (10, "H"), (10, "W"), (8, "N"), (6, "K")))
    x = ng.placeholder([C, H, W, N])
    w = ng.variable([C, ng.make_axis(3, "R"), ng.make_axis(3, "S"), K],
                    initial_value=rng.standard_normal((4, 3, 3, 6)).astype(np.float32))
    y = ng.convolution(x, w, padding=1)
    loss = ng.sum(y * y)
    xv = rng.standard_normal((4, 10, 10, 8)).astype(np.float32)
    with ng.transformers.make_transformer(communicator=communicator) as t:
        step = t.computation([y, *ng.gradients(loss, [x, w])], x)
        first = [np.array(r) for r in step(xv)]
        for _ in range(calls - 1):
            for got, expected in zip(step(xv), first):  # each call runs one candidate: the same values
                np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
        return first


def test_one_process_times_the_candidates_one_per_call(monkeypatch):
    """Each call times one candidate (no call runs them all); once each has ``TIMED_CALLS`` timings the
    choice is made and recorded."""
    ran: list[str] = []
    real = conv_choice.choose

    def spying_choose(key, candidates, ready=None):
        counted = {name: (lambda fn, name: lambda *a: (ran.append(name), fn(*a))[1])(fn, name)
                   for name, fn in candidates.items()}
        return real(key, counted, ready)

    monkeypatch.setattr(conv_choice, "choose", spying_choose)
    conv_step()
    assert not conv_choice._DECIDED
    assert ran == ["im2col"] * 3  # one candidate for each of the three kernels in the first call
    ran.clear()
    conv_step(calls=3 * conv_choice.TIMED_CALLS - 1)  # at most three candidates (im2col, Winograd, per image)
    assert not conv_choice._DECIDED or {key.split("|")[0] for key in conv_choice._DECIDED} == {"bprop_data"}
    conv_step(calls=3 * conv_choice.TIMED_CALLS)
    assert {key.split("|")[0] for key in conv_choice._DECIDED} == {"conv", "bprop_data", "bprop_filter"}
    for key, entry in conv_choice._DECIDED.items():
        expected = {"im2col", "winograd"} | ({"image"} if not key.startswith("bprop_data") else set())
        assert set(entry["ms"]) == expected
    assert conv_choice.choices_path().exists()


def test_a_candidate_not_ready_is_not_timed():
    """While ``ready`` says False the calls run im2col untimed; the measurement starts when it says True."""
    ready, ran = [False], []
    candidates = {"im2col": lambda out: ran.append("im2col") or out, "winograd": lambda out: ran.append("w") or out}
    kernel = conv_choice.choose("conv|test", candidates, lambda: ready[0])
    for _ in range(3):
        kernel(None)
    assert ran == ["im2col"] * 3 and not conv_choice._DECIDED
    ready[0] = True
    for _ in range(2 * conv_choice.TIMED_CALLS):
        kernel(None)
    assert ran[3:] == ["im2col", "w"] * conv_choice.TIMED_CALLS
    assert conv_choice._DECIDED["conv|test"]["chosen"] in ("im2col", "winograd")


def test_several_ranks_never_time_and_take_the_unmeasured_choice(monkeypatch):
    """Two ranks: no layer is timed, nothing is recorded, and every kernel is ``UNMEASURED_ORDER``'s first that
    applies (here Winograd everywhere), bit for bit, whatever the disk record says."""
    conv_choice.MEASURED.update({"poisoned": {"chosen": "im2col"}})  # a record is ignored, not read
    monkeypatch.setattr(conv_choice, "choose",
                        lambda key, candidates, ready=None: pytest.fail(f"timed {key} with ranks"))
    two_ranks = conv_step(TwoRanks())
    assert not conv_choice._DECIDED and not conv_choice.choices_path().exists()
    assert conv_choice.UNMEASURED_ORDER == ("winograd", "im2col")
    monkeypatch.setenv("NG_CONV", "winograd")
    for got, expected in zip(two_ranks, conv_step()):
        np.testing.assert_array_equal(got, expected)
