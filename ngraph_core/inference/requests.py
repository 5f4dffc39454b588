"""Inference requests: one synchronous or asynchronous run at a time, and a pool of them in threads.

An ``InferRequest`` owns one executor of a compiled model (``CompiledModel.new_executor()``: its
own transformer and arena, so requests never share buffers) and one worker thread that runs
``start_async`` jobs. ``AsyncInferQueue`` keeps ``jobs`` requests busy: each ``start_async`` takes
the next idle request (waiting for one when all are busy) and a callback gets each job's results
with its userdata. NumPy releases the GIL inside BLAS and most ufunc loops, so requests running
in threads overlap on several cores; the Python between kernels does not.

Example:
    >>> queue = AsyncInferQueue(compiled, jobs=4)
    >>> queue.set_callback(lambda request, i: answers.__setitem__(i, request.results[0]))
    >>> for i, x in enumerate(images): queue.start_async([x], userdata=i)
    >>> queue.wait_all()
"""

from __future__ import annotations

import queue as queue_module
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import NgraphError

__all__ = ["AsyncInferQueue", "InferRequest", "RequestBusyError", "RequestError", "RequestTimeoutError"]

Callback = Callable[["InferRequest", Any], None]


class RequestError(NgraphError, ValueError):
    """An inference request used the wrong way (bad inputs, results before any run, a closed request)."""


class RequestBusyError(RequestError):
    """A request asked to start while its previous job still runs."""


class RequestTimeoutError(RequestError, TimeoutError):
    """``wait(timeout)`` ran out before the job finished."""


def _input_names(compiled: Any) -> list[str]:
    return [str(getattr(i, "name", i)) for i in getattr(compiled, "inputs", ())]


def _as_arrays(inputs: Any, names: list[str], who: str) -> list[Any]:
    """The positional arrays of ``inputs``: one array, a sequence in the model's input order, or a mapping by name."""
    if isinstance(inputs, Mapping):
        unknown = sorted(set(map(str, inputs)) - set(names))
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise RequestError(f"{who}: expected inputs named {names}, received {sorted(map(str, inputs))}; "
                               "hint: key the mapping by the names in compiled.inputs")
        return [inputs[n] for n in names]
    if isinstance(inputs, (np.ndarray, int, float)) or hasattr(inputs, "__array_interface__"):
        return [inputs]
    if isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes)):
        return list(inputs)
    raise RequestError(f"{who}: expected an array, a list of arrays or a mapping name -> array, received "
                       f"{type(inputs).__name__}")


class InferRequest:
    """One inference request over a compiled model: ``infer`` runs now, ``start_async`` in its thread.

    Args:
        compiled: a ``CompiledModel`` (``compile_for_inference`` or ``ng.inference.load``); the
            request takes its own executor from ``compiled.new_executor()``.

    Attributes:
        results: the outputs of the last finished job (a list of NumPy arrays).
        latency_s: seconds the last job's execution took (from start of the run to its end).
        userdata: the userdata of the last ``start_async``.

    Raises:
        RequestError: ``compiled`` has no ``new_executor``.

    Example:
        >>> request = InferRequest(compiled)
        >>> probs, = request.infer([x])
        >>> request.start_async([x]); probs, = request.wait()
    """

    def __init__(self, compiled: Any) -> None:
        if not callable(getattr(compiled, "new_executor", None)):
            raise RequestError(f"InferRequest: expected a compiled model with new_executor(), received "
                               f"{type(compiled).__name__}; hint: compile_for_inference(model) makes one")
        self.compiled = compiled
        self._names = _input_names(compiled)
        self._executor = compiled.new_executor()
        self._callback: Callback | None = None
        self._results: list[np.ndarray] | None = None
        self._error: BaseException | None = None
        self.latency_s = 0.0
        self.userdata: Any = None
        self._idle = threading.Event()
        self._idle.set()
        self._wake = threading.Event()
        self._job: list[Any] | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._on_done: Callable[[InferRequest], None] | None = None  # the queue's hook: mark this request idle
        self._on_error: Callable[[BaseException], None] | None = None  # the queue's hook: keep the error

    # -- running ------------------------------------------------------------------------------
    def infer(self, inputs: Any) -> list[np.ndarray]:
        """Run one job now, in the calling thread.

        Args:
            inputs: one array, a list of arrays in ``compiled.inputs`` order, or a mapping name -> array.

        Returns:
            the outputs, a list of NumPy arrays in ``compiled.outputs`` order.

        Raises:
            RequestBusyError: an async job of this request still runs.
            RequestError: inputs of the wrong kind or names.
            NgraphError: what the executor raises (``FeedError`` for a wrong shape or dtype).

        Example:
            >>> probs, = InferRequest(compiled).infer([x])
        """
        self._claim("infer")
        try:
            return self._run(_as_arrays(inputs, self._names, "InferRequest.infer"))
        finally:
            self._idle.set()

    def start_async(self, inputs: Any, userdata: Any = None) -> None:
        """Start one job in this request's thread and return at once; ``wait`` gives its outputs.

        Args:
            inputs: as for ``infer``.
            userdata: handed to the callback with the request.

        Raises:
            RequestBusyError: the previous job still runs (``wait`` for it first).
            RequestError: inputs of the wrong kind, or a closed request.

        Example:
            >>> request.start_async([x], userdata=7); outputs = request.wait()
        """
        arrays = _as_arrays(inputs, self._names, "InferRequest.start_async")
        self._claim("start_async")
        self._job, self.userdata, self._results, self._error = arrays, userdata, None, None
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"InferRequest-{id(self):x}", daemon=True)
            self._thread.start()
        self._wake.set()

    def wait(self, timeout: float | None = None) -> list[np.ndarray]:
        """Block until the current job (and its callback) finished; return its outputs.

        Args:
            timeout: seconds to wait at most (default: no limit).

        Returns:
            the outputs of the job, as ``infer`` returns them.

        Raises:
            RequestTimeoutError: the job still runs after ``timeout`` seconds.
            Exception: the exception the job raised, re-raised here (with its traceback).

        Example:
            >>> request.start_async([x]); probs, = request.wait(timeout=5)
        """
        if not self._idle.wait(timeout):
            raise RequestTimeoutError(f"InferRequest.wait: the job still runs after {timeout} s; "
                                      "hint: wait longer, or call wait() without a timeout")
        if self._error is not None:
            raise self._error
        return self.results

    @property
    def busy(self) -> bool:
        """True while a job runs."""
        return not self._idle.is_set()

    @property
    def results(self) -> list[np.ndarray]:
        """The outputs of the last finished job.

        Raises:
            RequestError: no job has finished yet, or the last one failed.
        """
        if self._results is None:
            why = f"the last job failed ({type(self._error).__name__})" if self._error else "no job has finished"
            raise RequestError(f"InferRequest.results: {why}; hint: call infer(), or start_async() then wait()")
        return self._results

    def set_callback(self, callback: Callback | None) -> None:
        """Call ``callback(request, userdata)`` in the request's thread after each async job (None: no callback).

        Raises:
            RequestError: ``callback`` is not callable.
        """
        if callback is not None and not callable(callback):
            raise RequestError(f"InferRequest.set_callback: expected a callable (request, userdata), received "
                               f"{type(callback).__name__}")
        self._callback = callback

    def close(self) -> None:
        """Stop the worker thread (after the running job); the request then refuses new jobs."""
        self._closed = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None

    # -- internals -------------------------------------------------------------------------------
    def _claim(self, who: str) -> None:
        if self._closed:
            raise RequestError(f"InferRequest.{who}: the request is closed; hint: make a new InferRequest")
        if not self._idle.is_set():
            raise RequestBusyError(f"InferRequest.{who}: the previous job still runs; hint: call wait() first, "
                                   "or use an AsyncInferQueue to keep several requests busy")
        self._idle.clear()

    def _run(self, arrays: list[Any]) -> list[np.ndarray]:
        start = time.perf_counter()
        out = self._executor(*arrays)
        self.latency_s = time.perf_counter() - start
        self._results = list(out) if isinstance(out, (list, tuple)) else [out]
        return self._results

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closed:
                return
            arrays, self._job = self._job, None
            try:
                self._run(arrays)
                if self._callback is not None:
                    self._callback(self, self.userdata)
            except BaseException as exc:  # noqa: BLE001 - handed to wait(), which re-raises it in the caller
                self._error = exc
                if self._on_error is not None:  # recorded before the request is idle, so wait_all sees it
                    self._on_error(exc)
            self._idle.set()
            if self._on_done is not None:
                self._on_done(self)


class AsyncInferQueue:
    """A pool of ``jobs`` inference requests, each running its jobs in its own thread.

    Args:
        compiled: a ``CompiledModel``; each request gets its own executor from it.
        jobs: how many requests run at once.

    Attributes:
        requests: the pool's ``InferRequest`` objects.

    Raises:
        RequestError: ``jobs`` below 1.

    Example:
        >>> pool = AsyncInferQueue(compiled, jobs=4)
        >>> pool.set_callback(lambda request, i: results.__setitem__(i, request.results))
        >>> for i, x in enumerate(batches): pool.start_async([x], i)
        >>> pool.wait_all()
    """

    def __init__(self, compiled: Any, jobs: int = 4) -> None:
        if not isinstance(jobs, int) or jobs < 1:
            raise RequestError(f"AsyncInferQueue: expected jobs >= 1, received {jobs!r}; hint: one per core is a "
                               "good start")
        self.requests = [InferRequest(compiled) for _ in range(jobs)]
        self._idle: queue_module.SimpleQueue[int] = queue_module.SimpleQueue()
        self._errors: list[BaseException] = []
        self._lock = threading.Lock()
        for i, request in enumerate(self.requests):
            request._on_done = self._finished
            request._on_error = self._failed
            self._idle.put(i)

    def __len__(self) -> int:
        return len(self.requests)

    def set_callback(self, callback: Callback | None) -> None:
        """Call ``callback(request, userdata)`` after every job, in the thread of the request that ran it.

        Raises:
            RequestError: ``callback`` is not callable.
        """
        for request in self.requests:
            request.set_callback(callback)

    def start_async(self, inputs: Any, userdata: Any = None) -> InferRequest:
        """Start a job on the next idle request, waiting for one when all are busy.

        Args:
            inputs: one array, a list of arrays, or a mapping name -> array.
            userdata: handed to the callback with the request.

        Returns:
            the request that runs the job.

        Raises:
            RequestError: inputs of the wrong kind.

        Example:
            >>> pool.start_async([x], userdata=("image", 3))
        """
        request = self.requests[self._idle.get()]
        try:
            request.start_async(inputs, userdata)
        except BaseException:
            self._idle.put(self.requests.index(request))
            raise
        return request

    def wait_all(self) -> None:
        """Block until every started job and its callback finished.

        Raises:
            Exception: the first exception a job (or a callback) raised since the last ``wait_all``.
        """
        for request in self.requests:
            request._idle.wait()
        with self._lock:
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]

    @property
    def idle(self) -> bool:
        """True when no request runs a job."""
        return not any(r.busy for r in self.requests)

    def close(self) -> None:
        """Wait for the running jobs, then stop every request's thread."""
        for request in self.requests:
            request._idle.wait()
            request.close()

    def _failed(self, error: BaseException) -> None:
        with self._lock:
            self._errors.append(error)

    def _finished(self, request: InferRequest) -> None:
        self._idle.put(self.requests.index(request))
