"""`fp4doctor fleet --ray` on a real multi-node Ray cluster on this machine
(`ray.cluster_utils.Cluster`: one GCS, one raylet per node), each node given its own facts
snapshot, so the fleet is mixed: two B200s, one B200 with a mismatched flashinfer-cubin, one
H100. One cluster; no dashboard, the smallest object stores, no CPU (so no raylet starts a worker
before the fleet's tasks ask for one: the tasks ask for no CPU)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("ray", reason="ray is not installed (pip install 'fp4doctor[fleet]')")

from fp4doctor.cli import main
from fp4doctor.fleet import fanout

pytestmark = pytest.mark.fleet

FLEET = Path(__file__).parent / "fixtures" / "fleet"
STORE = 78 * 1024 * 1024  # Ray's smallest object store
NODES = ("b200-01", "b200-02", "h100-01", "b200-04")  # the last one through FP4DOCTOR_FACTS


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    import ray
    from ray.cluster_utils import Cluster

    head, *rest = NODES

    def by_resource(name: str) -> dict[str, float]:
        return {fanout.FACTS_RESOURCE + str(FLEET / f"{name}.json"): 1.0}

    c = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": False,
            "object_store_memory": STORE,
            "resources": by_resource(head),
        },
    )
    for name in rest[:-1]:
        c.add_node(wait=False, num_cpus=0, object_store_memory=STORE, resources=by_resource(name))
    # The last node learns its snapshot from the raylet's environment, which its workers inherit.
    c.add_node(
        wait=False,
        num_cpus=0,
        object_store_memory=STORE,
        env_vars={fanout.FACTS_ENV: str(FLEET / f"{rest[-1]}.json")},
    )
    c.wait_for_nodes()
    ray.init(address=c.address, logging_level="ERROR", log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


def test_fleet_over_ray(cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One test, so that pytest-xdist gives the one cluster to one worker (a module fixture would
    be built once per worker that runs one of the module's tests)."""
    check_every_node_where_it_runs(cluster, tmp_path)
    check_human_output(cluster)
    check_pinned_task_refuses_another_node()
    check_each_group_judged_once(monkeypatch)


def check_each_group_judged_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without live GEMMs the nodes send their facts and the driver judges each distinct group
    once: four nodes, three groups, three judgements (here, in the driver)."""
    from fp4doctor import doctor

    judged = []
    real = doctor.diagnose

    def counted(question: doctor.Question, *args: Any, **kwargs: Any) -> doctor.Report:
        judged.append(kwargs.get("host"))
        return real(question, *args, **kwargs)

    monkeypatch.setattr(doctor, "diagnose", counted)
    report = fanout.run(doctor.Question(target="vllm"))
    assert report.size == 4 and len(report.groups) == 3
    assert len(judged) == 3 and all(h is not None for h in judged)


def check_every_node_where_it_runs(cluster: Any, tmp: Path) -> None:
    result = CliRunner().invoke(
        main, ["fleet", "--ray", cluster.address, "--target", "vllm", "--json"]
    )
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    assert doc["nodes"] == 4 and doc["failed"] == [], doc["failed"]
    groups = sorted(sorted(g["nodes"]) for g in doc["groups"])
    assert groups == [["b200-01", "b200-02"], ["b200-04"], ["h100-01"]]
    (outlier,) = doc["outliers"]
    assert outlier["node"] == "b200-04"
    assert "flashinfer-cubin: 0.6.0 (peers: 0.6.1)" in outlier["reason"]
    # The same report as the offline one over the same snapshots.
    for name in NODES:
        shutil.copy(FLEET / f"{name}.json", tmp / f"{name}.json")
    offline = CliRunner().invoke(main, ["fleet", "--facts", str(tmp), "--target", "vllm", "--json"])
    assert json.loads(offline.stdout)["outliers"] == doc["outliers"]
    assert result.exit_code == offline.exit_code


def check_human_output(cluster: Any) -> None:
    result = CliRunner().invoke(main, ["fleet", "--ray", cluster.address, "--target", "vllm"])
    assert "4 nodes in 3 groups" in result.stdout
    assert "b200-04" in result.stdout.split("Outliers")[1]
    assert "checking every alive node" in result.stderr


def check_pinned_task_refuses_another_node() -> None:
    """The task checks that it runs on the node it was pinned to (it would otherwise report
    another node's facts): asked for a node id it is not on, it reports a failure."""
    out = fanout._check_on_node({"target": "vllm"}, str(FLEET / "b200-01.json"), "x", "0" * 56)
    failed = out["view"]
    assert failed["outcome"] == "error" and "not on 00000000" in failed["error"]
