"""`fp4doctor fleet --facts DIR`: one report across a directory of snapshots (the synthetic fleet
in tests/fixtures/fleet: three identical B200s, one B200 with a mismatched flashinfer-cubin, one
H100), and the grouping rules on their own."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from fp4doctor.cli import main
from fp4doctor.doctor import Question, diagnose
from fp4doctor.fleet import group, view

FLEET = Path(__file__).parent / "fixtures" / "fleet"
HOSTS = Path(__file__).parent / "fixtures" / "hosts"


def fleet_json(directory: Path, *extra: str) -> tuple[int, dict[str, object], str]:
    result = CliRunner().invoke(
        main, ["fleet", "--facts", str(directory), "--target", "vllm", "--json", *extra]
    )
    doc = json.loads(result.stdout) if result.stdout else {}
    return result.exit_code, doc, result.stderr


@pytest.fixture(scope="module")
def report() -> tuple[int, dict[str, object], str]:
    return fleet_json(FLEET)


def test_groups_identical_nodes_and_names_the_outlier(report: tuple[int, dict, str]) -> None:
    _code, doc, err = report
    assert doc["nodes"] == 5, err
    groups = {tuple(g["nodes"]): g for g in doc["groups"]}
    assert set(groups) == {("b200-01", "b200-02", "b200-03"), ("b200-04",), ("h100-01",)}
    assert doc["groups"][0]["nodes"] == ["b200-01", "b200-02", "b200-03"]  # largest first
    (outlier,) = doc["outliers"]  # the H100 is another cohort (other GPUs), not an outlier
    assert outlier["node"] == "b200-04" and outlier["baseline"] == doc["groups"][0]["id"]
    assert {
        "kind": "FlashInfer",
        "what": "flashinfer-cubin",
        "node": "0.6.0",
        "peers": "0.6.1",
    } in (outlier["differences"])
    assert "flashinfer-cubin: 0.6.0 (peers: 0.6.1)" in outlier["reason"]
    # Its linear verdict differs from its peers', and the reason is FlashInfer's version check.
    assert "linear: not ready" in outlier["reason"]
    assert "flashinfer-cubin 0.6.0" in outlier["verdict"]
    assert doc["failed"] == []


def test_verdicts_match_each_nodes_own_check(report: tuple[int, dict, str]) -> None:
    code, doc, _err = report
    codes = {}
    for snapshot in FLEET.glob("*.json"):
        r = diagnose(Question(target="vllm", facts_file=str(snapshot)))
        codes[snapshot.stem] = r.outcome.exit_code
        g = next(g for g in doc["groups"] if snapshot.stem in g["nodes"])
        assert g["outcome"] == r.outcome.value
        # The env each group should use is what `fp4doctor env` exports on that node.
        env = CliRunner().invoke(
            main, ["env", "--facts", str(snapshot), "--target", "vllm", "--shell", "json"]
        )
        exported = json.loads(env.stdout)
        assert exported["outcome"] == ("ready" if env.exit_code == 0 else r.outcome.value)
        assert g["env"] == {"set": exported["set"], "unset": exported["unset"]}, snapshot.stem
    assert code == (1 if 1 in codes.values() else 0 if set(codes.values()) == {0} else 3)
    for family, counts in doc["families"].items():
        assert sum(counts.values()) == 5, family


def test_human_output(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["fleet", "--facts", str(FLEET), "--target", "vllm"])
    out = result.stdout
    assert "5 nodes in 3 groups" in out
    assert "nodes: b200-01, b200-02, b200-03" in out
    assert "b200-04" in out.split("Outliers")[1] and "flashinfer-cubin" in out
    assert result.stderr == ""


def test_unreadable_snapshot_is_a_node_not_judged(tmp_path: Path) -> None:
    shutil.copy(FLEET / "b200-01.json", tmp_path / "b200-01.json")
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / ".hidden.json").write_text("{}")  # hidden: not a snapshot
    code, doc, _err = fleet_json(tmp_path)
    assert doc["nodes"] == 2
    assert [f["node"] for f in doc["failed"]] == ["broken"]
    assert "not valid JSON" in doc["failed"][0]["error"]
    assert code in (1, 3)  # not ready wins over a node not judged; else no verdict


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fleet", "--target", "vllm"], "give one of --facts DIR"),
        (["fleet", "--facts", "FLEET", "--ray", "auto"], "give one of --facts DIR"),
        (["fleet", "--facts", "EMPTY"], "no facts snapshot"),
        (["fleet", "--facts", "FLEET", "--target", "nope"], "nope"),
    ],
)
def test_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "empty").mkdir()
    args = [{"FLEET": str(FLEET), "EMPTY": str(tmp_path / "empty")}.get(a, a) for a in args]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_facts_must_be_a_directory() -> None:
    result = CliRunner().invoke(main, ["fleet", "--facts", str(FLEET / "b200-01.json")])
    assert result.exit_code == 2 and "is a file" in result.stderr


def test_ray_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if ray were not installed
    monkeypatch.delitem(sys.modules, "fp4doctor.fleet.fanout", raising=False)
    import fp4doctor.fleet  # the package keeps a loaded submodule as an attribute too

    monkeypatch.delattr(fp4doctor.fleet, "fanout", raising=False)
    result = CliRunner().invoke(main, ["fleet", "--ray", "--target", "vllm"])
    assert result.exit_code == 2
    assert "pip install 'fp4doctor[fleet]'" in result.stderr


def test_default_path_never_imports_ray() -> None:
    """Start-up loads no module of the fleet package (a command's module loads when it runs);
    `fleet --facts` never loads ray."""
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from fp4doctor.cli import main\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('fp4doctor.fleet'))\n"
        "assert loaded == [], loaded\n"
        f"r = CliRunner().invoke(main, ['fleet', '--facts', {str(FLEET)!r}, '--target', 'vllm'])\n"
        "assert r.exit_code in (0, 1), r.output\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
        "assert 'fp4doctor.fleet.fanout' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# --- the grouping rules on their own ---------------------------------------------------------


def own_check(snapshot: Path) -> view.NodeView:
    """One node's view as its own check gives it (`fleet --ray --smoke` gathers these)."""
    return view.of(snapshot.stem, diagnose(Question(target="vllm", facts_file=str(snapshot))))


def views() -> list[view.NodeView]:
    return [own_check(p) for p in sorted(FLEET.glob("*.json"))]


def test_same_facts_other_verdict_is_an_outlier() -> None:
    vs = views()
    b3 = next(v for v in vs if v.name == "b200-03")
    flipped = replace(
        b3,
        outcome="not ready",
        exit_code=1,
        chosen=None,
        families={k: view.Family("not ready", None, "live GEMM failed") for k in b3.families},
        blocking=("live GEMM failed on GPU 3",),
    )
    report = group.build([v if v is not b3 else flipped for v in vs])
    outlier = next(o for o in report.outliers if o.node == "b200-03")
    assert outlier.differences == () and "live GEMM failed" in outlier.reason
    assert report.group_of("b200-03") is report.group_of("b200-01")


def test_view_round_trips_through_a_dict() -> None:
    for v in views():
        again = view.NodeView.from_dict(json.loads(json.dumps(v.to_dict())))
        assert again == v


def test_empty_fleet_is_no_verdict() -> None:
    report = group.build([])
    assert report.outcome == "no verdict" and report.exit_code == 3


def test_no_gpu_and_nvml_failure_are_different_cohorts() -> None:
    report = group.build([own_check(HOSTS / "cpu.json"), own_check(HOSTS / "nvml-mismatch.json")])
    assert report.outliers == ()


def test_a_node_with_unreadable_facts_is_not_judged() -> None:
    vs = views()
    newer = replace(vs[0], name="from-the-future", facts={**vs[0].facts, "schema_version": 99})
    report = group.build([*vs, newer])
    assert [n.name for n in report.failed] == ["from-the-future"]
    assert "newer than this fp4doctor understands" in (report.failed[0].error or "")
    assert report.size == len(vs) + 1


def test_counts_are_plural_unless_one(tmp_path: Path) -> None:
    shutil.copy(FLEET / "b200-01.json", tmp_path / "b200-01.json")
    result = CliRunner().invoke(main, ["fleet", "--facts", str(tmp_path), "--target", "vllm"])
    out = result.stdout
    assert " 1 node in 1 group\n" in out and "1 nodes" not in out
    assert "of 1 judged node ready, 0 outliers, 0 not judged" in out
    many = CliRunner().invoke(main, ["fleet", "--facts", str(FLEET), "--target", "vllm"]).stdout
    assert " 5 nodes in 3 groups\n" in many and " 1 outlier, " in many
