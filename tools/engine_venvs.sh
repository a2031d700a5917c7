#!/usr/bin/env bash
# Build the real engine venvs the `engine` tests ask (tests/test_engine.py), then run those tests.
# Run by .ci/run when the disk has room; run it from the repository root after the README's test
# command made .venv. FP4DOCTOR_ENGINES names the engines to build (default: "vllm sglang").
set -euo pipefail
cd "$(dirname "$0")/.."
# The real-engine tests (marker `engine`, tests/test_engine.py): real vLLM and SGLang releases
# from the package index, one venv each under this run's own .ci-cache/ (kept for a later run in
# the same folder). Measured on the 2-core CPU host with uv: 40-122 s a vLLM release, 15-40 s an
# SGLang one once the uv cache holds torch; the tests start one worker per release and
# FlashInfer case. Bytecode is compiled at install, as pip does: where it is not written as
# modules load (PYTHONDONTWRITEBYTECODE) every worker would compile vLLM's and torch's sources
# again (14.6 s of a 30 s worker, measured with cProfile on vLLM 0.34.0).
ENGINE_VENVS="$PWD/.ci-cache/venvs"
export UV_CACHE_DIR="$PWD/.ci-cache/uv" UV_LINK_MODE=hardlink
.venv/bin/pip install -q uv
releases=()
for engine in ${FP4DOCTOR_ENGINES:-vllm sglang}; do
  case "$engine" in
    vllm) releases+=(vllm==0.18.0 vllm==0.24.0 vllm==0.33.0 vllm==0.34.0) ;;
    sglang) releases+=(sglang==0.5.16 sglang==0.5.23) ;;
    *) echo "engine_venvs: unknown engine '$engine' (vllm, sglang)" >&2; exit 2 ;;
  esac
done
for release in "${releases[@]}"; do
  name="${release%%==*}" v="${release##*==}"
  venv="$ENGINE_VENVS/$name-$v"
  [ -f "$venv/.installed" ] && continue  # a finished install (an interrupted one is redone)
  overrides=()
  [ -f ".ci/$name-$v-overrides.txt" ] && overrides=(--override ".ci/$name-$v-overrides.txt")
  .venv/bin/uv venv -q --clear -p python3 "$venv"
  if [ "$name" = sglang ]; then
    # SGLang's wheels from 0.5.11 are built per CPython (cp311, cp312 for 0.5.23): a python3
    # with none skips SGLang's engine tests, and says so, rather than failing the run.
    if ! .venv/bin/uv pip install -q --compile-bytecode -p "$venv/bin/python" "$release"; then
      echo "engine_venvs: could not install $release for $(python3 -V): its tests skip" >&2
      rm -rf "$venv"
      continue
    fi
  else
    .venv/bin/uv pip install -q --compile-bytecode -p "$venv/bin/python" "$release" "${overrides[@]}"
  fi
  # cuda-python 12.x and cuda-bindings 13.x both install cuda/bindings/runtime*.so: which one is
  # left depends on the install order, and with cuda-python's, nvidia-cutlass-dsl 4.8 fails at
  # import ('cuda.bindings.runtime' has no attribute 'cudaLibrary_t'; seen with vllm 0.33.0).
  bindings=$("$venv/bin/python" -c "from importlib.metadata import version as v; print(v('cuda-bindings'))" 2>/dev/null || true)
  [ -n "$bindings" ] && .venv/bin/uv pip install -q --compile-bytecode -p "$venv/bin/python" --reinstall --no-deps "cuda-bindings==$bindings"
  touch "$venv/.installed"
done
# The agreement's off-pin scenario: an older flashinfer-python (a pure-Python wheel, 7.6 MB)
# unpacked ahead of each venv's own; without it that scenario skips, and says so.
wheels="$PWD/.ci-cache/wheels"
ls "$wheels"/flashinfer_python-*.whl >/dev/null 2>&1 \
  || .venv/bin/pip download -q --no-deps flashinfer-python==0.6.3 -d "$wheels" \
  || echo "engine_venvs: could not download flashinfer-python 0.6.3: the off-pin scenario skips" >&2
# tests/test_engine.py is the agreement of tools/engine_agreement.py, one test per release and
# scenario (docs/engine-oracle.md: its table, and how long it takes).
FP4DOCTOR_ENGINE_VENVS="$ENGINE_VENVS" .venv/bin/python -m pytest -m engine -n 0 tests/test_engine.py
