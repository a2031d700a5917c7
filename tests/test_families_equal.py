"""Issue 30: the FP4 GEMM families are equal parts of one report, and every consumer reads the
one readiness. Over every host fixture and two vLLM releases, `env` and `config` exit 0 exactly
when every family has a valid choice, name the family that has none otherwise, and never print
`None`; `check` agrees with them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fp4doctor.doctor import Question, diagnose

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
FIXTURES = sorted(p for p in HOSTS.glob("*.json"))
RELEASES = ("0.15.1", "0.33.0")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fp4doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("host", FIXTURES, ids=lambda p: p.stem)
def test_env_and_config_exit_0_exactly_when_every_family_has_a_valid_choice(
    host: Path, release: str, tmp_path: Path
) -> None:
    report = diagnose(Question(target="vllm", facts_file=str(host), engine_version=release))
    # The families counted decide (no model here: the dense linear one; the MoE experts are
    # assumed, judged and reported, not counted).
    valid = all(p.chosen is not None for p in report.counted)
    no_verdict = report.outcome.exit_code == 3
    expected = 3 if no_verdict else (0 if valid else 1)
    common = ("--target", "vllm", "--facts", str(host), "--engine-version", release)
    env = run("env", *common)
    # Both files: a release takes the choice as flags (the YAML), variables (the dotenv), or both.
    files = (tmp_path / "vllm-fp4.yaml", tmp_path / "vllm-fp4.env")
    config = run("config", *common, "-o", str(files[0]), "-o", str(files[1]))
    for done in (env, config):
        assert done.returncode == expected, done.stderr
        assert not re.search(r"\bNone\b", done.stderr), done.stderr
        if expected == 1:
            for part in report.counted:
                if part.chosen is None:
                    assert f"the {part.title} has no valid backend here" in done.stderr
    if expected != 0:
        assert env.stdout == ""
        assert not any(f.exists() for f in files)
    check = run("check", *common, "--json", "--no-smoke")
    doc = json.loads(check.stdout)
    assert {k: f["chosen"] for k, f in doc["families"].items()} == {
        p.family: p.chosen for p in report.families
    }
    assert not re.search(r"\bNone\b", check.stderr + doc["headline"])


def test_the_moe_family_without_a_valid_backend_stops_env_on_the_hosts_the_issue_names() -> None:
    """b200-no-flashinfer and b200-no-nvcc-no-cubin at vLLM 0.15.1: `check --json` had
    `families.moe.resolution.chosen = null`, yet `env` said ready (issue 30). The model served
    is an MoE one (its name says so): the MoE family is counted."""
    for name in ("b200-no-flashinfer", "b200-no-nvcc-no-cubin"):
        host = str(HOSTS / f"{name}.json")
        done = run("env", "--target", "vllm", "--facts", host, "--engine-version", "0.15.1",
                   "--", "vllm", "serve", "nvidia/Qwen3-30B-A3B-FP4")  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert "the fused-MoE FP4 GEMM has no valid backend here" in done.stderr
        assert done.stdout == ""


def test_no_module_decides_by_parsing_a_finding_id() -> None:
    """Code decides by a finding's kind, family, backend, rule or advisory, never by its id."""
    root = Path(__file__).parent.parent / "fp4doctor"
    parsing = re.compile(r"\.id\.(startswith|endswith|split|rsplit|partition)\(|in f\.id\b")
    found = [
        f"{path.relative_to(root)}:{n}"
        for path in root.rglob("*.py")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if parsing.search(line)
    ]
    assert found == []


def test_the_fleet_commands_import_on_their_own() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import fp4doctor.fleet.commands"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
