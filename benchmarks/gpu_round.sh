#!/usr/bin/env bash
# One round of fp4doctor on a GPU host: facts, reports for every target (static and live),
# `env` in every shell format, the whole test suite and the pre-flight benchmark.
#
#   benchmarks/gpu_round.sh OUTDIR [quick|full]
#
# Used on the H200 device machines, where fp4doctor runs from the checkout (PYTHONPATH) and the
# packages the image lacks (flashinfer-python, nvidia-cudnn-frontend, apache-tvm-ffi) come as
# wheels in .whl/ (`python benchmarks/device_wheels.py` builds it: 42 MiB, under the 64 MiB a
# device call may carry). Everything lands in OUTDIR, then in OUTDIR.tar.gz.
set -u
out=${1:?usage: gpu_round.sh OUTDIR [quick|full]}
mode=${2:-full}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
fd() { python3 -m fp4doctor "$@"; }
step() { echo "== $*" >&2; }

{ nvidia-smi -L; nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv; } \
  > "$out/nvidia-smi.txt" 2>&1
python3 -c "import sys, torch; print(sys.version); print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())" \
  > "$out/python-torch.txt" 2>&1

step probe
fd probe --json > "$out/facts.json" 2> "$out/probe.err"; echo "probe --json exit $?" >> "$out/exit-codes.txt"
fd probe > "$out/probe.txt" 2>&1

for target in vllm sglang flashinfer trtllm; do
  step "check $target"
  fd check --target "$target" --no-smoke > "$out/check-$target-static.txt" 2>&1
  echo "check $target --no-smoke exit $?" >> "$out/exit-codes.txt"
  fd check --target "$target" --no-smoke --json > "$out/check-$target-static.json" 2>/dev/null
  if [ "$mode" = full ] || [ "$target" = vllm ]; then
    start=$(date +%s%N)
    fd check --target "$target" --force -v > "$out/check-$target-force.txt" 2> "$out/check-$target-force.err"
    code=$?
    echo "check $target --force -v exit $code ($(( ($(date +%s%N) - start) / 1000000 )) ms)" >> "$out/exit-codes.txt"
    fd check --target "$target" --json > "$out/check-$target-smoke.json" 2> "$out/check-$target-smoke.err"
    echo "check $target (smoke) --json exit $?" >> "$out/exit-codes.txt"
    fd check --target "$target" --force --json > "$out/check-$target-force.json" 2>/dev/null
  fi
done

step env
for shell in bash zsh fish sh pwsh dotenv gha json; do
  fd env --target vllm --prefer cudnn --shell "$shell" > "$out/env-$shell.txt" 2> "$out/env-$shell.err"
  echo "env --prefer cudnn --shell $shell exit $?" >> "$out/exit-codes.txt"
done

if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
  step "CUDA_VISIBLE_DEVICES=1"
  CUDA_VISIBLE_DEVICES=1 fd check --target vllm --json > "$out/check-vllm-cvd1.json" 2> "$out/check-vllm-cvd1.err"
  echo "CUDA_VISIBLE_DEVICES=1 check exit $?" >> "$out/exit-codes.txt"
fi

step "MoE family, model shapes, short timeouts"
fd check --target flashinfer --family moe --smoke --force -v > "$out/check-flashinfer-moe-force.txt" 2>&1
echo "check flashinfer --family moe --smoke --force exit $?" >> "$out/exit-codes.txt"
fd check --target vllm --smoke -v > "$out/check-vllm-smoke-v.txt" 2>&1
echo "check vllm --smoke -v exit $?" >> "$out/exit-codes.txt"
fd check --target vllm --model tests/fixtures/checkpoints/llama-3.1-8b-instruct-fp4 --tp 8 --smoke \
  --smoke-timeout 300 -v > "$out/check-vllm-model-llama8b-tp8.txt" 2>&1
echo "check vllm --model llama-3.1-8b --tp 8 --smoke exit $?" >> "$out/exit-codes.txt"
start=$(date +%s%N)
fd check --target flashinfer --force --smoke-timeout 1 --json > "$out/check-flashinfer-timeout1.json" \
  2> "$out/check-flashinfer-timeout1.err"
echo "check flashinfer --force --smoke-timeout 1 exit $? ($(( ($(date +%s%N) - start) / 1000000 )) ms)" \
  >> "$out/exit-codes.txt"

step "pytest: the whole suite, as a developer with a GPU box runs it"
xdist=(); python3 -c "import xdist" 2>/dev/null && xdist=(-n 12 --maxprocesses=12)
python3 -m pytest -q -rs -p no:cacheprovider "${xdist[@]}" tests > "$out/pytest-all.txt" 2>&1
echo "pytest (whole suite) exit $?" >> "$out/exit-codes.txt"
tail -n 1 "$out/pytest-all.txt" >> "$out/exit-codes.txt"

step "benchmark: start-up (the benchmark compiles the bytecode first, as after a pip install)"
python3 benchmarks/bench_preflight.py --runs 7 --no-smoke --interleave \
  --json "$out/bench-startup.json" > "$out/bench-startup.txt" 2>&1
echo "bench start-up exit $?" >> "$out/exit-codes.txt"
if [ "$mode" = full ]; then
  step benchmark
  python3 benchmarks/bench_preflight.py --runs 5 --json "$out/bench.json" > "$out/bench.txt" 2>&1
  echo "bench exit $?" >> "$out/exit-codes.txt"
fi
tar czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
cat "$out/exit-codes.txt"
