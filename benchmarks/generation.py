"""Generating tokens with a key/value cache (issue 35 item 5): a decoder-only Transformer, one step per token.

The model: ``CharTransformer``'s (model_zoo/char_transformer.py), a vocabulary of 65 characters,
4 pre-norm causal blocks of ``d_model`` 256, 4 heads, feed-forward 1024 (ReLU), learned positions
over a context of 128, a final LayerNorm and the output layer; batch 1. Tokens are sampled at
temperature 1 by the Gumbel-max trick from one seeded table of noise that both sides read (an
untrained model's greedy text repeats one token, which would make the check below say little).
One harness "step" is **one generated token**. Two sides, each timed in its own process by ``run.py``:

* ``ngraph``: ``ng.inference.compile_generator(model)``: the step graph (one token at a position,
  each layer's key and value caches in, written caches out) compiled for inference, weights frozen,
  driven by ``Generator.append``;
* ``torch``: the same network written by hand in PyTorch eager (``nn.Linear``, ``nn.LayerNorm``,
  ``F.scaled_dot_product_attention`` over keys and values ``torch.cat``'ed onto its own caches),
  under ``torch.inference_mode``, the weights copied from ours.

Both start from a one-token prompt (id 0). When a sequence fills the context (127 generated tokens)
it starts again from that prompt: our side's restart is a window run over 128 positions (the
prefill), PyTorch's a step on empty caches; one step in 127, which the medians do not see. With the
defaults (10 untimed and 100 timed steps) no restart falls in the timed steps. The two sides
generate the same tokens (``BENCH_CHECK=1`` prints a side's first 5).

Usage: ``python benchmarks/run.py generation --pairs 3 --threads 1 2``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from harness import Step, blas_info, child_main

VOCAB, D_MODEL, LAYERS, HEADS, CONTEXT = 65, 256, 4, 4, 128
STEPS, WARMUP = 100, 10
NOISE_ROWS = 1024  # the noise table's rows, read in turn (token i reads row i mod 1024)


class Sampler:
    """Picks token ``i`` as ``argmax(logits + noise[i])``: sampling at temperature 1, the same on both sides."""

    def __init__(self) -> None:
        import numpy as np

        from model_zoo.char_models import gumbel_noise

        self.noise, self.count = gumbel_noise(np.random.default_rng(0), (NOISE_ROWS, VOCAB)), 0

    def __call__(self, logits: Any) -> int:
        import numpy as np

        token = int(np.argmax(np.asarray(logits, dtype=np.float32) + self.noise[self.count % NOISE_ROWS]))
        self.count += 1
        return token


def make_model() -> Any:
    """Our ``CharTransformer`` of the sizes above, weights drawn with seed 0 (untrained: any weights will do)."""
    from model_zoo.char_transformer import CharTransformer
    from neon.data.text import Vocabulary

    vocab = Vocabulary([chr(33 + i) for i in range(VOCAB)], specials=())
    model = CharTransformer(vocab, d_model=D_MODEL, num_layers=LAYERS, num_heads=HEADS, context=CONTEXT, seed=0)
    model.build()
    return model


def build_ngraph(threads: int) -> tuple[Step, str]:
    import ngraph_core as ng

    generator = ng.inference.compile_generator(make_model())
    state = {"logits": generator.start([0])}
    pick = Sampler()

    def step() -> object:
        token = pick(state["logits"])
        if generator.position >= CONTEXT:  # the context is full: start again (a prefill)
            state["logits"] = generator.start([0])
        else:
            state["logits"] = generator.append(token)
        return token

    return step, f"ngraph_core numpy (inference Generator), {blas_info()}"


def torch_weights(model: Any) -> dict[str, Any]:
    """Our weights in PyTorch's layouts: ``[out, in]`` matrices, heads concatenated (row ``h * D + d``)."""
    import numpy as np

    def value(v: Any) -> np.ndarray:
        return np.asarray(model.transformer.read_variable(v), dtype=np.float32)

    def heads_out(w: Any) -> np.ndarray:  # [D, H, F] -> [H * D, F]
        d, h, f = w.shape
        return value(w).transpose(1, 0, 2).reshape(h * d, f)

    embed, position, decoder, output = (model.layers[k] for k in ("embed", "position", "decoder", "output"))
    weights = {"embed": value(embed.W).T, "position": value(position.P).T,  # [V, F], [T, F]
               "head": value(output.linear.W),
               "head_bias": next(value(v) for v in output.variables if v is not output.linear.W),
               "norm": (value(decoder.final_norm.gamma), value(decoder.final_norm.beta)), "blocks": []}
    for layer in decoder.layers:
        attn, ff = layer.self_attn, layer.feed_forward
        wo = value(attn.Wo)  # [F, V, H] -> [F, H * V]
        weights["blocks"].append({
            "q": (heads_out(attn.Wq), value(attn.bq).T.reshape(-1)),
            "k": (heads_out(attn.Wk), value(attn.bk).T.reshape(-1)),
            "v": (heads_out(attn.Wv), value(attn.bv).T.reshape(-1)),
            "o": (wo.transpose(0, 2, 1).reshape(wo.shape[0], -1), value(attn.bo)),
            "ff1": (value(ff.W1), value(ff.b1)), "ff2": (value(ff.W2), value(ff.b2)),
            "norm1": (value(layer.norm1.gamma), value(layer.norm1.beta)),
            "norm2": (value(layer.norm2.gamma), value(layer.norm2.beta))})
    return weights


def build_torch(threads: int) -> tuple[Step, str]:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    weights = torch_weights(make_model())

    def linear(pair: tuple[Any, Any]) -> torch.nn.Linear:
        layer = torch.nn.Linear(pair[0].shape[1], pair[0].shape[0])
        layer.weight.data.copy_(torch.from_numpy(pair[0]))
        layer.bias.data.copy_(torch.from_numpy(pair[1]))
        return layer

    def norm(pair: tuple[Any, Any]) -> torch.nn.LayerNorm:
        layer = torch.nn.LayerNorm(D_MODEL, eps=1e-5)
        layer.weight.data.copy_(torch.from_numpy(pair[0]))
        layer.bias.data.copy_(torch.from_numpy(pair[1]))
        return layer

    blocks = [{key: (norm if key.startswith("norm") else linear)(pair) for key, pair in block.items()}
              for block in weights["blocks"]]
    embed, position = torch.from_numpy(weights["embed"]), torch.from_numpy(weights["position"])
    final_norm, head = norm(weights["norm"]), linear((weights["head"], weights["head_bias"]))
    head_dim = D_MODEL // HEADS
    state: dict[str, Any] = {"position": 0, "caches": None}
    pick = Sampler()

    def heads(x: torch.Tensor) -> torch.Tensor:  # [1, F] -> [1, H, 1, D]
        return x.view(1, HEADS, 1, head_dim)

    @torch.inference_mode()
    def forward(token: int, position_index: int) -> torch.Tensor:
        x = (embed[token] + position[position_index]).unsqueeze(0)  # [1, F]
        caches = state["caches"] or [(None, None)] * LAYERS
        written = []
        for block, (keys, values) in zip(blocks, caches, strict=True):
            h = block["norm1"](x)
            q, k, v = heads(block["q"](h)), heads(block["k"](h)), heads(block["v"](h))
            keys = k if keys is None else torch.cat([keys, k], dim=2)
            values = v if values is None else torch.cat([values, v], dim=2)
            written.append((keys, values))
            o = F.scaled_dot_product_attention(q, keys, values)  # every cached step is <= this one
            x = x + block["o"](o.reshape(1, D_MODEL))
            x = x + block["ff2"](torch.relu(block["ff1"](block["norm2"](x))))
        state["caches"] = written
        return head(final_norm(x))[0]

    state["logits"] = forward(0, 0)  # the one-token prompt

    def step() -> object:
        token = pick(state["logits"])
        state["position"] += 1
        if state["position"] >= CONTEXT:  # the context is full: start again from the prompt
            state["position"], state["caches"] = 0, None
            state["logits"] = forward(0, 0)
        else:
            state["logits"] = forward(token, state["position"])
        return token

    return step, f"torch {torch.__version__} eager, {torch.get_num_threads()} threads"


BUILDERS: dict[str, Callable[[int], tuple[Step, str]]] = {"ngraph": build_ngraph, "torch": build_torch}


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # model_zoo, neon
    child_main(BUILDERS, __doc__.splitlines()[0], warmup=WARMUP, steps=STEPS)


if __name__ == "__main__":
    main()
