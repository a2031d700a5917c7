"""A simulated fleet against one node's check (issue 15: the fleet at most 1.5x one check).

    python benchmarks/bench_fleet.py --nodes 16 --runs 5 [--json out.json]
    python benchmarks/bench_fleet.py --address HOST:PORT --runs 5 --smoke   # an existing cluster

Without --address it starts a local Ray cluster (`ray.cluster_utils.Cluster`: one raylet per
node, no dashboard, the smallest object store, one CPU), each node given one snapshot of
tests/fixtures/fleet/ in turn through its `fp4doctor-facts:<path>` resource, and tears it down
after. With --address it uses the cluster that is there (each node probes itself: the GPU round,
benchmarks/fleet_round.sh).

Measured, each the median of --runs after one warm-up (not counted):
- `check`: `fp4doctor check --json --target vllm` as a subprocess, on one snapshot (or on this
  host with --address), the single-node baseline;
- `fleet (CLI)`: `fp4doctor fleet --ray ADDRESS --json --target vllm` as a subprocess: what a
  user runs, `import ray` and joining the cluster included;
- `ray floor`: `python -c "import ray; ray.init(address=ADDRESS)"`: what any Ray-driven command
  pays before its first task;
- `fan-out`: `fanout.run` in this process, already joined: the tasks, their checks on every
  node, the gathering and grouping; the part that grows with the fleet.
The ratios to `check` are printed side by side; `--check` exits 1 when the fan-out misses 1.5x.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing

ROOT = Path(__file__).resolve().parent.parent
FLEET = ROOT / "tests" / "fixtures" / "fleet"
STORE = 78 * 1024 * 1024
TARGET = 1.5


def fp4doctor() -> list[str]:
    found = timing.script("fp4doctor")
    return [found] if found else [sys.executable, "-m", "fp4doctor"]


def start_cluster(nodes: int) -> Any:
    from ray.cluster_utils import Cluster

    from fp4doctor.fleet import fanout

    snaps = sorted(FLEET.glob("*.json"))

    def res(i: int) -> dict[str, float]:
        return {fanout.FACTS_RESOURCE + str(snaps[i % len(snaps)]): 1.0}

    c = Cluster(
        initialize_head=True,
        head_node_args={
            # One CPU a node, as any real node has: Ray keeps idle workers up to the node's CPU
            # count, so a second fan-out of the same driver reuses them (measured with none:
            # every fan-out started 16 new workers, 15.4 s instead of 0.82 s).
            "num_cpus": 1,
            "include_dashboard": False,
            "object_store_memory": STORE,
            "resources": res(0),
        },
    )
    for i in range(1, nodes):
        c.add_node(wait=False, num_cpus=1, object_store_memory=STORE, resources=res(i))
    c.wait_for_nodes()
    return c


def start_gpu_cluster(gpus: int) -> Any:
    """One node per GPU: node i's raylet (and so its workers) sees only GPU i, and probes it."""
    from ray.cluster_utils import Cluster

    def node(i: int) -> dict[str, Any]:
        return {
            "num_cpus": 2,
            "num_gpus": 1,
            "object_store_memory": STORE,
            "env_vars": {"CUDA_VISIBLE_DEVICES": str(i)},
        }

    c = Cluster(initialize_head=True, head_node_args={"include_dashboard": False, **node(0)})
    for i in range(1, gpus):
        c.add_node(wait=False, **node(i))
    c.wait_for_nodes()
    return c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--address", help="use this running cluster (each node probes itself)")
    ap.add_argument(
        "--gpus", type=int, default=0, help="a local cluster of one node per GPU (probing itself)"
    )
    ap.add_argument("--report", help="write the last fleet report (JSON) here")
    ap.add_argument("--smoke", action="store_true", help="live GEMMs (with --address, on GPUs)")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--check", action="store_true", help="exit 1 when the fan-out misses 1.5x")
    args = ap.parse_args()

    import ray

    from fp4doctor.doctor import Question
    from fp4doctor.fleet import fanout

    started = time.perf_counter()
    if args.address:
        cluster = None
    elif args.gpus:
        cluster = start_gpu_cluster(args.gpus)
    else:
        cluster = start_cluster(args.nodes)
    address = args.address or cluster.address  # type: ignore[union-attr]
    start_s = time.perf_counter() - started
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    alive = [n for n in ray.nodes() if n.get("Alive")]
    print(f"cluster: {len(alive)} alive nodes at {address} (started in {start_s:.1f} s)",
          file=sys.stderr)  # fmt: skip
    smoke = ["--smoke"] if args.smoke else ["--no-smoke"]
    probing = bool(args.address or args.gpus)
    one = [] if probing else ["--facts", str(sorted(FLEET.glob("*.json"))[0])]
    check = timing.measure(
        "check", [*fp4doctor(), "check", "--json", "--target", "vllm", *smoke, *one], None,
        args.runs, ok_codes=(0, 1), env={"CUDA_VISIBLE_DEVICES": "0"} if args.gpus else None,
    )  # fmt: skip
    fleet_cli = timing.measure(
        "fleet (CLI)",
        [*fp4doctor(), "fleet", "--ray", address, "--json", "--target", "vllm",
         *(["--smoke"] if args.smoke else [])],
        None, args.runs, ok_codes=(0, 1, 3), timeout_s=600,
    )  # fmt: skip
    floor = timing.measure(
        "ray floor",
        [sys.executable, "-c", f"import ray; ray.init(address={address!r}, logging_level='ERROR')"],
        None, args.runs,
    )  # fmt: skip
    q = Question(target="vllm", smoke=bool(args.smoke))
    report = fanout.run(q)  # warm-up: every node's worker imports fp4doctor once
    walls = []
    for _ in range(args.runs):
        t = time.perf_counter()
        report = fanout.run(q)
        walls.append(time.perf_counter() - t)
    fan = statistics.median(walls)
    if args.report:
        from fp4doctor.fleet import render

        Path(args.report).write_text(json.dumps(render.document(report), indent=2) + "\n")
    ray.shutdown()
    if cluster is not None:
        cluster.shutdown()

    base = check.wall_s or float("nan")
    rows = [
        ("check (1 node)", base, check.cpu_s),
        (f"fleet (CLI), {len(alive)} nodes", fleet_cli.wall_s, fleet_cli.cpu_s),
        ("ray floor (import ray + ray.init)", floor.wall_s, floor.cpu_s),
        (f"fan-out, {len(alive)} nodes, joined", fan, None),
    ]
    print(f"{'':40} {'wall s':>8} {'cpu s':>8} {'x check':>8}")
    for name, wall, cpu in rows:
        w = f"{wall:8.3f}" if wall is not None else "       -"
        c = f"{cpu:8.3f}" if cpu is not None else "       -"
        r = f"{wall / base:8.2f}" if wall is not None else "       -"
        print(f"{name:40} {w} {c} {r}")
    print(
        f"fleet report: {len(report.nodes)} nodes, {len(report.groups)} groups, "
        f"{len(report.outliers)} outliers, {len(report.failed)} not judged, {report.outcome}"
    )
    ok = fan / base <= TARGET
    print(f"fan-out / check = {fan / base:.2f} (target <= {TARGET}): {'met' if ok else 'MISSED'}")
    if args.json_out:
        doc = {
            "nodes": len(alive),
            "cluster_start_s": start_s,
            "runs": args.runs,
            "smoke": args.smoke,
            "check": check.to_json(),
            "fleet_cli": fleet_cli.to_json(),
            "ray_floor": floor.to_json(),
            "fanout_walls_s": walls,
            "fanout_wall_s_median": fan,
            "ratio_fanout_to_check": fan / base,
            "ratio_fleet_cli_to_check": (fleet_cli.wall_s or float("nan")) / base,
            "machine": {
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "ray": ray.__version__,
                "load_after": os.getloadavg(),
            },
            "report": {
                "groups": [g.names for g in report.groups],
                "outliers": [o.node for o in report.outliers],
                "failed": [n.name for n in report.failed],
            },
        }
        Path(args.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
