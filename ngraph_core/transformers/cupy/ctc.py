"""CTC on the GPU: the forward and backward recursions as CUDA kernels, one thread block per example.

The shared kernel (``kernels/ctc.py``) runs one Python loop over time with a dozen array calls per
frame: on a GPU that is a dozen kernel launches per frame, ~3,000 for the gradient of a 100-frame
batch. Here each recursion is one launch: block ``n`` walks example ``n``'s frames, its threads
cover the extended-label states ``s`` (``S = 2L + 1``), and a barrier separates frames. Three
launches give the loss and the gradient:

* ``alpha``: ``alpha[t, s] = logsumexp(alpha[t-1, s], alpha[t-1, s-1], alpha[t-1, s-2] if allowed)
  + log y[t, l'[s]]`` for ``t < T_n`` (Graves et al. 2006, eq. 6-7), then the loss
  ``-logsumexp(alpha[T_n - 1, S_n - 1], alpha[T_n - 1, S_n - 2])``;
* ``beta``: the mirror recursion from each example's last frame, emission included;
* ``grad``: one thread per frame: ``softmax - sum over s with l'[s] = c of exp(alpha + beta - log y + loss)``,
  zero beyond the example's frames; no atomics, so the result is deterministic.

The recursions run in float64 whatever the logits' dtype (the NumPy kernel keeps its running
scale in float64 for the same reason: a log-likelihood of hundreds of nats loses ~1e-5 relative in
float32). ``log(0)`` is the finite ``NEG`` of the shared kernel, so the two agree on impossible
examples (``inf`` loss and NaN gradient, or zeros with ``zero_infinity``). The log-softmax, the
label checks (``FeedError`` on bad labels or lengths) and the extended labels are the shared
kernel's own code (``CTCPlan``), run on CuPy.

The source is fixed text (no name from the graph reaches it). ``source(host=True)`` adds host loops
running the same bodies with one thread per block (the barrier compiles away), which is how the
tests check the arithmetic against the NumPy kernel with ``nvcc`` on a machine without a GPU.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...ir import Op, OpType
from ..kernels.context import Kernel, KernelContext
from ..kernels.ctc import NEG, CTCPlan

_COMMON = """\
#define NG_NEG (%(neg)r)
#ifdef __CUDA_ARCH__
#define NG_BARRIER() __syncthreads()
#else
#define NG_BARRIER()
#endif

__host__ __device__ __forceinline__ double ng_lse3(double a, double b, double c) {
    double m = a > b ? a : b;
    m = m > c ? m : c;
    if (m <= NG_NEG) return NG_NEG;
    return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

__host__ __device__ __forceinline__ double ng_emit(double logp) { return logp > NG_NEG ? logp : NG_NEG; }
"""

_BODIES = """\
// alpha[t, n, s], t < T_n, s < S_n = 2 L_n + 1; loss[n] = -log p(labels | logits)
__host__ __device__ void ng_ctc_alpha_body_%(suffix)s(int n, int tid, int nthreads, const %(real)s* logp,
        const long long* ext, const long long* il, const long long* ll, double* alpha, double* loss,
        int T, int N, int C, int S, long long blank) {
    const int Tn = (int)il[n], Sn = 2 * (int)ll[n] + 1;
    const long long* lab = ext + (long long)n * S;
    for (int t = 0; t < Tn; ++t) {
        double* cur = alpha + ((long long)t * N + n) * S;
        const double* prev = cur - (long long)N * S;
        for (int s = tid; s < Sn; s += nthreads) {
            const long long k = lab[s];
            double v;
            if (t == 0) {
                v = s < 2 ? 0.0 : NG_NEG;
            } else {
                const double skip = (s >= 2 && k != blank && k != lab[s - 2]) ? prev[s - 2] : NG_NEG;
                v = ng_lse3(prev[s], s >= 1 ? prev[s - 1] : NG_NEG, skip);
            }
            v += ng_emit((double)logp[((long long)t * N + n) * C + k]);
            cur[s] = v > NG_NEG ? v : NG_NEG;
        }
        NG_BARRIER();
    }
    if (tid == 0) {
        double total;
        if (Tn == 0) {
            total = Sn == 1 ? 0.0 : NG_NEG;
        } else {
            const double* last = alpha + ((long long)(Tn - 1) * N + n) * S;
            total = ng_lse3(last[Sn - 1], Sn >= 2 ? last[Sn - 2] : NG_NEG, NG_NEG);
        }
        loss[n] = -total;
    }
}

// beta[t, n, s]: log p(frames t .. T_n - 1 | state s at t), emission at t included
__host__ __device__ void ng_ctc_beta_body_%(suffix)s(int n, int tid, int nthreads, const %(real)s* logp,
        const long long* ext, const long long* il, const long long* ll, double* beta,
        int T, int N, int C, int S, long long blank) {
    const int Tn = (int)il[n], Sn = 2 * (int)ll[n] + 1;
    const long long* lab = ext + (long long)n * S;
    for (int t = Tn - 1; t >= 0; --t) {
        double* cur = beta + ((long long)t * N + n) * S;
        const double* next = cur + (long long)N * S;
        for (int s = tid; s < Sn; s += nthreads) {
            const long long k = lab[s];
            double v;
            if (t == Tn - 1) {
                v = s >= Sn - 2 ? 0.0 : NG_NEG;
            } else {
                const double skip = (s + 2 < Sn && lab[s + 2] != blank && lab[s + 2] != k) ? next[s + 2] : NG_NEG;
                v = ng_lse3(next[s], s + 1 < Sn ? next[s + 1] : NG_NEG, skip);
            }
            v += ng_emit((double)logp[((long long)t * N + n) * C + k]);
            cur[s] = v > NG_NEG ? v : NG_NEG;
        }
        NG_BARRIER();
    }
}

// grad[t, n, c] = softmax - posterior of class c at frame t (zero past T_n; fill for impossible examples)
__host__ __device__ void ng_ctc_grad_body_%(suffix)s(int n, int tid, int nthreads, const %(real)s* logp,
        const long long* ext, const long long* il, const long long* ll, const double* alpha,
        const double* beta, const double* loss, %(real)s* grad, int T, int N, int C, int S, double fill) {
    const int Tn = (int)il[n], Sn = 2 * (int)ll[n] + 1;
    const long long* lab = ext + (long long)n * S;
    const bool impossible = -loss[n] < NG_NEG / 2;
    for (int t = tid; t < T; t += nthreads) {
        const long long row = ((long long)t * N + n) * C;
        %(real)s* g = grad + row;
        if (impossible || t >= Tn) {
            const double value = impossible ? fill : 0.0;
            for (int c = 0; c < C; ++c) g[c] = (%(real)s)value;
            continue;
        }
        for (int c = 0; c < C; ++c) g[c] = (%(real)s)exp((double)logp[row + c]);
        const long long at = ((long long)t * N + n) * S;
        for (int s = 0; s < Sn; ++s) {
            const long long k = lab[s];
            double post = alpha[at + s] + beta[at + s] - ng_emit((double)logp[row + k]) + loss[n];
            post = post < 0.0 ? post : 0.0;  // a posterior is <= 1: the clamp only meets rounding
            g[k] = (%(real)s)((double)g[k] - exp(post));
        }
    }
}
"""

_KERNELS = """\
extern "C" __global__ void ng_ctc_alpha_%(suffix)s(const %(real)s* logp, const long long* ext, const long long* il,
        const long long* ll, double* alpha, double* loss, int T, int N, int C, int S, long long blank) {
    ng_ctc_alpha_body_%(suffix)s(blockIdx.x, threadIdx.x, blockDim.x, logp, ext, il, ll, alpha, loss, T, N, C, S,
                                 blank);
}
extern "C" __global__ void ng_ctc_beta_%(suffix)s(const %(real)s* logp, const long long* ext, const long long* il,
        const long long* ll, double* beta, int T, int N, int C, int S, long long blank) {
    ng_ctc_beta_body_%(suffix)s(blockIdx.x, threadIdx.x, blockDim.x, logp, ext, il, ll, beta, T, N, C, S, blank);
}
extern "C" __global__ void ng_ctc_grad_%(suffix)s(const %(real)s* logp, const long long* ext, const long long* il,
        const long long* ll, const double* alpha, const double* beta, const double* loss, %(real)s* grad,
        int T, int N, int C, int S, double fill) {
    ng_ctc_grad_body_%(suffix)s(blockIdx.x, threadIdx.x, blockDim.x, logp, ext, il, ll, alpha, beta, loss, grad,
                                T, N, C, S, fill);
}
"""

_HOST = """\
extern "C" void ng_ctc_host_%(suffix)s(const %(real)s* logp, const long long* ext, const long long* il,
        const long long* ll, double* alpha, double* beta, double* loss, %(real)s* grad,
        int T, int N, int C, int S, long long blank, double fill) {
    for (int n = 0; n < N; ++n) {
        ng_ctc_alpha_body_%(suffix)s(n, 0, 1, logp, ext, il, ll, alpha, loss, T, N, C, S, blank);
        ng_ctc_beta_body_%(suffix)s(n, 0, 1, logp, ext, il, ll, beta, T, N, C, S, blank);
        ng_ctc_grad_body_%(suffix)s(n, 0, 1, logp, ext, il, ll, alpha, beta, loss, grad, T, N, C, S, fill);
    }
}
"""

_SUFFIX = {"float32": ("f32", "float"), "float64": ("f64", "double")}


def source(host: bool = False) -> str:
    """The CUDA source of the CTC kernels for float32 and float64 logits (``ng_ctc_{alpha,beta,grad}_{f32,f64}``).

    Args:
        host: add ``ng_ctc_host_{f32,f64}``: every example's alpha, beta and gradient on the CPU,
            one thread per block, for a shared library built with ``nvcc -shared``.
    """
    parts = [_COMMON % {"neg": NEG}]
    for suffix, real in _SUFFIX.values():
        names = {"suffix": suffix, "real": real}
        parts += [_BODIES % names, _KERNELS % names] + ([_HOST % names] if host else [])
    return "\n".join(parts)


_module: list[Any] = []  # the compiled RawModule, once per process


def _function(name: str) -> Any:
    if not _module:
        import cupy  # only reached on the CuPy transformer

        _module.append(cupy.RawModule(code=source(), options=("--std=c++17",)))
    return _module[0].get_function(name)


class _CudaPlan(CTCPlan):
    """The shared plan's checks and log-softmax, then the three kernels instead of the frame loop."""

    def __init__(self, op: Op, kc: KernelContext, grad: bool) -> None:
        # a private workspace: the shared plan's scratch request (for its frame loop) is never allocated
        super().__init__(op, dataclasses.replace(kc, workspace=None), grad)

    def run(self, logits: Any, labels: Any, input_lengths: Any, label_lengths: Any, grad: bool) -> tuple[Any, Any]:
        """``(loss [N] float64, gradient (T, N, C) or None)``; losses above ``-NEG / 2`` are impossible."""
        xp, (T, N, C, S) = self.xp, (self.T, self.N, self.C, self.S)
        suffix = _SUFFIX[self.dtype][0]
        lab, il, ll = self.check(labels, input_lengths, label_lengths)
        logp = xp.ascontiguousarray(logits.transpose(self.perm), dtype=self.dtype)
        logp -= logp.max(axis=2, keepdims=True)
        logp -= xp.log(xp.exp(logp).sum(axis=2, keepdims=True))
        ext = xp.full((N, S), self.arg.blank, dtype="int64")
        ext[:, 1::2] = lab
        alpha = xp.empty((T, N, S), dtype="float64")
        loss = xp.empty(N, dtype="float64")
        ints = (xp.int32(T), xp.int32(N), xp.int32(C), xp.int32(S))
        threads = (min(1024, max(32, -(-S // 32) * 32)),)
        _function(f"ng_ctc_alpha_{suffix}")((N,), threads, (logp, ext, il, ll, alpha, loss, *ints,
                                                           xp.int64(self.arg.blank)))
        if not grad:
            return loss, None
        beta = xp.empty((T, N, S), dtype="float64")
        _function(f"ng_ctc_beta_{suffix}")((N,), threads, (logp, ext, il, ll, beta, *ints, xp.int64(self.arg.blank)))
        gradient = xp.empty((T, N, C), dtype=self.dtype)
        fill = 0.0 if self.arg.zero_infinity else float("nan")
        _function(f"ng_ctc_grad_{suffix}")((N,), (min(1024, max(32, -(-T // 32) * 32)),),
                                           (logp, ext, il, ll, alpha, beta, loss, gradient, *ints, xp.float64(fill)))
        return loss, gradient


def ctc(op: Op, kc: KernelContext) -> Kernel:
    """Each example's negative log-likelihood ``[N]``, on the GPU."""
    plan = _CudaPlan(op, kc, grad=False)
    xp = kc.xp

    def cuda_ctc_kernel(out, logits, labels, input_lengths, label_lengths):
        loss, _ = plan.run(logits, labels, input_lengths, label_lengths, grad=False)
        fill = 0.0 if plan.arg.zero_infinity else float("inf")
        xp.copyto(out, xp.where(loss > -NEG / 2, fill, loss), casting="unsafe")
        return out

    return cuda_ctc_kernel


def ctc_grad(op: Op, kc: KernelContext) -> Kernel:
    """``d sum_n ctc[n] / d logits`` with the logits' axes, on the GPU."""
    plan = _CudaPlan(op, kc, grad=True)
    xp = kc.xp

    def cuda_ctc_grad_kernel(out, logits, labels, input_lengths, label_lengths):
        _, gradient = plan.run(logits, labels, input_lengths, label_lengths, grad=True)
        xp.copyto(out.transpose(plan.perm), gradient)
        return out

    return cuda_ctc_grad_kernel


KERNELS = {OpType.CTC: ctc, OpType.CTC_GRAD: ctc_grad}
