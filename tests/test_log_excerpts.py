"""verify-log on real log excerpts from public threads (tests/fixtures/logs/index.yaml, each
with its source): every error is flagged (exit 1, quoting a line of the excerpt), the known ones
diagnosed to the cause the index names; kernel lines are read; nothing else is no verdict.
And every signature (profiles/signatures.yaml) matches the text it cites."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fp4doctor.logs import signatures
from fp4doctor.logs.reading import read_text
from fp4doctor.logs.verdict import EXIT_NO_VERDICT, EXIT_NOT_AGREED, judge
from fp4doctor.profile import known_issues
from fp4doctor.profile.yamlnode import ProfileError

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "logs"
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
INDEX: list[dict[str, Any]] = yaml.safe_load((LOGS / "index.yaml").read_text())["excerpts"]
NOT_A_CAUSE = ("flagged", "kernels", "none")


def test_the_index_is_complete_and_cited() -> None:
    files = {p.name for p in LOGS.glob("*.log")}
    assert files == {e["file"] for e in INDEX}
    assert len(INDEX) >= 40
    for e in INDEX:
        assert e["source"].startswith("https://github.com/"), e
        assert e["date"][:4] in ("2025", "2026"), e
        assert e["engine"] in ("vllm", "sglang", "flashinfer", "trtllm"), e
    ids = {s.id for s in signatures.shipped()}
    assert {e["expect"] for e in INDEX} - set(NOT_A_CAUSE) <= ids


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"].removesuffix(".log") for e in INDEX])
def test_each_excerpt(entry: dict[str, Any]) -> None:
    text = (LOGS / entry["file"]).read_text()
    reading = read_text(text)
    verdict = judge(reading, None)
    expect = entry["expect"]
    if expect == "none":
        assert verdict.exit_code == EXIT_NO_VERDICT
        return
    if expect == "kernels":
        assert reading.ran and not reading.failures
        return
    assert verdict.exit_code == EXIT_NOT_AGREED
    lines = [line.strip() for line in text.splitlines()]
    quoted = [f.details["text"] for f in verdict.findings]
    assert any(q.rstrip("…") and any(q.rstrip("…") in line for line in lines) for q in quoted)
    if expect != "flagged":
        diagnosed = [f.details["diagnosed"] for f in verdict.findings]
        assert expect in diagnosed, [f.reason for f in verdict.findings]


def test_how_many_are_diagnosed() -> None:
    # The closing note of issue 41: diagnosed to the right cause vs only flagged.
    causes = [e for e in INDEX if e["expect"] not in NOT_A_CAUSE]
    flagged = [e for e in INDEX if e["expect"] == "flagged"]
    assert (len(causes), len(flagged)) == (32, 17)


def test_signatures_name_existing_advisories_and_cite_a_source() -> None:
    shipped = signatures.shipped()
    signatures.validate(shipped, {i.id for i in known_issues()}, "signatures.yaml")
    for s in shipped:
        assert s.source and s.matchers
        assert s.advisory is not None or (s.diagnosis and s.fix)


@pytest.mark.parametrize("regex", ["a.*b", "a+", "(?:ab){2,}", "\\\\w+"])
def test_a_pattern_that_repeats_without_bound_is_refused(regex: str) -> None:
    bad = (
        "schema: 1\nsignatures:\n  - id: x\n"
        f"    match: [{{guard: a, regex: {json.dumps(regex)}}}]\n    diagnosis: d\n    source: s\n"
    )
    with pytest.raises(ProfileError, match="repeats without bound"):
        signatures.parse(bad, "bad.yaml")


def _facts(tmp_path: Path, base: str, **versions: str) -> Path:
    data = json.loads((HOSTS / f"{base}.json").read_text())
    data["packages"]["versions"].update(versions)
    out = tmp_path / f"{base}.json"
    out.write_text(json.dumps(data))
    return out


def _verify(log: Path, facts: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FP4DOCTOR_CACHE_DIR": ""}
    return subprocess.run(
        [sys.executable, "-m", "fp4doctor", "verify-log", str(log), "--facts", str(facts),
         "--no-engine"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def test_an_advisory_is_the_cause_where_its_versions_and_gpu_hold(tmp_path: Path) -> None:
    log = LOGS / "flashinfer-2065-illegal-instruction-spark.log"
    # DGX Spark (SM121) with FlashInfer 0.6.4: the PDL bug of FlashInfer < 0.6.8.
    done = _verify(log, _facts(tmp_path, "gb10", **{"flashinfer-python": "0.6.4"}))
    assert done.returncode == 1
    assert "log.error.flashinfer-cutlass-moe-pdl-sm12x-illegal-instruction" in done.stdout
    assert "here flashinfer-python 0.6.4" in done.stdout
    assert "fix: pip install -U 'flashinfer-python>=0.6.8'" in done.stdout


def test_the_same_text_on_another_version_says_so(tmp_path: Path) -> None:
    log = LOGS / "flashinfer-2065-illegal-instruction-spark.log"
    # An H200 with FlashInfer 0.7.4: neither the GPU nor the version of the known bugs.
    done = _verify(log, HOSTS / "h200.json")
    assert done.returncode == 1
    assert "log.error.illegal_instruction" in done.stdout
    assert (
        "the text of the known error flashinfer-cutlass-moe-pdl-sm12x-illegal-instruction of "
        "another version or GPU" in done.stdout
    )


def test_the_log_s_own_vllm_version_is_judged(tmp_path: Path) -> None:
    log = tmp_path / "v.log"
    log.write_text(
        "INFO 01-05 10:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    )
    # An RTX 5090 (SM120): vLLM < 0.12 built its NVFP4 MoE grouped GEMM for SM100 only.
    done = _verify(log, HOSTS / "rtx5090.json")
    assert done.returncode == 1
    assert "log.error.vllm-0.11-sm12x-cutlass-moe-no-kernel-image" in done.stdout
    assert "the log's vLLM 0.11.0" in done.stdout


def test_the_cudnn_frontend_loader_bug_is_the_cause_on_its_release(tmp_path: Path) -> None:
    log = LOGS / "cudnn-frontend-207-libcudart.log"
    done = _verify(log, _facts(tmp_path, "b200", **{"nvidia-cudnn-frontend": "1.19.0"}))
    assert done.returncode == 1
    assert "log.error.cudnn-frontend-1.19.0-libcudart-loader-cuda12" in done.stdout
