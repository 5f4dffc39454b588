"""The inference engine: compile a trained model once, quantize it, deploy it as one file, run it.

``compile_for_inference`` turns a neon ``Model`` (or ops plus weights, or a graph document)
into a ``CompiledModel``: weights frozen into constants, batch norm folded, training-only ops
dropped, fused and memory-planned for inference, optionally quantized to FP16 or INT8.
``CompiledModel.save`` writes one versioned file and ``load`` reads it back.

Example:
    >>> compiled = ng.inference.compile_for_inference(model, precision="int8", calibration=train)
    >>> compiled.save("mnist.ngi")
    >>> outputs = ng.inference.load("mnist.ngi").infer(x_batch)

``compile_generator`` compiles a causal language model's window and step graphs; its ``Generator``
samples one cached step per token (``generation.py``).
"""

from .calibrate import QuantizationReport, calibrate_ranges, quantization_report
from .compile import compile_for_inference
from .deploy import FORMAT_NAME, FORMAT_VERSION, DeployError, load, save
from .freeze import InferenceError
from .generation import OVERFLOWS, GenerationError, GenerationGraphs, Generator, compile_generator
from .model import CompiledModel, Executor, TensorSpec
from .profile import LayerCounter, OpCounter, ProfileError, ProfileReport, collect_counters, format_counters
from .quantize import PRECISIONS, QuantizationError, QuantizedWeight, quantize_dequantize, quantize_weight
from .requests import AsyncInferQueue, InferRequest, RequestBusyError, RequestError, RequestTimeoutError

__all__ = [
    "CompiledModel", "Executor", "InferenceError", "TensorSpec", "compile_for_inference",
    "FORMAT_NAME", "FORMAT_VERSION", "DeployError", "load", "save",
    "PRECISIONS", "QuantizationError", "QuantizationReport", "QuantizedWeight", "calibrate_ranges",
    "quantization_report", "quantize_dequantize", "quantize_weight",
    "LayerCounter", "OpCounter", "ProfileError", "ProfileReport", "collect_counters", "format_counters",
    "AsyncInferQueue", "InferRequest", "RequestBusyError", "RequestError", "RequestTimeoutError",
    "OVERFLOWS", "GenerationError", "GenerationGraphs", "Generator", "compile_generator",
]
