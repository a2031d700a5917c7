"""The fleet's group key (fleet/key.py) and judging each group once (issue 29): snapshots that
differ only in where and when they were captured share a group, any other difference splits
them, a group is judged on exactly its key's facts, and a broken snapshot among thousands is one
node not judged, named after its file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fp4doctor import doctor, facts
from fp4doctor.cli import main
from fp4doctor.doctor import Question, diagnose
from fp4doctor.fleet import fleet, key, view

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
B200 = json.loads((HOSTS / "b200.json").read_text())
H100 = json.loads((HOSTS / "h100.json").read_text())


def write(directory: Path, name: str, data: dict[str, Any]) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def node(base: dict[str, Any], i: int, **changes: Any) -> dict[str, Any]:
    """A copy of `base` captured on another host at another time."""
    return {
        **base,
        "hostname": f"gpu-node-{i:05d}.cluster.example",
        "captured_at": f"2026-12-01T{i % 24:02d}:{i % 60:02d}:00Z",
        **changes,
    }


def fleet_doc(directory: Path) -> dict[str, Any]:
    result = CliRunner().invoke(
        main, ["fleet", "--facts", str(directory), "--target", "vllm", "--json"]
    )
    assert result.exit_code in (0, 1, 3), result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def groups_of(doc: dict[str, Any]) -> list[list[str]]:
    return sorted(g["nodes"] for g in doc["groups"])


def keyed(data: dict[str, Any]) -> key.Keyed:
    return key.Keys().of(data, "test")


def test_hostname_and_capture_time_share_a_group_a_package_version_does_not(
    tmp_path: Path,
) -> None:
    write(tmp_path, "a", node(B200, 1))
    write(tmp_path, "b", node(B200, 2, fp4doctor_version="0.0.9"))
    other = {**B200["packages"], "versions": {**B200["packages"]["versions"], "vllm": "0.15.0"}}
    write(tmp_path, "c", node(B200, 3, packages=other))
    doc = fleet_doc(tmp_path)
    assert groups_of(doc) == [["a", "b"], ["c"]]
    (outlier,) = doc["outliers"]
    assert outlier["node"] == "c" and "vllm: 0.15.0 (peers: 0.15.1)" in outlier["reason"]


def test_the_synthetic_note_is_in_the_key_since_the_rules_read_it() -> None:
    """`host.synthetic` is a finding naming the note: two notes are two groups (the key's
    predecessor left the note out as capture metadata)."""
    assert keyed(node(B200, 1)).key != keyed(node(B200, 1, synthetic="another fixture")).key
    report = diagnose(Question(target="vllm"), host=keyed(node(B200, 1)).facts)
    assert any(f.id == "host.synthetic" for f in report.findings())


def test_a_uuid_or_a_home_directory_is_redacted_out_of_the_key() -> None:
    uuids = [f"GPU-{i:08x}-aaaa-bbbb-cccc-{i:012x}" for i in range(len(B200["gpus"]))]
    gpus = [{**g, "uuid": u} for g, u in zip(B200["gpus"], uuids, strict=True)]
    a = node(B200, 1, gpus=gpus, env={**B200["env"], "HF_HOME": "/home/alice/hf"})
    b = node(B200, 2, env={**B200["env"], "HF_HOME": "/home/bob/hf"})
    assert keyed(a).key == keyed(b).key
    assert keyed(a).data["env"]["HF_HOME"] == "~/hf"


def test_a_hostname_inside_another_value_is_redacted_not_hashed_away() -> None:
    """The shortcut leaves the hostname out of its hash only where the hostname is in no other
    value: redaction replaces it there, so a snapshot naming another host's name is not that
    host's group."""
    env = B200["env"]
    mine = node(B200, 1, env={**env, "TMPDIR": "/scratch/gpu-node-00001/tmp"})
    twin = node(B200, 2, env={**env, "TMPDIR": "/scratch/gpu-node-00002/tmp"})
    stranger = node(B200, 3, env={**env, "TMPDIR": "/scratch/gpu-node-00001/tmp"})
    keys = key.Keys()
    got = [keys.of(d, name) for d, name in ((mine, "mine"), (twin, "twin"), (stranger, "s"))]
    assert got[0].key == got[1].key  # both say /scratch/<redacted>/tmp
    assert got[2].key != got[0].key  # another host's name is not redacted out of it
    assert got[2].data["env"]["TMPDIR"] == "/scratch/gpu-node-00001/tmp"
    # And the same in the other order (the stranger's hash seen first).
    keys = key.Keys()
    assert keys.of(stranger, "s").key != keys.of(mine, "mine").key


def test_a_group_is_judged_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(30):
        write(tmp_path, f"b200-{i:02d}", node(B200, i))
    for i in range(10):
        write(tmp_path, f"h100-{i:02d}", node(H100, i))
    calls = []
    real = doctor.diagnose

    def counted(question: Question, *args: Any, **kwargs: Any) -> doctor.Report:
        calls.append(question)
        return real(question, *args, **kwargs)

    monkeypatch.setattr(doctor, "diagnose", counted)
    report = fleet.from_directory(tmp_path, Question(target="vllm"))
    assert len(calls) == 2
    assert [g.size for g in report.groups] == [30, 10] and report.size == 40
    # The H100 nodes' vLLM picks flashinfer-cutlass by itself, which SM90 cannot run: not
    # ready as set (`fp4doctor env` switches them to Marlin).
    assert report.families["linear"]["ready"] == 30


def test_every_fixture_is_judged_alike_on_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A group is judged on its key's facts (redacted, without the capture fields), not on any
    one node's snapshot: for every host fixture, what the node's own check says is what its key
    gets, so leaving those fields out hides nothing the rules or the report read."""
    fields = [f.name for f in dataclasses.fields(view.NodeView) if f.name not in ("facts", "name")]
    for snapshot in sorted(HOSTS.glob("*.json")):
        q = Question(target="vllm")
        own = view.of("n", diagnose(dataclasses.replace(q, facts_file=str(snapshot))))
        grouped = fleet.Judge(q)(keyed(json.loads(snapshot.read_text())), "n")
        for name in fields:
            assert getattr(grouped, name) == getattr(own, name), (snapshot.name, name)


def test_a_broken_snapshot_among_thousands_is_one_node_not_judged(tmp_path: Path) -> None:
    for i in range(2000):
        write(tmp_path, f"node-{i:05d}", node(B200, i))
    (tmp_path / "node-00007.json").write_text("{not json")  # among the copies, in their order
    write(tmp_path, "node-00500", node(B200, 500, hostname=5))  # the shortcut's own check
    write(tmp_path, "node-00900", node(B200, 900, captured_at=["noon"]))
    write(tmp_path, "node-01500", {**node(B200, 1500), "gpu": []})  # an unknown key
    doc = fleet_doc(tmp_path)
    assert doc["nodes"] == 2000
    failed = {f["node"]: f["error"] for f in doc["failed"]}
    assert sorted(failed) == ["node-00007", "node-00500", "node-00900", "node-01500"]
    assert failed["node-00007"].startswith(str(tmp_path / "node-00007.json"))
    assert "not valid JSON" in failed["node-00007"]
    assert "'hostname' should be a string" in failed["node-00500"]
    assert "'captured_at' should be a string" in failed["node-00900"]
    assert "unknown key 'gpu'" in failed["node-01500"]
    ((group),) = doc["groups"]
    assert len(group["nodes"]) == 1996
    # Not ready wins over a node not judged; else the broken ones leave no verdict.
    assert doc["exit_code"] == (1 if group["outcome"] == "not ready" else 3)


def test_memory_holds_one_facts_per_group(tmp_path: Path) -> None:
    """Every node of a group shares one key and one facts object: what is held grows with
    the groups."""
    keys = key.Keys()
    found = [keys.of(node(B200, i), f"n{i}") for i in range(50)]
    assert len(keys) == 1 and all(k is found[0] for k in found)


def test_a_fleet_of_one_node_says_node(tmp_path: Path) -> None:
    write(tmp_path, "only", node(B200, 1))
    result = CliRunner().invoke(main, ["fleet", "--facts", str(tmp_path), "--target", "vllm"])
    assert "fleet · 1 node in 1 group\n" in result.stdout
    assert "1 nodes" not in result.stdout


def test_facts_read_by_the_shortcut_match_the_model() -> None:
    """The shortcut's check of the fields its hash leaves out uses the facts model itself."""
    with pytest.raises(facts.FactsError, match="'fp4doctor_version' should be a string"):
        keys = key.Keys()
        keys.of(node(B200, 1), "first")
        keys.of(node(B200, 2, fp4doctor_version=1), "second")
