"""Reliability of the checkpoint loader: seeded mutants of a real checkpoint, and hostile 1 MB files.

Figures (issue 18):

* inputs tried per mutation kind (bit flip, truncation, insertion of 1-16 bytes, a range of up
  to 64 bytes overwritten) and how each ended: ``ok`` (exactly the saved checkpoint: the
  mutation hit unused bytes), ``typed`` (a ``CheckpointError`` naming the file), ``other``
  (anything else: a wrong result, a raw exception, a hang past ``HANG_SECONDS`` — must be 0);
  the slowest load;
* for each hostile 1 MB file (a dataset claiming 2**40 elements, a gzip bomb of 1 GiB of
  zeros, a file of random bytes after the HDF5 signature), how it ended, the time, the peak
  RSS (``VmHWM``) of the reader child (which reports it) against its address-space limit,
  and of a fresh calling process (``ru_maxrss`` would include the forking parent's memory).

Mutants are loaded through ``read_checkpoint`` (several at once: each load is its own child
process). Inputs that end as ``other`` are written to ``--save`` for the regression corpus.

Usage: ``python benchmarks/reliability_checkpoint.py [--n 2000] [--seed 0] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "neon")]

import ngraph_core as ng  # noqa: E402
from neon import checkpoint_file  # noqa: E402
from neon.saving import CheckpointData, CheckpointError, read_checkpoint, write_checkpoint  # noqa: E402

HANG_SECONDS = 15.0
KINDS = ("flip", "truncate", "insert", "overwrite")


def tiny_checkpoint(folder: Path) -> Path:
    """A real checkpoint: the tests' MLP 4-4-3 after one epoch with momentum (about 31 KB)."""
    from fit_helper import datasets, mlp

    from neon.costs import CrossEntropyMulti
    from neon.optimizers import GradientDescentMomentum

    train, _ = datasets()
    model = mlp(hidden=4)
    model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.1, momentum_coef=0.9), 1, progress=False)
    model.save_params(folder / "tiny.h5")
    return folder / "tiny.h5"


def mutate(data: bytes, kind: str, rng: random.Random) -> bytes:
    """One mutation of ``kind``."""
    at = rng.randrange(len(data))
    if kind == "flip":
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:]
    if kind == "truncate":
        return data[:at]
    patch = rng.randbytes(rng.randint(1, 16 if kind == "insert" else 64))
    return data[:at] + patch + data[at + (0 if kind == "insert" else len(patch)):]


def same(a: CheckpointData, b: CheckpointData) -> bool:
    """Equal checkpoints: every array (bytes, dtype, shape) and every field."""
    arrays = all(x.keys() == y.keys() and all(x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k]) for k in x)
                 for x, y in ((a.params, b.params), (a.optimizer, b.optimizer)))
    return arrays and (a.epoch, a.input_shape, a.history, a.model, a.rng) == \
        (b.epoch, b.input_shape, b.history, b.model, b.rng)


def load(path: Path, reference: CheckpointData) -> tuple[str, float]:
    """Read ``path``: its outcome and seconds."""
    start = time.perf_counter()
    try:
        outcome = "ok" if same(read_checkpoint(path), reference) else "other: wrong result"
    except CheckpointError as exc:
        outcome = "typed" if str(path) in str(exc) else "other: unnamed file"
    except ng.NgraphError:
        outcome = "typed"
    except Exception as exc:  # noqa: BLE001 - what the figures count as a contract failure
        outcome = f"other: {type(exc).__name__}"
    elapsed = time.perf_counter() - start
    return ("other: hang" if elapsed > HANG_SECONDS else outcome), elapsed


def hostile_files(folder: Path) -> dict[str, Path]:
    """Three 1 MB files built to make a reader allocate, decompress or parse without bound."""
    files = {}
    for name in ("claims 2**40 elements", "gzip bomb (1 GiB of zeros)", "random bytes after the signature"):
        path = folder / f"{len(files)}.h5"
        write_checkpoint(path, CheckpointData(params={"a/W": np.zeros(3, np.float32)}))
        files[name] = path
    with h5py.File(files["claims 2**40 elements"], "r+") as f:
        f["params"].create_dataset("b", shape=(2**40,), dtype=np.float32, chunks=(1 << 16,))
        f["params/b"].attrs["crc32"] = 0
        f["pad"] = np.random.default_rng(0).integers(0, 255, 1 << 20, np.uint8)
    with h5py.File(files["gzip bomb (1 GiB of zeros)"], "r+") as f:
        bomb = f["params"].create_dataset("b", shape=(1 << 28,), dtype=np.float32, chunks=(1 << 22,),
                                          compression="gzip", compression_opts=9)
        for start in range(0, 1 << 28, 1 << 22):  # chunk by chunk: this process stays small
            bomb[start:start + (1 << 22)] = np.zeros(1 << 22, np.float32)
        f["params/b"].attrs["crc32"] = 0
    head = files["random bytes after the signature"].read_bytes()[:8]
    files["random bytes after the signature"].write_bytes(head + random.Random(0).randbytes((1 << 20) - 8))
    return files


def measure_hostile(path: Path) -> dict:
    """Read ``path``: the outcome and time through ``read_checkpoint`` in a fresh process with that
    process's peak RSS (``VmHWM``), and the reader child's own peak RSS (the same command, run here)."""
    code = ("import json, sys, time\nfrom neon.saving import read_checkpoint, CheckpointError\n"
            "t = time.perf_counter()\ntry:\n    read_checkpoint(sys.argv[1]); outcome = 'ok'\n"
            "except CheckpointError as e:\n    outcome = 'typed: ' + str(e).split(': ', 1)[1][:60]\n"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
            "print(json.dumps({'outcome': outcome, 's': time.perf_counter() - t, 'self': int(hwm)}))\n")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    result = json.loads(done.stdout) if done.returncode == 0 else {"outcome": f"other: {done.stderr[-200:]}"}
    size = path.stat().st_size
    with tempfile.TemporaryDirectory() as out:
        memory = max(checkpoint_file.MEMORY_FLOOR, (512 << 20) + 4 * size)
        subprocess.run(checkpoint_file._reader_command(path, Path(out), memory), env=checkpoint_file._reader_env(),
                       timeout=120,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        report = next(Path(out).glob("*.json"), None)
        result["child"] = json.loads(report.read_text()).get("peak_rss_kib") if report else None
        result["limit"] = memory
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="mutants in all, spread over the kinds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--save", type=Path, default=None, help="folder for inputs that end as 'other'")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        original = tiny_checkpoint(folder)
        data, reference = original.read_bytes(), read_checkpoint(original)
        jobs = []
        for i in range(args.n):
            kind = KINDS[i % len(KINDS)]
            (folder / f"m{i}.h5").write_bytes(mutate(data, kind, rng))
            jobs.append((kind, folder / f"m{i}.h5"))
        start = time.perf_counter()
        with ThreadPoolExecutor(args.workers) as pool:
            results = list(pool.map(lambda job: load(job[1], reference), jobs))
        wall = time.perf_counter() - start
        counts: dict[str, Counter] = {kind: Counter() for kind in KINDS}
        slowest = dict.fromkeys(KINDS, 0.0)
        for (kind, path), (outcome, seconds) in zip(jobs, results):
            counts[kind][outcome.split(":")[0]] += 1
            slowest[kind] = max(slowest[kind], seconds)
            if outcome.startswith("other") and args.save is not None:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / f"{kind}-{path.stem}.h5").write_bytes(path.read_bytes())
                print(f"{path.name}: {outcome}", file=sys.stderr)
        files = hostile_files(folder)
        sizes = [path.stat().st_size for path in files.values()]
        hostile = {name: measure_hostile(path) for name, path in files.items()}
    print(f"Checkpoint loader, {args.n} mutants of a {len(data):,}-byte checkpoint (seed {args.seed}, "
          f"{args.workers} workers, {wall:.0f} s)\n")
    print("| mutation | inputs | ok (equal) | typed error | anything else | slowest load (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in KINDS:
        c = counts[kind]
        print(f"| {kind} | {sum(c.values())} | {c['ok']} | {c['typed']} | {c['other']} | {slowest[kind]:.2f} |")
    total = sum(counts.values(), Counter())
    print(f"| all | {sum(total.values())} | {total['ok']} | {total['typed']} | {total['other']} | "
          f"{max(slowest.values()):.2f} |\n")
    print("| hostile 1 MB file | size | outcome | time (s) | reader child peak RSS (MiB) / limit | "
          "caller peak RSS (MiB) |")
    print("|---|---:|---|---:|---:|---:|")
    for (name, r), size in zip(hostile.items(), sizes):
        print(f"| {name} | {size:,} | {r['outcome']} | {r.get('s', 0):.2f} | {(r['child'] or 0) / 1024:.0f} / "
              f"{r['limit'] >> 20} | {r.get('self', 0) / 1024:.0f} |")
    print("\n(caller: a fresh process importing neon and calling read_checkpoint; its RSS includes the imports)")


if __name__ == "__main__":
    main()
