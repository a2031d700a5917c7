#!/usr/bin/env bash
# Build the real vLLM venvs the `engine` tests ask (tests/test_engine.py), then run those tests.
# Not part of .ci/run (about 25 GB of venvs). Run end to end on the 2-core CPU host on 2026-12-04:
# about 5 min to build the four venvs with uv, 4.3 min for the tests (12 passed). Run it from the
# repository root after the README's test command made .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
# The real-engine tests (marker `engine`, tests/test_engine.py): real vLLM releases from the
# package index, one venv each under this run's own .ci-cache/ (kept for a later run in the
# same folder). Measured on the 2-core CPU host with uv: 40-122 s a release, about 4.5 min for
# the four; the tests themselves start one worker per release and FlashInfer case.
ENGINE_VENVS="$PWD/.ci-cache/venvs"
export UV_CACHE_DIR="$PWD/.ci-cache/uv" UV_LINK_MODE=hardlink
.venv/bin/pip install -q uv
for v in 0.18.0 0.24.0 0.33.0 0.34.0; do
  venv="$ENGINE_VENVS/vllm-$v"
  [ -f "$venv/.installed" ] && continue  # a finished install (an interrupted one is redone)
  overrides=()
  [ -f ".ci/vllm-$v-overrides.txt" ] && overrides=(--override ".ci/vllm-$v-overrides.txt")
  .venv/bin/uv venv -q --clear -p python3 "$venv"
  .venv/bin/uv pip install -q -p "$venv/bin/python" "vllm==$v" "${overrides[@]}"
  # cuda-python 12.x and cuda-bindings 13.x both install cuda/bindings/runtime*.so: which one is
  # left depends on the install order, and with cuda-python's, nvidia-cutlass-dsl 4.8 fails at
  # import ('cuda.bindings.runtime' has no attribute 'cudaLibrary_t'; seen with vllm 0.33.0).
  bindings=$("$venv/bin/python" -c "from importlib.metadata import version as v; print(v('cuda-bindings'))" 2>/dev/null || true)
  [ -n "$bindings" ] && .venv/bin/uv pip install -q -p "$venv/bin/python" --reinstall --no-deps "cuda-bindings==$bindings"
  touch "$venv/.installed"
done
FP4DOCTOR_VLLM_VENVS="$ENGINE_VENVS" .venv/bin/python -m pytest -m engine -n 0 tests/test_engine.py
