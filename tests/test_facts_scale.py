"""Facts judged in time linear in their size, and a cap on the GPUs of one snapshot.

The cost is counted in operations (how often a finding's status is asked whether it blocks),
not in seconds: a count holds on a busy machine. Once, `with_alternatives` rescanned every
finding per finding: 4,000 GPUs took 27 s of CPU and one crafted snapshot stalled a fleet run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fp4doctor import facts, profile
from fp4doctor.cli import main
from fp4doctor.findings import Status
from fp4doctor.rules import evaluate

HOSTS = Path(__file__).parent / "fixtures" / "hosts"


def many(name: str, count: int) -> facts.HostFacts:
    """A fixture host with `count` copies of its first GPU (SYNTHETIC: no host has them)."""
    base = facts.load(HOSTS / f"{name}.json")
    gpus = [dataclasses.replace(base.gpus[0], index=i, uuid=f"GPU-{i}") for i in range(count)]
    return dataclasses.replace(base, gpus=gpus)


def blocking_asked(host: facts.HostFacts, monkeypatch: pytest.MonkeyPatch) -> int:
    """How often judging both families of vLLM on `host` asks whether a status blocks."""
    asked = [0]
    plain = Status.__dict__["blocking"]

    def counted(self: Status) -> bool:
        asked[0] += 1
        return bool(plain.fget(self))

    with monkeypatch.context() as patched:
        patched.setattr(Status, "blocking", property(counted))
        for family in ("linear", "moe"):
            evaluate(profile.load("vllm"), host, family=family)
    return asked[0]


@pytest.mark.parametrize("host", ["rtx5090-cold", "b200-vllm-0.33"])
def test_judging_is_linear_in_the_gpus(host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    small = blocking_asked(many(host, 100), monkeypatch)
    large = blocking_asked(many(host, 400), monkeypatch)
    assert large <= 4.4 * small  # four times the GPUs, four times the work (16 once)


def test_a_snapshot_of_more_gpus_than_the_cap_is_refused_in_one_line(tmp_path: Path) -> None:
    data = json.loads(facts.dumps(many("b200-vllm-0.33", 1)))
    data["gpus"] = [dict(data["gpus"][0], index=i) for i in range(4000)]
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(main, ["check", "--facts", str(path), "--no-engine"])
    assert result.exit_code == 3
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert "4000 GPUs" in line and f"at most {facts.MAX_GPUS}" in line
    at_cap = dict(data, gpus=data["gpus"][: facts.MAX_GPUS])
    assert len(facts.from_dict(at_cap).gpus) == facts.MAX_GPUS
