#!/usr/bin/env bash
# The fleet on a multi-GPU host: a local Ray cluster of one node per GPU (node i's raylet sees
# only GPU i through CUDA_VISIBLE_DEVICES), each node probing and checking itself with the live
# GEMM, against one `fp4doctor check` on GPU 0; plus the same fleet from the CLI.
#
#   benchmarks/fleet_round.sh OUTDIR [RUNS]
#
# For the 2x H200 device machine (nvidia-h200-x2). fp4doctor runs from the checkout
# (PYTHONPATH), as in gpu_round.sh; wheels in .whl/ are installed to /tmp/site first. Ray must be
# importable there: that machine has no package index, and the ray wheel (ray 2.60.0, cp311,
# manylinux2014_x86_64: 76 MB; its dependencies msgpack, protobuf, jsonschema, filelock,
# requests, click, pyyaml, packaging besides) is larger than the 64 MiB a device run carries.
# What fits: the wheel's `ray/` without jars/, dashboard/client, rllib, data, tune, train, serve
# and llm (what the fleet does not load) as .whl/ray-*.tar.xz (27 MB for cp311 with xz -6; it ran
# a two-node fleet here), extracted into /tmp/site, and its dependencies' wheels (2.3 MB), in
# $FLEET_WHL (default .whl/).
# Without ray the round says so and stops. Everything lands in OUTDIR.
set -u
out=${1:?usage: fleet_round.sh OUTDIR [RUNS]}
runs=${2:-5}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 RAY_USAGE_STATS_ENABLED=0
whl=${FLEET_WHL:-.whl}  # the wheels' folder: carry only this one (64 MiB per run)
if ls "$whl"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$whl"/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
for core in "$whl"/ray-*.tar.xz; do
  [ -e "$core" ] || continue
  mkdir -p /tmp/site && tar -xJf "$core" -C /tmp/site && export PYTHONPATH=/tmp/site:$PWD
done
if ! python3 -c "import ray" 2> "$out/ray-import.err"; then
  echo "ray is not importable here (see ray-import.err): the fleet round needs it" | tee "$out/SKIPPED"
  exit 3
fi
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
nvidia-smi -L > "$out/nvidia-smi.txt" 2>&1
python3 -c "import ray, sys; print(sys.version); print('ray', ray.__version__)" > "$out/versions.txt" 2>&1
echo "== fleet: $gpus nodes, one GPU each, live GEMM" >&2
python3 benchmarks/bench_fleet.py --gpus "$gpus" --smoke --runs "$runs" \
  --json "$out/bench-fleet.json" --report "$out/fleet-report.json" > "$out/bench-fleet.txt" 2>&1
echo "bench_fleet exit $?" >> "$out/exit-codes.txt"
echo "== fleet: static (no live GEMM)" >&2
python3 benchmarks/bench_fleet.py --gpus "$gpus" --runs "$runs" \
  --json "$out/bench-fleet-static.json" > "$out/bench-fleet-static.txt" 2>&1
echo "bench_fleet (static) exit $?" >> "$out/exit-codes.txt"
cat "$out/bench-fleet.txt" "$out/bench-fleet-static.txt"
