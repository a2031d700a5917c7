"""The fleet, measured: over Ray against one node's check (issue 15), and offline over a directory
of snapshots, now against the old per-snapshot path (issue 29).

    python benchmarks/bench_fleet.py --nodes 16 --runs 5 [--json out.json]
    python benchmarks/bench_fleet.py --address HOST:PORT --runs 5 --smoke   # an existing cluster
    python benchmarks/bench_fleet.py --offline --sizes 5000,100000 --groups 50 --before main

Over Ray, without --address it starts a local Ray cluster (`ray.cluster_utils.Cluster`: one
raylet per node, no dashboard, the smallest object store, one CPU), each node given one snapshot
of tests/fixtures/fleet/ in turn through its `fp4doctor-facts:<path>` resource, and tears it
down after. With --address it uses the cluster that is there (each node probes itself: the GPU
round, benchmarks/fleet_round.sh).

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

Offline (`--offline`): for each of --sizes, a directory of that many snapshots in --groups
groups made from tests/fixtures/hosts/ (`write_fleet`: a baseline group per kind of GPU node,
one node in 50 in the groups that drifted from them), then `fp4doctor fleet --facts DIR --json
--target vllm` as a subprocess (median wall, CPU and peak resident memory of --runs after one
warm-up), beside one `check --facts` on one of the snapshots; and, at the sizes in
--before-sizes, the same command from the old tree (--before: a revision, exported with `git
archive`, or a directory holding its fp4doctor/ and profiles/, as benchmarks/side_by_side.py
takes it), --before-runs times, without a warm-up (each costs a minute or more). Prints the
medians and the ratios old/new; `--check` exits 1 when a size misses its target (5 s for up to
5,000 snapshots, 20 s for up to 100,000).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
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


HOSTS = ROOT / "tests" / "fixtures" / "hosts"
OFFLINE_TARGETS = ((5000, 5.0), (100_000, 20.0))  # snapshots, at most so many seconds


DRIFTED = 50  # one node in so many is in a drifted group


def write_fleet(directory: Path, size: int, groups: int) -> None:
    """`size` snapshots in `groups` groups, as a fleet looks: one baseline group per kind of GPU
    node (the first host fixture of each cohort), holding all but one node in `DRIFTED`; the
    other groups drifted from them (host fixture i in turn, with a made-up package
    `bench-group` at version 1.i), each an outlier of its cohort. Every snapshot has its own
    hostname (unredacted, as the fixtures are) and capture time."""
    from fp4doctor.fleet.group import hardware

    hosts = [json.loads(p.read_text()) for p in sorted(HOSTS.glob("*.json"))]
    baselines = list({hardware(h): h for h in reversed(hosts)}.values())[::-1][:groups]
    drifted = []
    for i in range(groups - len(baselines)):
        host = hosts[i % len(hosts)]
        versions = {**host["packages"]["versions"], "bench-group": f"1.{i}"}
        drifted.append({**host, "packages": {**host["packages"], "versions": versions}})
    directory.mkdir(parents=True)
    every = [*baselines, *drifted]
    for j in range(size):
        if j < len(every):  # a node in each group, whatever the size
            base = every[j]
        elif drifted and j % DRIFTED == DRIFTED - 1:
            base = drifted[j // DRIFTED % len(drifted)]
        else:
            base = baselines[j % len(baselines)]
        snap = {
            **base,
            "hostname": f"node-{j:06d}.bench.example",
            "captured_at": f"2026-12-03T{j // 3600 % 24:02d}:{j // 60 % 60:02d}:{j % 60:02d}Z",
        }
        (directory / f"node-{j:06d}.json").write_text(json.dumps(snap, indent=2) + "\n")


def inspect_fleet(size: int, groups: int) -> timing.Inspector:
    """The warm-up's report must hold every snapshot, in the groups made (or more, where two
    host fixtures' groups tell their hosts apart further: none do)."""

    def check(stdout: bytes) -> dict[str, Any]:
        doc = json.loads(stdout)
        if doc["nodes"] != size or doc["failed"]:
            raise ValueError(f"{doc['nodes']} nodes, {len(doc['failed'])} not judged")
        if len(doc["groups"]) != groups:
            raise ValueError(f"{len(doc['groups'])} groups, not {groups}")
        return {"nodes": doc["nodes"], "groups": len(doc["groups"]), "outcome": doc["outcome"]}

    return check


def offline(args: argparse.Namespace) -> int:
    import tempfile

    from side_by_side import export

    sizes = [int(n) for n in args.sizes.split(",")]
    before_sizes = {int(n) for n in args.before_sizes.split(",")} if args.before else set()
    rows: list[tuple[int, timing.Result, timing.Result | None]] = []
    with tempfile.TemporaryDirectory(prefix="fp4doctor-fleet-") as scratch:
        trees = {"now": ROOT}
        if args.before:
            (Path(scratch) / "before").mkdir()
            trees["before"] = export(args.before, Path(scratch) / "before")
        timing.compile_bytecode([tree / "fp4doctor" for tree in trees.values()])

        def command(tree: str, *arguments: str) -> tuple[list[str], dict[str, str]]:
            path = os.pathsep.join(p for p in (str(trees[tree]), os.environ.get("PYTHONPATH")) if p)
            return [sys.executable, "-P", "-m", "fp4doctor", *arguments], {"PYTHONPATH": path}

        def fleet(size: int, directory: Path, tree: str, runs: int, **how: Any) -> timing.Result:
            arguments = ("fleet", "--facts", str(directory), "--json", "--target", "vllm")
            cmd, env = command(tree, *arguments)
            name = f"{tree}: fleet, {size}"
            return timing.measure(name, cmd, None, runs, ok_codes=(0, 1, 3), env=env, **how)

        one = None
        for size in sizes:
            directory = Path(scratch) / f"fleet-{size}"
            started = time.perf_counter()
            write_fleet(directory, size, args.groups)
            print(
                f"{size} snapshots written in {time.perf_counter() - started:.1f} s",
                file=sys.stderr,
            )
            if one is None:
                cmd, env = command(
                    "now",
                    "check",
                    "--json",
                    "--target",
                    "vllm",
                    "--facts",
                    str(directory / "node-000000.json"),
                )
                one = timing.measure(
                    "check (1 snapshot)", cmd, None, args.runs, ok_codes=(0, 1), env=env
                )
            now = fleet(size, directory, "now", args.runs, inspect=inspect_fleet(size, args.groups))
            # The old tree without a warm-up: the page cache is warm from the runs above, and
            # each run of the old path costs minutes at these sizes.
            before = (
                fleet(size, directory, "before", args.before_runs, warmups=0)
                if size in before_sizes
                else None
            )
            rows.append((size, now, before))
            shutil.rmtree(directory)
    results = [r for _, now, before in rows for r in (now, before) if r is not None]
    assert one is not None
    ratios = {}
    for _size, now, before in rows:
        if before is not None and (r := timing.ratio(before, now)) is not None:
            ratios[before.tool] = r
    print(
        "\n".join(
            timing.table(
                [one, *results],
                title=f"fleet --facts DIR, {args.groups} groups: median of {args.runs} "
                "runs after one warm-up (before: --before-runs, no warm-up)",
                ratio_label="old/new",
                ratios=ratios,
            )
        )
    )
    verdicts: dict[str, bool | None] = {}
    for size, now, _before in rows:
        limit = next((s for n, s in OFFLINE_TARGETS if size <= n), None)
        if limit is not None:
            ok = now.wall_s is not None and now.wall_s <= limit
            verdicts[f"{size} snapshots in {args.groups} groups within {limit:g} s"] = ok
        if now.wall_s and one.wall_s:
            per = (now.wall_s - one.wall_s) / size * 1e6
            print(f"{size}: {per:.0f} us a snapshot beyond one check", file=sys.stderr)
    print("\n".join(timing.verdict_lines(verdicts)))
    if args.json_out:
        doc = {
            "mode": "offline",
            "groups": args.groups,
            "before": args.before,
            "check": one.to_json(),
            "sizes": [
                {
                    "snapshots": size,
                    "now": now.to_json(),
                    "before": before.to_json() if before else None,
                }
                for size, now, before in rows
            ],
            "machine": {
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "load_after": os.getloadavg(),
            },
        }
        Path(args.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    failed = not all(r.ok for r in [one, *results])
    return 1 if failed or (args.check and not all(verdicts.values())) else 0


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
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--offline", action="store_true", help="fleet --facts DIR, not Ray")
    ap.add_argument("--sizes", default="5000,100000", help="--offline: snapshots per run")
    ap.add_argument("--groups", type=int, default=50, help="--offline: groups among them")
    ap.add_argument("--before", metavar="REV|DIR", help="--offline: the old tree to compare")
    ap.add_argument("--before-sizes", default="5000", help="--offline: sizes the old tree runs")
    ap.add_argument("--before-runs", type=int, default=1, help="--offline: the old tree's runs")
    args = ap.parse_args()
    if args.offline:
        return offline(args)

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
    ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    alive = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
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
        f"fleet report: {report.size} nodes, {len(report.groups)} groups, "
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
