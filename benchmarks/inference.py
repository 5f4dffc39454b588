"""Inference (issue 13): ours (``compile_for_inference``) against onnxruntime, and our fp16/int8 against our fp32.

Two models, each built once by neon with seeded weights, then given seeded non-trivial batch-norm
statistics (so that folding them is checked, not skipped):

* ``mlp``: the MNIST MLP of ``examples/mnist_mlp.py`` (784-512-512-10, ReLU, dropout, softmax);
  its ONNX twin is Gemm, Relu, Gemm, Relu, Gemm, Softmax.
* ``resnet20``: ``model_zoo.resnet_cifar10(20)`` (option-A shortcuts); its ONNX twin is Conv,
  BatchNormalization, Relu, Slice + Pad (the option-A shortcut), Add, GlobalAveragePool, Flatten,
  Gemm, Softmax.

The ONNX models are written with ``onnx.helper`` from the *same* weights, read out of our
transformer. Before anything is timed, the driver runs both on one batch and checks that
onnxruntime's probabilities equal ours (fp32, to 1e-4) and reports how far our fp16 and int8
models move from fp32 (largest probability change, top-1 agreement).

Sides (each in its own short-lived process, alternating A B A B, median of the paired ratios,
``run.measure``): ``ngraph`` (fp32), ``onnxruntime`` (CPU execution provider, intra-op threads
= ``--threads``, one inter-op thread), ``ngraph_fp16``, ``ngraph_int8``. Latency is the median
time of one ``infer`` call at batch 1; throughput is images per second at batch 64 (batch /
median call time), one stream.

Usage:
    python benchmarks/inference.py --pairs 3 --threads 1            # every row, then a markdown table
    python benchmarks/inference.py --models mlp --batches 1 --pairs 2
    INFER_MODEL=resnet20 INFER_BATCH=1 python benchmarks/inference.py --side onnxruntime   # one side: JSON
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from harness import Step, blas_info, child_main

SIDES = ("ngraph", "onnxruntime")
STEPS, WARMUP = 50, 10
MODELS = ("mlp", "resnet20")
COMPARISONS = (("ngraph", "onnxruntime"), ("ngraph_fp16", "ngraph"), ("ngraph_int8", "ngraph"))
OPSET = 17
CALIBRATION_SAMPLES = 64


# -- the models, with their weights ----
def _sample_shape(name: str) -> tuple[int, ...]:
    return (784,) if name == "mlp" else (3, 32, 32)


def build_model(name: str, batch: int):
    """The neon ``Model`` ``name`` built for ``batch`` samples, with seeded batch-norm statistics."""
    import numpy as np

    from neon.model import Model

    if name == "mlp":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
        from mnist_mlp import build_model as mnist_mlp

        model = mnist_mlp(seed=0)
    elif name == "resnet20":
        from model_zoo.resnet_cifar10 import resnet_cifar10

        model = Model(resnet_cifar10(20, seed=0))
    else:
        raise SystemExit(f"inference benchmark: expected a model among {MODELS}, received {name!r}")
    model.build(_sample_shape(name), batch_size=batch)
    rng = np.random.default_rng(1)
    for conv in _convs(model):  # running statistics and affine terms far from the identity
        bn, t = conv.batch_norm, model.transformer
        k = t.read_variable(bn.gamma).shape
        t.write_variable(bn.gamma, rng.uniform(0.6, 1.0, k))  # below 1: the logits stay moderate
        t.write_variable(bn.beta, rng.normal(0.0, 0.1, k))
        t.write_variable(bn.mean, rng.normal(0.0, 0.1, k))
        t.write_variable(bn.var, rng.uniform(0.5, 1.5, k))
    return model


def _convs(model):
    from neon.layers import Conv, ResidualBlock

    return [layer for item in model.layers.layers
            for layer in (item.branch if isinstance(item, ResidualBlock) else [item]) if isinstance(layer, Conv)]


def sample_batch(name: str, batch: int):
    """Seeded inputs, batch first: MNIST-like pixels in [0, 1], or normal images (NCHW)."""
    import numpy as np

    rng = np.random.default_rng(2)
    if name == "mlp":
        return rng.uniform(0, 1, (batch, 784)).astype("float32")
    return rng.standard_normal((batch, 3, 32, 32)).astype("float32")


# -- the ONNX twin ----
def onnx_model(model, name: str):
    """The ``onnx.ModelProto`` computing ``model``'s inference output from its current weights (batch dim free)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    read = model.transformer.read_variable
    nodes, inits = [], []

    def const(label: str, value) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value, dtype=np.float32), label))
        return label

    def node(op: str, inputs: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def affine(x: str, layer, k: int) -> str:
        w, b = read(layer.linear.W), read(layer.bias.b)  # W: [out, in]
        return node("Gemm", [x, const(f"fc{k}_W", w), const(f"fc{k}_b", b)], f"fc{k}", transB=1)

    def conv_bn(x: str, conv, k: int, relu: bool) -> str:
        f = conv.filter
        w = np.moveaxis(read(f.W), -1, 0)  # [C, R, S, K] -> (K, C, R, S)
        pads = [p if isinstance(p, int) else p[0] for p in _pads(f.padding, 2)]
        pads += [p if isinstance(p, int) else p[1] for p in _pads(f.padding, 2)]
        y = node("Conv", [x, const(f"conv{k}_W", w)], f"conv{k}", strides=_pads(f.strides, 2), pads=pads)
        bn = conv.batch_norm
        y = node("BatchNormalization", [y, const(f"bn{k}_g", read(bn.gamma)), const(f"bn{k}_b", read(bn.beta)),
                                        const(f"bn{k}_m", read(bn.mean)), const(f"bn{k}_v", read(bn.var))],
                 f"bn{k}", epsilon=float(bn.eps))
        return node("Relu", [y], f"relu{k}") if relu else y

    x = "X"
    if name == "mlp":
        affines = [layer for layer in model.layers.layers if hasattr(layer, "linear")]
        for k, layer in enumerate(affines):
            x = affine(x, layer, k)
            if k < len(affines) - 1:
                x = node("Relu", [x], f"relu{k}")
        shape = [None, 784]
    else:
        from neon.layers import ResidualBlock

        layers = model.layers.layers
        x = conv_bn(x, layers[0], 0, relu=True)
        k = 1
        for block in (layer for layer in layers if isinstance(layer, ResidualBlock)):
            c1, c2 = block.branch
            cin, cout = c1.filter.in_channels, c2.filter.W.axes.lengths[-1]
            h = conv_bn(x, c1, k, relu=True)
            h = conv_bn(h, c2, k + 1, relu=False)
            s, stride = x, _pads(c1.filter.strides, 2)[0]
            if stride != 1 or cin != cout:  # option A: subsample, then zero channels at the end
                s = node("Slice", [s, const(f"sl{k}_starts", [0, 0]), const(f"sl{k}_ends", [2**31 - 1] * 2),
                                   const(f"sl{k}_axes", [2, 3]), const(f"sl{k}_steps", [stride, stride])], f"sl{k}")
                s = node("Pad", [s, const(f"pad{k}_pads", [0, 0, 0, 0, 0, cout - cin, 0, 0])], f"pad{k}")
            x = node("Relu", [node("Add", [h, s], f"add{k}")], f"out{k}")
            k += 2
        x = node("Flatten", [node("GlobalAveragePool", [x], "gap")], "flat")
        x = affine(x, layers[-1], 0)
        shape = [None, 3, 32, 32]
    node("Softmax", [x], "Y", axis=1)
    for init in inits:  # Slice/Pad take int64 tensors
        if init.name.startswith(("sl", "pad")):
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.int64), init.name))
    graph = helper.make_graph(nodes, f"{name}_ngraph_weights",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 10])], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)
    onnx.checker.check_model(proto)
    return proto


def _pads(padding, rank: int) -> list:
    return list(padding) if isinstance(padding, (list, tuple)) else [padding] * rank


def ort_session(proto, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


# -- ours ----
def compile_ours(model, name: str, precision: str, batch: int):
    """``compile_for_inference`` of ``model`` at ``precision`` (int8 calibrated on seeded samples)."""
    import ngraph_core as ng

    calibration = None
    if precision == "int8":  # one batch of seeded samples, in the input's axes order
        calibration = [_axes_order(sample_batch(name, CALIBRATION_SAMPLES))]
    return ng.inference.compile_for_inference(model, precision=precision, calibration=calibration, batch_size=batch)


def _axes_order(x):
    """Batch-first samples as our input's axes order: ``[features..., N]``."""
    import numpy as np

    return np.ascontiguousarray(np.moveaxis(x, 0, -1))


def run_ours(compiled, x):
    """Our compiled model on ``x`` in the input's axes order (``_axes_order``); probabilities ``(batch, 10)``."""
    return compiled.infer(x)[0].T


# -- the sides ----
def _config() -> tuple[str, int]:
    return os.environ.get("INFER_MODEL", "mlp"), int(os.environ.get("INFER_BATCH", "1"))


def _build_ours(precision: str):
    def build(threads: int) -> tuple[Step, str]:
        name, batch = _config()
        compiled = compile_ours(build_model(name, batch), name, precision, batch)
        x = _axes_order(sample_batch(name, batch))
        return (lambda: run_ours(compiled, x)), f"ngraph_core {precision} numpy, {blas_info()}, {name} batch {batch}"

    return build


def build_onnxruntime(threads: int) -> tuple[Step, str]:
    import onnxruntime as ort

    name, batch = _config()
    session = ort_session(onnx_model(build_model(name, batch), name), threads)
    x = sample_batch(name, batch)
    return (lambda: session.run(None, {"X": x})[0]), f"onnxruntime {ort.__version__} CPU, {threads} intra-op " \
                                                     f"threads, {name} batch {batch}"


BUILDERS = {"ngraph": _build_ours("fp32"), "ngraph_fp16": _build_ours("fp16"), "ngraph_int8": _build_ours("int8"),
            "onnxruntime": build_onnxruntime}


# -- the driver ----
def check(name: str, batch: int = 8) -> dict[str, float]:
    """onnxruntime against our fp32 (must agree to 1e-4), and our fp16/int8 against our fp32."""
    import numpy as np

    model = build_model(name, batch)
    x = sample_batch(name, batch)
    fp32 = run_ours(compile_ours(model, name, "fp32", batch), _axes_order(x))
    theirs = ort_session(onnx_model(model, name), 1).run(None, {"X": x})[0]
    gap = float(np.abs(theirs - fp32).max())
    if gap > 1e-4:
        raise SystemExit(f"{name}: onnxruntime and ours disagree by {gap:.2e} (max |p_ort - p_ours|)")
    report = {"ort_vs_fp32": gap}
    for precision in ("fp16", "int8"):
        low = run_ours(compile_ours(model, name, precision, batch), _axes_order(x))
        report[f"{precision}_max_dp"] = float(np.abs(low - fp32).max())
        report[f"{precision}_top1_agree"] = float((low.argmax(1) == fp32.argmax(1)).mean())
    return report


def drive(argv: list[str]) -> int:
    from run import measure

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 64])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--warmup", type=int, default=WARMUP)
    args = parser.parse_args(argv)
    extra = ["--steps", str(args.steps), "--warmup", str(args.warmup)]
    rows, started = [], time.time()
    for name in args.models:
        print(f"check {name}: {check(name)}", file=sys.stderr)
        for batch in args.batches:
            os.environ["INFER_MODEL"], os.environ["INFER_BATCH"] = name, str(batch)
            for threads in args.threads:
                for a, b in COMPARISONS:
                    r = measure("inference", (a, b), threads, args.pairs, extra)
                    fps = f"{1e3 * batch / r['ours']:.0f} / {1e3 * batch / r['theirs']:.0f}"
                    rows.append(f"| {name} | {batch} | {threads} | {a} / {b} | {r['ours']:.3f} | {r['theirs']:.3f} | "
                                f"{fps} | {r['ratio']:.2f} ({r['low']:.2f}–{r['high']:.2f}) | {args.pairs} |")
                    print("\n".join(f"  {side}: {backend}" for side, backend in r["backends"].items()), file=sys.stderr)
    print("| model | batch | threads | A / B | A ms | B ms | images/s A / B | ratio A/B (median of pairs, range) "
          "| pairs |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\n({time.time() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if "--side" in sys.argv:
        child_main(BUILDERS, __doc__.splitlines()[0], warmup=WARMUP, steps=STEPS)
    else:
        sys.exit(drive(sys.argv[1:]))
