"""`fp4doctor node`: its outputs read by their consumers' own rules, its exit codes as
node-problem-detector reads them.

- The NFD feature file is read the way nfd-worker's local source reads it
  (kubernetes-sigs/node-feature-discovery `source/local/local.go`: `# +expiry-time=` parsed as
  RFC 3339, other `#` lines skipped, `name=value` or a bare name meaning "true", hidden files
  ignored), and every label checked against the Kubernetes label syntax.
- The Prometheus textfile is parsed with `prometheus_client.parser`, the reference reader.
- The expected verdict is never hard-coded: `fp4doctor check` on the same snapshot says it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from fp4doctor.cli import main
from fp4doctor.fleet import labels, metrics, node
from fp4doctor.fleet.view import Family, NodeView

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
FLEET = Path(__file__).parent / "fixtures" / "fleet"

# Kubernetes label syntax, written out again from the documentation (not imported from the
# module under test): https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/
K8S_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                      r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")  # fmt: skip
K8S_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def nfd_read(text: str, now: datetime) -> dict[str, str]:
    """The labels nfd-worker's local source takes from one feature file (local.go,
    `parseFeatureFile`): expired lines dropped, comments skipped."""
    out: dict[str, str] = {}
    expiry = now
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith("# +"):
                key, _, value = line[3:].partition("=")
                assert key == "expiry-time", f"unknown NFD directive {key!r}"
                expiry = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            continue
        if expiry < now:
            continue
        name, eq, value = line.partition("=")
        out[name] = value if eq else "true"
    return out


def check_code(snapshot: Path) -> int:
    result = CliRunner().invoke(main, ["check", "--facts", str(snapshot), "--target", "vllm"])
    assert result.exit_code in (0, 1, 3), result.output
    return result.exit_code


def run_node(tmp_path: Path, snapshot: Path, *extra: str) -> tuple[int, str, str]:
    args = [
        "node",
        "--facts",
        str(snapshot),
        "--target",
        "vllm",
        "--features-file",
        str(tmp_path / "fp4doctor"),
        "--textfile",
        str(tmp_path / "fp4doctor.prom"),
        "--ready-file",
        str(tmp_path / "ready"),
        *extra,
    ]
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("snapshot", ["b200-01.json", "b200-04.json", "h100-01.json"])
def test_nfd_feature_file_parses_and_carries_the_verdict(tmp_path: Path, snapshot: str) -> None:
    code, out, err = run_node(tmp_path, FLEET / snapshot)
    expected = check_code(FLEET / snapshot)
    assert code == node.npd_exit_code(expected), err
    text = (tmp_path / "fp4doctor").read_text()
    now = datetime.now(timezone.utc)
    found = nfd_read(text, now)
    assert found, text
    for name, value in found.items():
        assert K8S_NAME.fullmatch(name) and len(name.rpartition("/")[2]) <= 63, name
        assert name.startswith("fp4doctor.io/"), name
        assert K8S_VALUE.fullmatch(value) and len(value) <= 63, (name, value)
    assert found["fp4doctor.io/ready"] == ("true" if expected == 0 else "false")
    assert found["fp4doctor.io/target"] == "vllm"
    assert found["fp4doctor.io/engine-version"] == "0.15.1"
    # The expiry: an hour ahead by default; past it, NFD drops every label.
    assert nfd_read(text, now + timedelta(minutes=59)) == found
    assert nfd_read(text, now + timedelta(hours=1, minutes=1)) == {}
    # A temporary file of the atomic write would be hidden (ignored by NFD) and is gone anyway.
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    # stdout: one line for NPD's condition message, within its default 80 bytes.
    assert out.count("\n") == 1 and len(out.strip().encode()) <= node.NPD_MESSAGE_BYTES


def test_nfd_namespace_option_and_expiry(tmp_path: Path) -> None:
    code, _out, err = run_node(
        tmp_path,
        FLEET / "b200-01.json",
        "--label-namespace",
        "feature.node.kubernetes.io",
        "--expiry",
        "120",
    )
    assert code in (0, 1), err
    text = (tmp_path / "fp4doctor").read_text()
    now = datetime.now(timezone.utc)
    found = nfd_read(text, now)
    assert all(k.startswith("feature.node.kubernetes.io/fp4doctor-") for k in found), found
    assert nfd_read(text, now + timedelta(seconds=121)) == {}


def test_bad_label_namespace_is_a_usage_error(tmp_path: Path) -> None:
    code, out, err = run_node(tmp_path, FLEET / "b200-01.json", "--label-namespace", "k8s.io")
    assert code == 2 and out == ""
    assert "valid: fp4doctor.io, feature.node.kubernetes.io" in err
    assert not (tmp_path / "fp4doctor").exists()


def test_prometheus_textfile_parses(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    code, _out, err = run_node(tmp_path, FLEET / "b200-04.json")
    expected = check_code(FLEET / "b200-04.json")
    assert code == node.npd_exit_code(expected), err
    families = {
        f.name: f for f in text_string_to_metric_families((tmp_path / "fp4doctor.prom").read_text())
    }
    for name in ("ready", "outcome", "family_ready", "backend_valid", "info"):
        f = families[f"fp4doctor_{name}"]
        assert f.type == "gauge" and f.documentation, name
    (ready,) = families["fp4doctor_ready"].samples
    assert ready.value == (1.0 if expected == 0 else 0.0)
    assert ready.labels["version"] and ready.labels["target"] == "vllm"
    backends = {s.labels["backend"]: s.value for s in families["fp4doctor_backend_valid"].samples}
    # The mismatched cubin breaks every FlashInfer backend; vLLM's own CUTLASS kernel stays.
    assert backends["flashinfer-cutlass"] == 0.0 and backends["cutlass"] == 1.0
    outcomes = {s.labels["outcome"]: s.value for s in families["fp4doctor_outcome"].samples}
    assert sum(outcomes.values()) == 1.0
    assert families["fp4doctor_last_run_timestamp_seconds"].samples[0].value > 1.7e9


def test_prometheus_label_values_are_escaped() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    odd = 'v"1\\2\nx'
    view = NodeView(
        name="n",
        outcome="ready",
        exit_code=0,
        target="vllm",
        engine=odd,
        engine_version=odd,
        families={"linear": Family("ready", "cutlass")},
        backends={"cutlass": True},
    )
    parsed = {f.name: f for f in text_string_to_metric_families(metrics.textfile(view, now=1.0))}
    (info,) = parsed["fp4doctor_info"].samples
    assert info.labels["engine"] == odd and info.labels["engine_version"] == odd


def test_ready_file_follows_the_verdict(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    for snapshot in ("b200-01.json", "b200-04.json", "h100-01.json"):
        code, _out, _err = run_node(tmp_path, FLEET / snapshot)
        assert ready.exists() == (code == node.NPD_OK), snapshot


@pytest.mark.parametrize(
    ("snapshot", "npd"),
    [("nvml-mismatch.json", node.NPD_UNKNOWN), ("does-not-exist.json", node.NPD_UNKNOWN)],
)
def test_no_verdict_is_npd_unknown(tmp_path: Path, snapshot: str, npd: int) -> None:
    code, _out, err = run_node(tmp_path, HOSTS / snapshot)
    assert code == npd, err
    assert "Traceback" not in err


def test_unwritable_output_is_npd_unknown_with_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "node",
            "--facts",
            str(FLEET / "b200-01.json"),
            "--target",
            "vllm",
            "--textfile",
            str(tmp_path / "missing" / "fp4doctor.prom"),
        ],
    )
    assert result.exit_code == node.NPD_UNKNOWN
    assert "cannot write" in result.stderr and "does not exist" in result.stderr
    assert result.stderr.count("\n") == 1


def test_npd_mapping() -> None:
    assert [node.npd_exit_code(c) for c in (0, 1, 2, 3, 4, 130)] == [0, 1, 2, 2, 2, 2]


@settings(max_examples=60)
@given(st.text(max_size=90))
def test_any_text_becomes_a_valid_label_value(text: str) -> None:
    out = labels.value(text)
    assert labels.valid_value(out) and K8S_VALUE.fullmatch(out) and len(out) <= 63


def test_label_helpers() -> None:
    assert labels.value("0.11.0+cu128") == "0.11.0_cu128"
    assert labels.valid_key("fp4doctor.io/backend.flashinfer-cudnn")
    assert not labels.valid_key("fp4doctor.io/-bad")
    assert not labels.valid_key("Fp4doctor.IO/ready")  # the prefix is a lower-case DNS name
    with pytest.raises(ValueError, match="valid:"):
        labels.key("example.com", "ready")
    with pytest.raises(ValueError, match="not a valid label value"):
        labels.feature_file(
            {"fp4doctor.io/x": "a b"}, expires=datetime.now(timezone.utc), comment=""
        )


# --- kill -9 during the writes ----------------------------------------------------------------

KILLED_AT_EACH_STEP = r"""
import datetime, functools, json, os, signal, sys
from fp4doctor import cli
from fp4doctor.fleet import node

where, args = sys.argv[1], sys.argv[2:]
paths = {name: os.path.join(where, name) for name in ("features", "fp4doctor.prom", "ready")}
OLD = {name: f"the old {name}, complete\n" for name in paths}
real = {name: getattr(os, name) for name in
        ("open", "write", "fsync", "close", "replace", "link", "unlink", "chmod")}
state = {"inside": False, "calls": 0, "kill_at": 0}


def counted(name):
    def call(*a, **k):
        if state["inside"]:
            state["calls"] += 1
            if state["calls"] == state["kill_at"]:
                if name == "write":  # the worst moment: half the bytes are out
                    real["write"](a[0], bytes(a[1])[: len(a[1]) // 2])
                os.kill(os.getpid(), signal.SIGKILL)
        return real[name](*a, **k)
    return call


for name in real:
    setattr(os, name, counted(name))
atomic_write = node.write_atomic


def write_atomic(*a, **k):
    state["inside"] = True
    try:
        return atomic_write(*a, **k)
    finally:
        state["inside"] = False


node.write_atomic = write_atomic  # as node.py imported it
moment = datetime.datetime(2026, 12, 3, tzinfo=datetime.timezone.utc)
node.write = functools.partial(node.write, now=moment)  # the same new files in every run
checked = []
run_check = node.run_check


def run_check_once(*a, **k):  # judged once, in this process; each fork only writes
    if not checked:
        checked.append(run_check(*a, **k))
    return checked[0]


node.run_check = run_check_once
argv = ["node", *args, "--features-file", paths["features"],
        "--textfile", paths["fp4doctor.prom"], "--ready-file", paths["ready"]]


def command(kill_at):
    state["kill_at"], state["calls"] = kill_at, 0
    try:
        cli.main(argv)
    except SystemExit:
        pass


runs = []
for kill_at in range(0, 200):
    for name, path in paths.items():
        with open(path, "w") as f:
            f.write(OLD[name])
    for stale in os.listdir(where):
        if stale not in paths:
            real["unlink"](os.path.join(where, stale))
    killed = False
    if kill_at == 0:
        command(0)  # never killed: the new files, and the judgement the forks reuse
    else:
        pid = os.fork()
        if pid == 0:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            command(kill_at)
            os._exit(0)
        killed = os.WIFSIGNALED(os.waitpid(pid, 0)[1])
    files = {}
    for name in sorted(os.listdir(where)):
        with open(os.path.join(where, name)) as f:
            files[name] = f.read()
    runs.append({"kill_at": kill_at, "killed": killed, "files": files})
    if kill_at and not killed:
        break  # past the last file operation: it ran to the end
sys.stdout.flush()
print("\n" + json.dumps({"old": OLD, "runs": runs}))
"""


def test_kill_9_at_any_step_of_the_writes_leaves_each_file_old_or_new(tmp_path: Path) -> None:
    """fake (the moment, not the kill): `fp4doctor node` forked once per step of its writes
    (every open, write, fsync, close, chmod, link, replace, unlink inside write_atomic) and
    killed with a real SIGKILL at that step, a write cut after half its bytes. Each output is
    then the old file or the new one, complete; what a kill leaves behind is a hidden
    temporary file, which neither NFD (hidden files ignored) nor node-exporter (`*.prom`)
    reads."""
    where = tmp_path / "out"
    where.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", KILLED_AT_EACH_STEP, str(where),
         "--facts", str(FLEET / "b200-01.json"), "--target", "vllm"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])  # after the NPD line of the first run
    old, runs = result["old"], result["runs"]
    new = runs[0]["files"]  # kill_at 0: never killed
    assert not runs[0]["killed"] and all(new.get(name) != old[name] for name in old)
    killed = [run for run in runs if run["killed"]]
    for run in killed:
        files = run["files"]
        for name in old:
            assert files.get(name) in (old[name], new.get(name)), (run["kill_at"], name)
        assert all(n.startswith(".") and n.endswith(".tmp") for n in set(files) - set(old))
    assert len(killed) >= 2 * 5  # each file: open, write, fsync, close, replace at the least
    # The kills fell before, between and after the files were replaced.
    assert killed[0]["files"].items() >= old.items()
    assert any(run["files"]["features"] == new["features"] for run in killed)
    assert runs[-1]["files"] == new
