"""CTC kernels: the negative log-likelihood (``ctc``) and its gradient (``ctc_grad``), in log space.

Both work on the logits viewed as ``(T, N, C)`` (time, batch, classes; ``ir/ctc.py`` reads
the roles) after a ``log_softmax`` over ``C``. Each example's labels are extended with
blanks, ``l' = (blank, l1, blank, l2, ..., blank)`` of ``S = 2L + 1`` states, and the
forward variables ``alpha[t, n, s]`` (log probability of the first ``t + 1`` frames ending
in state ``s``) follow Graves et al. (2006), eq. 6-7, in log space:

    alpha[t, s] = logsumexp(alpha[t-1, s], alpha[t-1, s-1], alpha[t-1, s-2] if l'[s] != l'[s-2])
                  + log y[t, l'[s]]

from a virtual ``alpha[-1] = (0, -inf, ...)``. The loss is ``-logsumexp(alpha[T_n - 1, 2 L_n],
alpha[T_n - 1, 2 L_n - 1])``. The gradient adds the backward variables ``beta'[t, s]`` (log
probability of frames ``t+1 .. T_n-1`` given state ``s`` at ``t``), the state posteriors
``gamma = exp(alpha + beta' + loss)`` summed per class, and gives ``softmax - posteriors``.

One Python loop runs over time; each step is a few array calls over ``(N, S)`` (the whole
batch and every state at once). Examples shorter than ``T`` run on with values that are
never read: the loss reads ``alpha`` at each example's last frame, ``beta'`` restarts
at it, and the gradient is masked beyond it. ``-inf`` is replaced by a large negative
finite number so that ``logsumexp`` never computes ``-inf - (-inf)``. Labels and lengths
are data: they are checked here, at run time (``FeedError``).
"""

from __future__ import annotations

from typing import Any

from ...errors import FeedError
from ...ir import Op, OpType
from ...ir.ctc import ctc_roles
from .context import Kernel, KernelContext

NEG = -1e30
"""log(0) in the recursions: finite, so differences of two of them are 0, not NaN."""


class CTCPlan:
    """Shapes, views and scratch of one ctc/ctc_grad op, fixed at compile time."""

    def __init__(self, op: Op, kc: KernelContext, grad: bool) -> None:
        logits, labels = op.src[0], op.src[1]
        roles = ctc_roles(logits.axes, op.op.value)
        self.xp, self.dtype, self.arg = kc.xp, kc.dtype_of(op), op.arg
        self.perm = roles.perm
        self.label_perm = (labels.axes.index(roles.batch), 1 - labels.axes.index(roles.batch))
        self.T, self.N, self.C = roles.time.length, roles.batch.length, roles.classes.length
        self.L = labels.axes.size // self.N
        self.S = 2 * self.L + 1
        T, N, C, S = self.T, self.N, self.C, self.S
        specs = [((T, N, C), self.dtype), ((T, N, S), self.dtype), ((T + 1, N, S + 2), self.dtype)]
        specs += [((N, S), self.dtype)] * 3  # logsumexp temporaries
        if grad:
            specs += [((T, N, S), self.dtype), ((N, S + 2), self.dtype), ((N, T, C), self.dtype),
                      ((N, S, C), self.dtype)]
        self.views = kc.scratch().request(specs)

    def check(self, labels: Any, input_lengths: Any, label_lengths: Any) -> tuple[Any, Any, Any]:
        """Labels ``(N, L)`` with padding replaced by the blank, and the lengths as int64; raises ``FeedError``."""
        xp, blank = self.xp, self.arg.blank
        il, ll = input_lengths.astype("int64"), label_lengths.astype("int64")
        for name, x, top, axis in (("input_lengths", il, self.T, "REC"), ("label_lengths", ll, self.L, "L")):
            if bool(xp.any((x < 0) | (x > top))):
                raise FeedError(f"ctc: expected {name} in [0, {top}] (the length of the {axis} axis), received "
                                f"{x.tolist()}; hint: pad the batch to its longest example")
        lab = labels.transpose(self.label_perm).astype("int64")
        used = xp.arange(self.L)[None, :] < ll[:, None]
        bad = used & ((lab < 0) | (lab >= self.C) | (lab == blank))
        if bool(xp.any(bad)):
            n, i = (int(k) for k in xp.argwhere(bad)[0])
            raise FeedError(f"ctc: expected labels in [0, {self.C}) other than the blank {blank}, received "
                            f"{int(lab[n, i])} at position {i} of example {n}; hint: the class axis counts the "
                            "blank, which never appears in the labels")
        return xp.where(used, lab, blank), il, ll

    def alpha(self, logits: Any, labels: Any, input_lengths: Any, label_lengths: Any) -> dict[str, Any]:
        """The forward pass: log-softmax, the extended labels, alpha for every frame, and the loss."""
        xp, (T, N, C, S) = self.xp, (self.T, self.N, self.C, self.S)
        buffers = self.views()
        logp, lp, A, m, e, a2 = buffers[:6]
        lab, il, ll = self.check(labels, input_lengths, label_lengths)
        xp.copyto(logp, logits.transpose(self.perm), casting="unsafe")
        logp -= logp.max(axis=2, keepdims=True)
        logp -= xp.log(xp.exp(logp).sum(axis=2, keepdims=True))
        ext = xp.full((N, S), self.arg.blank, dtype="int64")
        ext[:, 1::2] = lab
        flat = ext + (xp.arange(N) * C)[:, None]
        xp.take(logp.reshape(T, N * C), flat, axis=1, out=lp)
        xp.maximum(lp, NEG, out=lp)
        skip = xp.zeros((N, S), dtype=bool)
        skip[:, 3::2] = ext[:, 3::2] != ext[:, 1:-2:2]
        skip_add = xp.where(skip, 0.0, NEG).astype(self.dtype)
        A[:, :, :2] = NEG
        A[0, :, 2:] = NEG
        A[0, :, 2] = 0.0
        scale = xp.zeros((T + 1, N), dtype="float64")  # alpha[t] = A[t + 1] + scale[t + 1]
        for t in range(T):
            prev, cur = A[t], A[t + 1, :, 2:]
            xp.add(prev[:, :-2], skip_add, out=a2)
            _logsumexp3(xp, prev[:, 2:], prev[:, 1:-1], a2, cur, m, e)
            cur += lp[t]
            top = cur.max(axis=1)  # finite: the all-blank state is always reachable
            cur -= top[:, None]
            xp.add(scale[t], top, out=scale[t + 1])
        rows, end = xp.arange(N), 2 + 2 * ll
        last = A[il, rows]  # alpha at each example's last frame (il = 0: the virtual start)
        relative = _logsumexp2(xp, last[rows, end], last[rows, end - 1])
        impossible = relative < NEG / 2
        return {"buffers": buffers, "logp": logp, "lp": lp, "A": A, "ext": ext, "skip_add": skip_add,
                "il": il, "ll": ll, "scale": scale, "total": relative + scale[il, rows], "impossible": impossible}

    def loss(self, state: dict[str, Any], out: Any) -> Any:
        xp, impossible = self.xp, state["impossible"]
        fill = 0.0 if self.arg.zero_infinity else float("inf")
        out[...] = xp.where(impossible, fill, -state["total"])
        return out

    def gradient(self, state: dict[str, Any], out: Any) -> Any:
        """``softmax - posteriors`` per frame (zero beyond each example's frames) into ``out``."""
        xp, (T, N, S) = self.xp, (self.T, self.N, self.S)
        logp, lp, A, m, e, a2, gamma, B, post, onehot = state["buffers"]
        il, ll, skip_add = state["il"], state["ll"], state["skip_add"]
        skip_next = xp.full((N, S), NEG, dtype=self.dtype)  # may state s jump to s + 2
        skip_next[:, :-2] = skip_add[:, 2:]
        start = xp.full((N, S), NEG, dtype=self.dtype)  # beta' at each example's last frame, via B
        start[xp.arange(N), 2 * ll] = 0.0
        ends: dict[int, list[int]] = {}
        for n, length in enumerate(il.tolist()):
            ends.setdefault(length - 1, []).append(n)
        B[...] = NEG  # beta' + log y at frame t + 1 (less b_scale), padded with two impossible states
        b_scale = xp.zeros(N, dtype="float64")
        offset = xp.empty((T, N), dtype="float64")  # gamma[t] holds log posteriors less offset[t]
        for t in range(T - 1, -1, -1):
            if t in ends:
                idx = xp.asarray(ends[t])
                B[idx, :S] = start[idx]
                b_scale[idx] = 0.0
            xp.add(B[:, 2:], skip_next, out=a2)
            _logsumexp3(xp, B[:, :S], B[:, 1:S + 1], a2, gamma[t], m, e)
            xp.add(gamma[t], lp[t], out=B[:, :S])
            top = B[:, :S].max(axis=1)
            B[:, :S] -= top[:, None]
            xp.add(b_scale, state["scale"][t + 1], out=offset[t])
            b_scale += top
            gamma[t] += A[t + 1, :, 2:]
        impossible = state["impossible"]
        offset -= xp.where(impossible, 0.0, state["total"])[None, :]
        gamma += offset.astype(self.dtype)[:, :, None]
        # posteriors are <= 1: the clamp only meets rounding, frames past an example's end and
        # impossible examples, all of which are masked or replaced below
        xp.minimum(gamma, 0.0, out=gamma)
        xp.exp(gamma, out=gamma)
        live = (xp.arange(T)[:, None] < il[None, :])[:, :, None]  # frames each example has
        gamma *= live
        onehot[...] = 0.0
        onehot[xp.arange(N)[:, None], xp.arange(S)[None, :], state["ext"]] = 1.0
        xp.matmul(gamma.transpose(1, 0, 2), onehot, out=post)
        g = out.transpose(self.perm)
        xp.exp(logp, out=logp)
        logp *= live
        xp.subtract(logp, post.transpose(1, 0, 2), out=g, casting="unsafe")
        if bool(xp.any(impossible)):
            fill = 0.0 if self.arg.zero_infinity else float("nan")
            g[...] = xp.where(impossible[None, :, None], fill, g)
        return out


def _logsumexp3(xp: Any, a0: Any, a1: Any, a2: Any, out: Any, m: Any, e: Any) -> None:
    """``out = log(exp(a0) + exp(a1) + exp(a2))`` elementwise, shifted by the maximum (``m``, ``e``: scratch)."""
    xp.maximum(a0, a1, out=m)
    xp.maximum(m, a2, out=m)
    xp.subtract(a0, m, out=out)
    xp.exp(out, out=out)
    for a in (a1, a2):
        xp.subtract(a, m, out=e)
        xp.exp(e, out=e)
        out += e
    xp.log(out, out=out)
    out += m


def _logsumexp2(xp: Any, a: Any, b: Any) -> Any:
    m = xp.maximum(a, b)
    return m + xp.log(xp.exp(a - m) + xp.exp(b - m))


def ctc(op: Op, kc: KernelContext) -> Kernel:
    """Each example's negative log-likelihood ``[N]``."""
    plan = CTCPlan(op, kc, grad=False)

    def ctc_kernel(out, logits, labels, input_lengths, label_lengths):
        return plan.loss(plan.alpha(logits, labels, input_lengths, label_lengths), out)

    return ctc_kernel


def ctc_grad(op: Op, kc: KernelContext) -> Kernel:
    """``d sum_n ctc[n] / d logits``, with the logits' axes."""
    plan = CTCPlan(op, kc, grad=True)

    def ctc_grad_kernel(out, logits, labels, input_lengths, label_lengths):
        return plan.gradient(plan.alpha(logits, labels, input_lengths, label_lengths), out)

    return ctc_grad_kernel


KERNELS = {OpType.CTC: ctc, OpType.CTC_GRAD: ctc_grad}
