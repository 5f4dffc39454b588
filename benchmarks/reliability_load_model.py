"""The "layer configs + load_model" reliability target: saved models with mutated sizes, each loaded whole.

Real models (an MLP, a CNN with ``Conv``/``Pool``/``BatchNorm``/``Flatten``/``Unflatten``, a token
LSTM) are saved, then their checkpoints rewritten with a layer config's size field (``nout``,
``fshape``, ``strides``, ``padding``, ``vocab_size``, ``shape``...) set to an edge value (60%), another
input shape (20%) or a mutated config node (20%, ``reliability_loaders.mutate_json``). Each file
is loaded with ``neon.load_model`` in a child process capped at 1 GiB of address space
(``RLIMIT_AS``) and counted as: success, typed error (``ng.NgraphError``), raw exception, memory
over 1 GiB (a ``MemoryError`` under the cap), hang (past ``HANG_SECONDS``: the child and its
checkpoint reader are killed) or crash (the child died); a dead or hung child is replaced by a
fresh one for the next file. Also reported: the slowest load and the children's peak RSS.

It lives beside ``reliability_loaders.py`` (parts 1-2, and the .ngi target) and reuses its
``mutate_json``.

Run: ``.venv/bin/python benchmarks/reliability_load_model.py [--count 300] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ngraph_core as ng
from neon.layers import LSTM, Affine, BatchNorm, Conv, Flatten, LookupTable, Pool, RecurrentSum, Unflatten
from neon.model import Model
from neon.saving import CheckpointData, load_model, read_checkpoint, write_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reliability_loaders import mutate_json  # noqa: E402 - a sibling script, not a package

CAP = 1 << 30  # the children's address space
HANG_SECONDS = 30.0
OUTCOMES = ("success", "typed error", "raw exception", "memory over 1 GiB", "hang", "crash")
SIZE_FIELDS = ("nout", "fshape", "strides", "padding", "dilation", "vocab_size", "embedding_dim", "shape", "groups")
SIZE_EDGES = [0, -1, 1, 2, 3, 5, 8, 20, 2**20, 2**24, 2**26, 2**30, 2**31, 2**31 + 1, 2**32, 2**62, 10**30,
              [3, 3, 2**30], [2**31, 1], [[0, 2**40]], "same", 1.5, None, True, []]
INPUT_EDGES = [(2**31,), (2**24,), (2**20, 2**11), (1, 2**16, 2**16), (2**21,), (7, 2), (1, 8, 8), (4,), (2**30, 2)]


def seeds(folder: Path) -> list[CheckpointData]:
    """Saved checkpoints of an MLP, a CNN and a token LSTM, read back."""
    models = [(Model([Affine(8, activation="relu"), Affine(3, activation="softmax")]), (4,), "dense"),
              (Model([Conv((3, 3, 4), padding=1, activation="relu"), Pool(2), BatchNorm(), Flatten(),
                      Unflatten((4, 4, 4)), Affine(5)]), (1, 8, 8), "dense"),
              (Model([LookupTable(20, 8), LSTM(6, return_sequence=True), RecurrentSum(), Affine(2)]), (7,), "tokens")]
    out = []
    for k, (model, shape, kind) in enumerate(models):
        model.build(shape, kind=kind)
        model.save_params(folder / f"seed{k}.h5")
        out.append(read_checkpoint(folder / f"seed{k}.h5"))
    return out


def size_slots(node: Any) -> list[tuple[dict, str]]:
    """Every (layer config, size field) in a config tree, fields present or not."""
    slots, stack = [], [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
            if isinstance(item.get("class_name"), str) and isinstance(item.get("config"), dict):
                slots += [(item["config"], field) for field in SIZE_FIELDS]
    return slots


def mutants(n: int, seed: int, folder: Path) -> list[Path]:
    """``n`` checkpoint files: size fields set to edge values, another input shape, or a mutated config."""
    rand, saved, paths = random.Random(seed), seeds(folder), []
    for i in range(n):
        data = copy.deepcopy(rand.choice(saved))
        roll = rand.random()
        if roll < 0.6:
            for _ in range(rand.choice([1, 1, 2])):
                config, field = rand.choice(size_slots(data.model[0]))
                config[field] = copy.deepcopy(rand.choice(SIZE_EDGES)) if rand.random() < 0.8 else \
                    rand.choice([rand.randrange(1, 64), rand.randrange(2**70)])
        elif roll < 0.8:
            data.input_shape = rand.choice(INPUT_EDGES)
        else:
            data.model[0] = mutate_json(data.model[0], rand)
        paths.append(folder / f"mutant{i}.h5")
        write_checkpoint(paths[-1], data)
    return paths


def child(paths: list[str]) -> None:
    """Under the address-space cap, load each file; print ``start i`` then ``done i outcome seconds type``."""
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for i, path in enumerate(paths):
        print("start", i, flush=True)
        start = time.perf_counter()
        try:
            load_model(path).close()
            outcome, kind = "success", "-"
        except ng.NgraphError as exc:
            outcome, kind = "typed error", type(exc).__name__
        except MemoryError:
            outcome, kind = "memory over 1 GiB", "MemoryError"
        except Exception as exc:  # noqa: BLE001 - the figure that must stay 0
            outcome, kind = "raw exception", type(exc).__name__
            print(f"  ! {path}: {kind}: {str(exc)[:160]}", file=sys.stderr, flush=True)
        print("done", i, outcome.replace(" ", "_"), f"{time.perf_counter() - start:.3f}", kind, flush=True)
    print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, flush=True)


def run_children(paths: list[Path]) -> dict[str, Any]:
    """Every file through ``child``; a child that hangs is killed, one that dies is replaced."""
    counts = dict.fromkeys(OUTCOMES, 0)
    slowest, peak, kinds, i = 0.0, 0, {}, 0
    while i < len(paths):
        proc = subprocess.Popen([sys.executable, __file__, "--child", *map(str, paths[i:])], stdout=subprocess.PIPE,
                                text=True, start_new_session=True)
        assert proc.stdout is not None
        current, started, base = None, time.perf_counter(), i
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if not ready:
                if current is not None and time.perf_counter() - started > HANG_SECONDS:
                    os.killpg(proc.pid, signal.SIGKILL)  # this child and its checkpoint reader
                    proc.wait()
                    counts["hang"] += 1
                    i = base + current + 1
                    break
                continue
            line = proc.stdout.readline().split()
            if not line:  # the child ended: after its last file, or dead in the middle of one
                proc.wait()
                if current is not None:
                    counts["crash"] += 1
                    i = base + current + 1
                break
            if line[0] == "start":
                current, started = int(line[1]), time.perf_counter()
            elif line[0] == "done":
                counts[line[2].replace("_", " ")] += 1
                kinds[line[4]] = kinds.get(line[4], 0) + 1
                slowest, current = max(slowest, float(line[3])), None
            elif line[0] == "peak":
                peak, i = max(peak, int(line[1])), len(paths)
    return {"tried": len(paths), **counts, "slowest": slowest, "peak": peak, "kinds": kinds}


def table(n: int, seed: int, folder: Path) -> list[str]:
    r = run_children(mutants(n, seed, folder))
    return ["| target | inputs tried | " + " | ".join(OUTCOMES) + " | slowest load | children's peak RSS |",
            "|---|" + "---:|" * (len(OUTCOMES) + 3),
            f"| layer configs + load_model | {r['tried']} | " + " | ".join(str(r[k]) for k in OUTCOMES)
            + f" | {r['slowest']:.2f} s | {r['peak'] / 2**20:.0f} MiB |", "",
            "By type: " + ", ".join(f"{k} {v}" for k, v in sorted(r["kinds"].items()) if k != "-")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"### Layer configs + load_model (seed {args.seed}, {args.count} checkpoints, each child capped at "
              f"{CAP >> 20} MiB of address space)\n")
        print("\n".join(table(args.count, args.seed, Path(tmp))))


if __name__ == "__main__":
    main()
