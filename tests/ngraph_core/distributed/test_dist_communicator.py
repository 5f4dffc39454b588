"""Communicators without MPI: the world of one, argument checks, bounded waits, ``init`` without mpi4py."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.distributed import LocalCommunicator, Request, world
from ngraph_core.distributed.communicator import check_timeout


def test_local_world_is_identity() -> None:
    comm = LocalCommunicator()
    assert (comm.rank, comm.size) == (0, 1)
    a = np.arange(6.0)
    for op in ("sum", "mean", "max", "min"):
        assert comm.allreduce_(a, op=op) is a
        np.testing.assert_array_equal(a, np.arange(6.0))
    req = comm.start_allreduce_(a, "mean")
    assert req.done
    req.wait()
    assert comm.broadcast_(a, root=0) is a
    comm.barrier()
    assert comm.allgather_object({"loss": 1.5}) == [{"loss": 1.5}]


def test_allgather_object_is_json_never_pickle() -> None:
    comm = LocalCommunicator()
    # as JSON reads it, the same on one rank as on many: tuples as lists, NumPy scalars as numbers
    assert comm.allgather_object({"shape": (2, 3), "seed": np.int64(7), "w": np.float32(0.5)}) == \
        [{"shape": [2, 3], "seed": 7, "w": 0.5}]
    for bad in (object(), {1.5j}, {"f": lambda: 0}):
        with pytest.raises(ng.DistributedError, match="JSON-like values"):
            comm.allgather_object(bad)


def test_current_without_init_is_a_local_world(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(world._state, "current", None)
    assert isinstance(ng.distributed.current(), LocalCommunicator)
    assert ng.distributed.current() is ng.distributed.current()
    assert (ng.distributed.rank(), ng.distributed.size(), ng.distributed.is_initialized()) == (0, 1, False)


@pytest.mark.parametrize("call, match", [
    (lambda c: c.allreduce_(np.ones(3), op="avg"), r"expected op in \('sum', 'mean', 'max', 'min'\), received 'avg'"),
    (lambda c: c.allreduce_(np.ones(3, dtype=np.int64), op="mean"), "a mean needs float data, received int64"),
    (lambda c: c.allreduce_(np.ones((3, 4))[:, 1], op="sum"), "expected a C-contiguous, writeable NumPy array"),
    (lambda c: c.allreduce_([1.0, 2.0], op="sum"), "received list"),
    (lambda c: c.broadcast_(np.ones(3), root=1), r"expected a root rank in \[0, 1\), received 1"),
])
def test_bad_arguments_raise_distributed_error(call, match: str) -> None:
    with pytest.raises(ng.DistributedError, match=match):
        call(LocalCommunicator())


def test_timeout_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NG_DIST_TIMEOUT", "7.5")
    assert LocalCommunicator().timeout == 7.5
    assert LocalCommunicator(timeout=2).timeout == 2.0
    monkeypatch.delenv("NG_DIST_TIMEOUT")
    assert LocalCommunicator().timeout == 120.0
    monkeypatch.setenv("NG_DIST_TIMEOUT", "soon")
    with pytest.raises(ng.DistributedError, match=r"NG_DIST_TIMEOUT: expected a positive number .* received 'soon'"):
        LocalCommunicator()
    with pytest.raises(ng.DistributedError, match="received -1"):
        check_timeout(-1)


class _Stuck(LocalCommunicator):
    """A world whose peers never answer: rank 3 of 4 with a short timeout."""

    def __init__(self) -> None:
        super().__init__(timeout=0.05)
        self.rank, self.size = 3, 4


def test_wait_gives_up_after_the_timeout() -> None:
    polls = []
    req = Request("allreduce (sum) of 9 float32 elements", lambda: polls.append(1) or False, _Stuck())
    with pytest.raises(ng.DistributedTimeoutError) as info:
        req.wait()
    text = str(info.value)
    assert "allreduce (sum) of 9 float32 elements: rank 3 of 4 waited 0.05 s" in text
    assert "hint: another rank died or hangs" in text and "NG_DIST_TIMEOUT" in text
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, ng.DistributedError)
    assert len(polls) > 100 and not req.done  # it polled (spinning, then sleeping) and never completed


def test_request_finishes_once_when_complete() -> None:
    answers, finished = iter([False, False, True]), []
    req = Request("barrier", lambda: next(answers), _Stuck(), finish=lambda: finished.append(1))
    assert not req.test()
    req.wait()
    req.wait()
    assert req.done and finished == [1]


def test_init_without_mpi4py_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(world._state, "current", None)
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py raises ImportError
    hint = r"distributed.init: expected mpi4py .*pip install -e '.\[distributed\]'"
    with pytest.raises(ng.DistributedError, match=hint):
        ng.distributed.init()
    assert not ng.distributed.is_initialized()
    with pytest.raises(ng.DistributedError, match="MPICommunicator: expected mpi4py"):
        ng.distributed.MPICommunicator()


def test_init_returns_the_current_communicator_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Stuck()
    monkeypatch.setitem(world._state, "current", fake)
    assert ng.distributed.init() is fake and ng.distributed.current() is fake
    assert ng.distributed.init(timeout=9) is fake and fake.timeout == 9.0
    assert (ng.distributed.rank(), ng.distributed.size(), ng.distributed.is_initialized()) == (3, 4, True)
