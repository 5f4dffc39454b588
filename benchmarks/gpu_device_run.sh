#!/usr/bin/env bash
# One short GPU session's checks (the GPU issue), in the order that matters when time runs out:
#   1. the CUDA-graph check (capture-safe GEMMs, whole steps replayed: benchmarks/gpu_capture_check.py),
#   2. the cuDNN convolution check (benchmarks/gpu_cudnn_check.py),
#   3. the GPU test suite (`make test-gpu`'s pytest line, without the venv: the GPU machine has no network).
# Each writes its log and results under $OUT (default /tmp/gpu_out), so a run cut short still reports.
# Wheels the machine lacks travel in .whl/ (git-ignored): nvidia-cudnn-frontend for Python 3.12, fetched with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 -d .whl nvidia-cudnn-frontend==1.24.1
# Usage on the GPU machine: bash benchmarks/gpu_device_run.sh   (CAPTURE_S, CUDNN_S, TESTS_S: time limits)
set -u
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PYTHONPATH=.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:.
fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; python3 --version;
  python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

timeout "${CAPTURE_S:-170}" python3 benchmarks/gpu_capture_check.py --out "$OUT" > "$OUT/capture.log" 2>&1
echo "capture check: exit $?"; tail -n 25 "$OUT/capture.log"

timeout "${CUDNN_S:-190}" python3 benchmarks/gpu_cudnn_check.py --out "$OUT" > "$OUT/cudnn.log" 2>&1
echo "cudnn check: exit $?"; tail -n 25 "$OUT/cudnn.log"

timeout "${TESTS_S:-150}" python3 -m pytest -q -p no:cacheprovider -m gpu -W ignore \
  tests/ngraph_core tests/neon/test_backend_training.py > "$OUT/tests.log" 2>&1
echo "gpu tests: exit $?"; grep -E "passed|failed|error" "$OUT/tests.log" | tail -n 5; grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -n 30
