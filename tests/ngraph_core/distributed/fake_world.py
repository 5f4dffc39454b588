"""``TwoRanks``: rank 0 of a simulated world of two, for testing collective kernels without MPI.

Its peer holds ``peer`` in every element of every buffer, so an allreduce's result is
known in closed form (``sum = x + peer``, ``mean = (x + peer) / 2``) and a broadcast from
rank 1 gives ``peer``. A started allreduce completes only when its request is tested, so
a value that appears before the wait would show up as a wrong result.
"""

from __future__ import annotations

import numpy as np

from ngraph_core.distributed import LocalCommunicator, Request


class TwoRanks(LocalCommunicator):
    """Rank 0 of two; records ``(op, elements)`` of every allreduce in ``calls``.

    Args:
        peer: the value the simulated rank 1 contributes.
    """

    def __init__(self, peer: float = 1.0) -> None:
        super().__init__(timeout=5.0)
        self.size, self.peer = 2, peer
        self.calls: list[tuple[str, int]] = []

    def start_allreduce_(self, array: np.ndarray, op: str = "sum") -> Request:
        self._check_op(op, self._check_buffer(array, "allreduce_"))
        self.calls.append((op, array.size))
        peer = np.full_like(array, self.peer)

        def finish() -> None:
            if op in ("sum", "mean"):
                np.add(array, peer, out=array)
                if op == "mean":
                    np.divide(array, 2, out=array)
            else:
                (np.maximum if op == "max" else np.minimum)(array, peer, out=array)

        return Request(f"allreduce ({op})", lambda: True, self, finish)

    def broadcast_(self, array: np.ndarray, root: int = 0) -> np.ndarray:
        self._check_root(root)
        if root != self.rank:
            array[...] = self.peer
        return self._check_buffer(array, "broadcast_")

    def allgather_object(self, obj: object) -> list[object]:
        return [obj, obj]
