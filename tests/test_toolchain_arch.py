"""The run-time compilers against the GPU's architecture: the ptxas Triton would use (found
without importing Triton), the `toolchain_arch` kind, and a profile's `engine.requires`."""

from __future__ import annotations

import dataclasses
import importlib
import json
import stat
import sys
from pathlib import Path

import pytest

from fp4doctor import facts
from fp4doctor.doctor import Outcome, Question, diagnose
from fp4doctor.probe.triton import probe_triton_ptxas
from fp4doctor.profile.kinds import Context
from fp4doctor.profile.kinds.toolchain_arch import ToolchainArch

HOSTS = Path(__file__).parent / "fixtures" / "hosts"


def fake_ptxas(path: Path, release: str) -> None:
    """A stand-in for NVIDIA's ptxas (labelled fake: no CUDA toolkit here) that prints what the
    real one prints for `--version`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
        f"echo 'Cuda compilation tools, release {release}, V{release}.93'\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def fake_triton(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Triton package directory with bundled ptxas binaries, first on sys.path (a fake: the
    probe only looks at its files)."""
    package = tmp_path / "site" / "triton"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('the probe must not import triton')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    sys.modules.pop("triton", None)
    importlib.invalidate_caches()
    return package / "backends" / "nvidia" / "bin"


def test_the_bundled_ptxas_is_found_and_read_without_importing_triton(fake_triton: Path) -> None:
    fake_ptxas(fake_triton / "ptxas", "12.8")
    found = probe_triton_ptxas({})
    assert found is not None
    assert found.version == "12.8" and found.blackwell_version == "12.8"
    assert "triton" not in sys.modules


def test_the_blackwell_ptxas_and_the_overrides_are_honoured(
    fake_triton: Path, tmp_path: Path
) -> None:
    fake_ptxas(fake_triton / "ptxas", "12.8")
    fake_ptxas(fake_triton / "ptxas-blackwell", "12.9")
    assert probe_triton_ptxas({}).blackwell_version == "12.9"  # type: ignore[union-attr]
    system = tmp_path / "cuda" / "bin" / "ptxas"
    fake_ptxas(system, "13.0")
    found = probe_triton_ptxas(
        {"TRITON_PTXAS_PATH": str(system), "TRITON_PTXAS_BLACKWELL_PATH": str(system)}
    )
    assert found is not None and (found.version, found.blackwell_version) == ("13.0", "13.0")


def test_no_triton_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert probe_triton_ptxas({}) is None


def host_with_ptxas(name: str, release: str | None) -> facts.HostFacts:
    host = facts.load(HOSTS / f"{name}.json")
    tc = dataclasses.replace(
        host.toolchain,
        triton_ptxas_path="/triton/bin/ptxas" if release else None,
        triton_ptxas_version=release,
        triton_ptxas_blackwell_path="/triton/bin/ptxas" if release else None,
        triton_ptxas_blackwell_version=release,
    )
    return dataclasses.replace(host, toolchain=tc)


@pytest.mark.parametrize(
    ("fixture", "release", "ok"),
    [
        ("gb10", "12.8", False),  # sm_121 arrives in CUDA 12.9 (vllm issue #30163)
        ("gb10", "12.9", True),
        ("thor", "12.9", False),  # sm_110 is CUDA 13.0's name for Thor (vllm issue #34470)
        ("thor", "13.0", True),
        ("rtx5090", "12.8", True),
        ("b300", "12.8", False),  # sm_103 arrives in CUDA 12.9
        ("h200", "12.4", True),
        ("gb10", None, False),
    ],
)
def test_triton_ptxas_must_know_the_gpu(fixture: str, release: str | None, ok: bool) -> None:
    host = host_with_ptxas(fixture, release)
    ctx = Context(facts=host, versions=host.packages.versions, env={})
    result = ToolchainArch("triton_ptxas").check(ctx, host.gpus[0])
    assert result.ok is ok, result


def test_an_engine_requirement_that_fails_makes_the_host_not_ready(tmp_path: Path) -> None:
    snapshot = json.loads((HOSTS / "gb10.json").read_text())
    for key in ("triton_ptxas", "triton_ptxas_blackwell"):
        snapshot["toolchain"].update({f"{key}_path": "/t/ptxas", f"{key}_version": "12.8"})
    host_file = tmp_path / "gb10.json"
    host_file.write_text(json.dumps(snapshot))
    profile_file = tmp_path / "demo.yaml"
    profile_file.write_text(
        """\
schema: 1
target: demo
title: Demo
engine:
  package: demo-engine
  newest_known: "1.0"
  requires:
    - toolchain_arch: triton_ptxas
      source: test
backends:
  slow: {summary: the slow one, native: false}
eras:
  - versions: ">=1.0"
    source: test
    knobs: [{env: DEMO_BACKEND, values: {slow: slow}}]
    auto: [{backend: slow}]
"""
    )
    q = Question(target="demo", profiles=(str(profile_file),), facts_file=str(host_file))
    report = diagnose(q)
    failed = [f for f in report.host if f.id.startswith("engine.") and f.status.blocking]
    assert failed and "TRITON_PTXAS_PATH" in (failed[0].fix or "")
    assert report.outcome is Outcome.NOT_READY
