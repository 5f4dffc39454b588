# %% [markdown]
# # A Transformer through ONNX, both ways
#
# This is both a script (`examples/transformer_onnx.py`) and a notebook (`notebooks/transformer_onnx.ipynb`,
# generated from the script by `notebooks/make_walkthrough.py`; CI runs both).
#
# The path, on sizes small enough to run in seconds on a laptop:
#
# 1. **train** a small Transformer classifier (the `transformer_sentiment` recipe's network) on the
#    packaged movie snippets;
# 2. **export** it with `ngx.export`, check the file with `onnx.checker`, run it in **onnxruntime**
#    and compare with our own outputs;
# 3. **import** a PyTorch `nn.TransformerEncoder` exported by `torch.onnx.export`, run it here and
#    compare with PyTorch.
#
# Both ONNX files are written under `out/transformer_onnx/` of the working directory.
#
# The guides behind it: ONNX (`docs/onnx.md`) and Attention and Transformers (`docs/attention.md`).

# %%
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

from model_zoo.lstm_sentiment import bucket_bounds, encode_texts, subset
from model_zoo.transformer_sentiment import transformer_sentiment
from neon.costs import CrossEntropyMulti
from neon.data import SequenceIterator, Vocabulary, load_movie_snippets, tokenize_words
from neon.model import Model
from neon.optimizers import Adam
from ngraph_core.frontends import onnx as ngx

OUT = Path("out") / "transformer_onnx"
OUT.mkdir(parents=True, exist_ok=True)
MAX_LENGTH, D_MODEL, LAYERS, HEADS = 24, 32, 2, 2
start = time.perf_counter()

# %% [markdown]
# ## 1. Train a small Transformer classifier
#
# Word ids go through a `LookupTable`, a learned `PositionEmbedding`, two pre-norm
# `TransformerEncoderLayer`s (self-attention that never looks at padding: each batch's lengths reach
# every block), the mean over each text's own words and `Affine(2)` with softmax. Two epochs over
# 8,192 snippets take a few seconds and reach about 70% on held-out snippets (chance is 50%); the point
# here is the export, not the accuracy.

# %%
(texts, labels), (test_texts, test_labels) = load_movie_snippets()
texts, labels = subset(texts, labels, 8192, 0)
vocab = Vocabulary.from_tokens((tokenize_words(t) for t in texts), min_count=2, max_size=2000)
train_set = SequenceIterator(encode_texts(texts, vocab, MAX_LENGTH), labels, nclass=2, batch_size=32,
                             bucket_boundaries=bucket_bounds(MAX_LENGTH), shuffle=True, seed=0)
model = Model(transformer_sentiment(len(vocab), D_MODEL, LAYERS, HEADS, MAX_LENGTH, seed=0), seed=0)
model.fit(train_set, CrossEntropyMulti(), Adam(3e-3), 2, progress=False)

test_texts, test_labels = subset(test_texts, test_labels, 256, 0)
test_ids = encode_texts(test_texts, vocab, MAX_LENGTH)
ours = model.get_outputs(SequenceIterator(test_ids, test_labels, nclass=2, batch_size=64))  # [N, 2]
print(f"trained on {len(texts)} snippets ({len(vocab)} words); "
      f"held-out accuracy: {100 * np.mean(ours.argmax(1) == test_labels):.1f}%")

# %% [markdown]
# ## 2. Export to ONNX and run it in onnxruntime
#
# `ngx.export(model, path)` writes the inference graph (dropout off) with the trained weights, checks it
# with `onnx.checker` and writes the file atomically. Node names are the layers' scope paths, so the
# file still says which `MultiHeadAttention` a node belongs to; the projections and
# `scaled_dot_product_attention`'s `batch_dot`s become `Einsum`s, and `layer_norm` and the softmax the
# primitives they are built from (ReduceMean, Sqrt, Exp, ReduceSum, ...).
#
# **Layouts.** Inside ngraph a sequence is `[F, REC, N]` (features, time, batch last) and token ids
# `[REC, N]`. The exporter's default `layout="onnx"` makes the file's inputs and outputs batch first,
# as onnxruntime and PyTorch users hold them: token ids `[N, T]`, lengths `[N]`, probabilities
# `[N, 2]`, with a Transpose at each input and output inside the model. `N` stays a symbolic dim, so
# one file serves any batch; `T` is the model's `max_length` (24): shorter texts are padded, and the
# `lengths` input masks the padding exactly as in training. (`layout="native"` would keep our
# batch-last order: `[24, N]`.)

# %%
path = OUT / "transformer_sentiment.onnx"
proto = ngx.export(model, path)
onnx.checker.check_model(onnx.load(str(path)), full_check=True)  # export checked it too; check the file


def shape(value: onnx.ValueInfoProto) -> list:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


print("inputs: ", {i.name: shape(i) for i in proto.graph.input})
print("outputs:", {o.name: shape(o) for o in proto.graph.output})
kinds = sorted({n.op_type for n in proto.graph.node})
print(f"{len(proto.graph.node)} nodes of {len(kinds)} kinds: {kinds}")
print("the first attention products:", [n.name for n in proto.graph.node if "batch_dot" in n.name][:2])

# %% [markdown]
# onnxruntime gets the held-out texts as one padded `[N, T]` batch of ids (padding id 0 after each
# text) and their lengths; our outputs came from `model.get_outputs`, which padded each batch its own
# way. Equal probabilities mean the masks hide the padding in both.

# %%
lengths = np.array([len(ids) for ids in test_ids], dtype=np.int32)
batch = np.zeros((len(test_ids), MAX_LENGTH), dtype=np.int32)
for row, ids in enumerate(test_ids):
    batch[row, :len(ids)] = ids
session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
(theirs,) = session.run(None, {"X": batch, "lengths": lengths})
export_difference = float(np.abs(theirs - ours).max())
print(f"onnxruntime {theirs.shape} vs ours {ours.shape}: max |difference| = {export_difference:.2e}")
print(f"same predictions: {bool(np.all(theirs.argmax(1) == ours.argmax(1)))}")

# %% [markdown]
# The exported file also imports back (`ngx.import_model`; `dims` sets the symbolic batch) and runs on
# our own NumPy transformer, as a graph of the ONNX operators rather than of the layers.

# %%
back = ngx.import_model(path, dims={"N": len(test_ids)})
(again,) = back.run({"X": batch, "lengths": lengths})
round_trip_difference = float(np.abs(again - ours).max())
print(f"exported and imported back vs ours: max |difference| = {round_trip_difference:.2e}")

# %% [markdown]
# ## 3. Import PyTorch's `nn.TransformerEncoder`
#
# A two-layer `nn.TransformerEncoder` (`d_model` 32, 4 heads, GELU, pre-norm, `batch_first=True`),
# random weights, in inference mode. `torch.onnx.export` (the TorchScript exporter, `dynamo=False`,
# which needs no `onnxscript`; opset 17) writes its attention as MatMuls, a Softmax and
# LayerNormalization; the batch dim is dynamic (`N`) and the input and output are batch first,
# `[N, T, F]`, which the importer keeps: an imported model takes the file's layout, not ours.
# `import_model` reads the file into an ngraph graph (the batch length given by `dims`: the file was
# traced at batch 1 and runs here at 3), which runs on our transformer; PyTorch's own outputs and
# onnxruntime's on the same file are the references. (The exporter takes the source alone, so there
# is no padding mask here.)

# %%
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True,
                                         norm_first=True)
encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
with torch.no_grad():  # the encoder's layers start as copies of `layer`: make each block's weights its own
    for parameter in encoder.parameters():
        parameter.add_(0.1 * torch.randn_like(parameter))
torch_path = OUT / "torch_encoder.onnx"
with warnings.catch_warnings():  # torch >= 2.9 warns that the TorchScript exporter is the legacy one
    warnings.simplefilter("ignore", DeprecationWarning)
    torch.onnx.export(encoder, (torch.randn(1, 10, 32),), torch_path, dynamo=False, input_names=["x"],
                      output_names=["y"], opset_version=17, dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
torch_proto = onnx.load(str(torch_path))
onnx.checker.check_model(torch_proto, full_check=True)
print("PyTorch's file:", {i.name: shape(i) for i in torch_proto.graph.input},
      f"{len(torch_proto.graph.node)} nodes, Softmax: {sum(n.op_type == 'Softmax' for n in torch_proto.graph.node)}")

# %%
x = np.random.default_rng(1).standard_normal((3, 10, 32)).astype(np.float32)  # [N, T, F]
with torch.no_grad():
    expected = encoder(torch.from_numpy(x)).numpy()
imported = ngx.import_model(torch_path, dims={"N": 3})
(y,) = imported.run({"x": x})
import_difference = float(np.abs(y - expected).max())
(y_ort,) = ort.InferenceSession(str(torch_path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
print(f"imported {y.shape} vs PyTorch {expected.shape}: max |difference| = {import_difference:.2e}")
print(f"onnxruntime vs PyTorch on the same file: max |difference| = {float(np.abs(y_ort - expected).max()):.2e}")

# %% [markdown]
# The imported model is an ordinary ngraph graph: its float initializers are trainable variables (it
# could be fine-tuned with neon's optimizers) and selectors find its ops by the ONNX node that made them
# (scopes are the node names, typed by operator).

# %%
print(imported)
print("Softmax nodes:", imported.select("Softmax").paths)
print(f"done in {time.perf_counter() - start:.1f} s")
assert max(export_difference, round_trip_difference, import_difference) < 1e-4
