"""Verdicts reached on a real H200 host, checked on every CI run on a CPU host.

The fixtures were captured on the project's H200 device machine with benchmarks/gpu_round.sh:
`tests/fixtures/hosts/h200.json` is its `fp4doctor probe --json` (redacted), and
`tests/fixtures/reports/h200/*.json` are the `fp4doctor check --json` reports it printed there
(static, with the live smoke GEMM, and with `--force`). Re-judging the real facts here must
reach the same static verdicts; the live results recorded there must say what the rules say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fp4doctor import facts, profile
from fp4doctor.rules import evaluate
from fp4doctor.selection.choice import resolve
from fp4doctor.selection.engine import engine_auto

HERE = Path(__file__).parent / "fixtures"
H200 = facts.load(HERE / "hosts" / "h200.json")
TARGETS = ("vllm", "sglang", "flashinfer", "trtllm")


def report(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((HERE / "reports" / "h200" / f"{name}.json").read_text())
    return doc


def test_the_snapshot_is_a_real_redacted_h200() -> None:
    assert H200.synthetic is None
    assert [(g.name, g.cc_text) for g in H200.gpus] == [("NVIDIA H200", "9.0")]
    assert H200.hostname is None and all(g.uuid is None for g in H200.gpus)
    assert H200.packages.torch_cuda == "13.0"
    assert H200.cudnn.frontend.version_text == "9.19.0"


@pytest.mark.parametrize("target", TARGETS)
def test_static_verdicts_match_the_gpu_host(target: str) -> None:
    gpu = report(f"check-{target}-static")
    evaluation = evaluate(profile.load(target), H200)
    resolution = resolve(evaluation)
    # The dense linear family: the whole report of a one-family capture, `families.linear` of
    # a report that judges both families (the schema since the families became equal).
    linear = gpu["families"]["linear"] if "families" in gpu else gpu
    chosen = linear["chosen"] if "families" in gpu else gpu["resolution"]["chosen"]
    here = {name: v.valid for name, v in evaluation.verdicts.items()}
    there = {name: b["valid"] for name, b in linear["backends"].items()}
    assert here == there
    assert resolution.chosen == chosen
    assert engine_auto(evaluation) == linear["engine_auto"]


@pytest.mark.parametrize("target", TARGETS)
def test_every_native_backend_is_refused_on_h200_for_its_compute_capability(target: str) -> None:
    prof = profile.load(target)
    for family in prof.families():  # the dense linear and the MoE backends alike
        evaluation = evaluate(prof, H200, family=family)
        for name, backend in evaluation.profile.backends.items():
            if not backend.native:
                continue
            problem = evaluation.verdicts[name].first_problem()
            assert problem is not None, f"{target}:{name} is valid on an H200"
            assert "compute capability 9.0" in problem.reason, (target, name, problem.reason)


def test_vllm_resolves_to_marlin_on_the_real_h200() -> None:
    for name in ("check-vllm-static", "check-vllm-smoke"):
        doc = report(name)
        assert doc["resolution"]["chosen"] == "marlin"
        assert doc["ready"] is True and doc["exit_code"] == 0


def test_live_results_agree_with_the_rules_on_h200() -> None:
    doc = report("check-vllm-force")
    findings = {f["id"]: f for f in doc["findings"]}
    agreements = [f for f in doc["findings"] if f["id"].startswith("agree.")]
    assert agreements, "the forced run recorded no agreement findings"
    assert all(f["status"] == "pass" for f in agreements), [
        f["reason"] for f in agreements if f["status"] != "pass"
    ]
    # cuDNN itself refuses the NVFP4 graph on Hopper, in its own words.
    graph = findings["smoke.flashinfer-cudnn.cudnn-graph.gpu0"]
    assert graph["status"] == "fail"
    assert "FORT_NATIVE_10X engine is only supported since Blackwell" in graph["reason"]
    # FlashInfer refuses every native backend at capability 90.
    for backend, name in [
        ("flashinfer-cudnn", "cudnn"),
        ("flashinfer-cutlass", "cutlass"),
        ("flashinfer-trtllm", "trtllm"),
    ]:
        live = findings[f"smoke.{backend}.gpu0"]
        assert f"does not support backend '{name}' with capability 90" in live["reason"]
    # The path that always runs ran on the GPU and matched the reference.
    emulation = findings["smoke.emulation.gpu0"]
    assert emulation["status"] == "pass"
    assert 0.9 <= emulation["details"]["norm_ratio"] <= 1.1


# --- two H200s (nvidia-h200-x2) ------------------------------------------------------------

H200X2 = facts.load(HERE / "hosts" / "h200x2.json")


def test_both_gpus_appear_and_judge_like_one() -> None:
    assert [(g.index, g.cc_text) for g in H200X2.gpus] == [(0, "9.0"), (1, "9.0")]
    assert H200X2.synthetic is None and all(g.uuid is None for g in H200X2.gpus)
    evaluation = evaluate(profile.load("vllm"), H200X2)
    assert not any(f.id == "host.gpus.mixed" for f in evaluation.host)
    assert resolve(evaluation).chosen == "marlin"
    cudnn = evaluation.verdicts["flashinfer-cudnn"]
    assert {f.gpu for f in cudnn.findings if ".compute_capability." in f.id} == {0, 1}


def test_the_smoke_ran_on_both_gpus() -> None:
    doc = json.loads((HERE / "reports" / "h200x2" / "check-vllm-smoke.json").read_text())
    status = {f["id"]: f["status"] for f in doc["findings"]}
    assert status["smoke.emulation.gpu0"] == "pass"
    assert status["smoke.emulation.gpu1"] == "pass"
    assert doc["ready"] is True


def test_cuda_visible_devices_restriction_was_honoured() -> None:
    doc = json.loads((HERE / "reports" / "h200x2" / "check-vllm-cvd1.json").read_text())
    assert doc["host"]["cuda_visible_devices"] == "1"
    # One GPU, CUDA index 0, which is NVML's GPU 1; the smoke ran there only.
    assert [(g["index"], g["nvml_index"]) for g in doc["host"]["gpus"]] == [(0, 1)]
    smoke = [f["id"] for f in doc["findings"] if f["id"].startswith("smoke.emulation")]
    assert smoke == ["smoke.emulation.gpu0"]
