"""What the engine picks, left alone (fp4doctor/selection/engine.py): `check` and `explain` give
one answer for every checkpoint fixture on every host fixture, and vLLM's weight-only (W4A16)
branch follows the released wheels (profiles/shapes.yaml `weight_only`): Marlin forced up to
0.29, CuTe-DSL W4A16 on SM100/103 from 0.30, Humming first on SM90 from 0.32 when
humming-kernels is installed.
Offline: fixture facts and header-only checkpoints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from fp4doctor import render
from fp4doctor.cli import main
from fp4doctor.doctor import FamilyPart, Question, Report, diagnose
from fp4doctor.findings import Kind
from fp4doctor.selection import explain
from fp4doctor.selection.engine import engine_auto, family_pick

ROOT = Path(__file__).resolve().parent.parent
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
CKPTS = ROOT / "tests" / "fixtures" / "checkpoints"
ALL_HOSTS = tuple(sorted(p.stem for p in HOSTS.glob("*.json")))
ALL_CKPTS = sorted(p.name for p in CKPTS.iterdir() if (p / "config.json").is_file())
# One host per compute capability (and the mixed one), for the release boundaries.
BY_CC = ("a100", "l40s", "h200", "b200", "b200-vllm-0.33", "b300", "thor", "rtx5090", "gb10",
         "mixed")  # fmt: skip
# Each side of the releases where the weight-only branch or the weight-only experts change
# (0.21 experts read, 0.23 FlashInfer B12x experts, 0.25 Humming experts, 0.30 CuTe-DSL W4A16,
# 0.32 Humming first on SM90).
BOUNDARIES = ("0.21.0", "0.23.0", "0.25.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0")
WEIGHT_ONLY_OR_UNGATED = ("llama-3.1-8b-instruct-nvfp4a16", "qwen3-30b-a3b-nvfp4a16",
                          "nemotron-3-nano-30b-a3b-nvfp4")  # fmt: skip
A16 = str(CKPTS / "llama-3.1-8b-instruct-nvfp4a16")
MOE_A16 = str(CKPTS / "qwen3-30b-a3b-nvfp4a16")
NEMOTRON = str(CKPTS / "nemotron-3-nano-30b-a3b-nvfp4")
# What check's findings say the engine, left alone, picks.
_NAMED = re.compile(r"left alone, (?:passes over .*? and )?picks ([a-z0-9-]+)")


def _report(host: str | Path, version: str, ckpt: str, tp: int = 8) -> Report:
    facts_file = host if isinstance(host, Path) else HOSTS / f"{host}.json"
    return diagnose(
        Question(target="vllm", facts_file=str(facts_file), engine_version=version,
                 model=str(CKPTS / ckpt) if "/" not in ckpt else ckpt, tp=tp)
    )  # fmt: skip


def _disagreements(report: Report) -> list[str]:
    """Where check's document (what `check --json` writes) and explain's (what `explain --json`
    writes) name different engine picks for the same report."""
    doc = render.document(report)
    layers = explain.document(report, explain.explain(report))["layers"]
    out = []
    for family, part in doc["families"].items():
        mine = [x for x in layers if x["family"] == family and "problem" not in x]
        if not mine:
            continue
        weight_only = all(x["scheme"] == "W4A16" for x in mine)
        same = [x for x in mine if (x["scheme"] == "W4A16") == weight_only]
        for x in same:
            if x["engine_pick"] != part["engine_auto"]:
                out.append(
                    f"{family}: check says {part['engine_auto']}, explain says "
                    f"{x['engine_pick']} for {x['layer']}"
                )
    picks = {x["engine_pick"] for x in layers}
    reasons = [f["reason"] for f in doc["findings"]]
    reasons += [f["reason"] for f in doc.get("model", {}).get("findings", [])]
    for reason in reasons:
        for named in _NAMED.findall(reason):
            if named not in picks:
                out.append(f"check says the engine picks {named}; explain names {sorted(picks)}")
    return out


def _disagreeing_hosts(hosts: tuple[str, ...], version: str, ckpt: str) -> dict[str, list[str]]:
    found = {host: _disagreements(_report(host, version, ckpt)) for host in hosts}
    return {host: problems for host, problems in found.items() if problems}


@pytest.mark.parametrize("version", ["0.15.1", "0.33.0"])
@pytest.mark.parametrize("ckpt", ALL_CKPTS)
def test_check_and_explain_name_one_engine_pick(ckpt: str, version: str) -> None:
    assert not (found := _disagreeing_hosts(ALL_HOSTS, version, ckpt)), found


@pytest.mark.parametrize("version", BOUNDARIES)
@pytest.mark.parametrize("ckpt", WEIGHT_ONLY_OR_UNGATED)
def test_check_and_explain_agree_across_the_release_boundaries(ckpt: str, version: str) -> None:
    assert not (found := _disagreeing_hosts(BY_CC, version, ckpt)), found


def _linear(report: Report) -> FamilyPart:
    return next(p for p in report.families if p.family == "linear")


def _linear_pick(report: Report) -> str | None:
    return engine_auto(_linear(report).evaluation)


@pytest.mark.parametrize(
    ("host", "version", "expected"),
    [
        # FlashInfer 0.7.2: CuTe-DSL W4A16 is supported on the B200, but vLLM forces Marlin
        # up to 0.29 and the CuTe-DSL kernel on SM100/103 from 0.30.
        ("b200-vllm-0.33", "0.29.0", "marlin"),
        ("b200-vllm-0.33", "0.30.0", "flashinfer-cutedsl-w4a16"),
        ("b200-vllm-0.33", "0.33.0", "flashinfer-cutedsl-w4a16"),
        ("b300", "0.33.0", "flashinfer-cutedsl-w4a16"),
        # FlashInfer 0.6.1 lacks mm_bf16_fp4: vLLM 0.33 forces Marlin instead.
        ("b200", "0.33.0", "marlin"),
        # SM12x: CuTe-DSL W4A16 would run (FlashInfer 0.6.18), yet vLLM forces Marlin there.
        ("gb10", "0.30.0", "marlin"),
        ("gb10", "0.33.0", "marlin"),
        ("rtx5090", "0.33.0", "marlin"),
        # SM90 without humming-kernels: Marlin.
        ("h200", "0.32.0", "marlin"),
    ],
)
def test_vllm_weight_only_branch_by_release(host: str, version: str, expected: str) -> None:
    report = _report(host, version, A16, tp=1)
    assert _linear_pick(report) == expected
    resolution = _linear(report).resolution
    assert resolution.chosen == expected  # left to the engine: nothing to pin
    assert resolution.knob is None
    assert not [f for f in resolution.findings if "left alone" in f.reason]


def test_weight_only_skips_say_why(tmp_path: Path) -> None:
    """On a B200 with FlashInfer 0.6.1, vLLM 0.33 would take CuTe-DSL W4A16 but cannot: it is
    listed as skipped, with the FlashInfer version that rules it out, and Marlin is forced."""
    report = _report("b200", "0.33.0", A16, tp=1)
    qkv = next(e for e in explain.explain(report) if e.gemm.layer.name == "qkv")
    assert [(s.backend, s.status.value) for s in qkv.steps] == [
        ("flashinfer-cutedsl-w4a16", "skipped"),
        ("marlin", "picked"),
    ]
    assert "flashinfer-python 0.6.1" in qkv.steps[0].reason
    assert "forces it for weight-only layers" in qkv.steps[1].reason


def _with_humming(tmp_path: Path) -> Path:
    """h200.json with humming-kernels installed (as `pip install vllm` >= 0.22 leaves it)."""
    data = json.loads((HOSTS / "h200.json").read_text())
    data["packages"]["versions"]["humming-kernels"] = "0.1.19"
    path = tmp_path / "h200-humming.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("version", "expected"), [("0.31.0", "marlin"), ("0.32.0", "humming")])
def test_humming_comes_first_on_sm90_from_0_32(tmp_path: Path, version: str, expected: str) -> None:
    report = _report(_with_humming(tmp_path), version, A16, tp=1)
    assert _linear_pick(report) == expected
    assert not _disagreements(report)


def test_check_no_longer_warns_of_a_w4a4_pick_for_a_weight_only_checkpoint() -> None:
    """The issue's case: on a B200 with vLLM 0.33.0, `check` said the engine 'left alone, picks
    flashinfer-cutedsl, which cannot run here' for a W4A16 checkpoint; vLLM takes its
    weight-only branch instead."""
    result = CliRunner().invoke(
        main,
        ["check", "--facts", str(HOSTS / "b200.json"), "--engine-version", "0.33.0",
         "--model", A16],
    )  # fmt: skip
    assert "left alone, picks flashinfer-cutedsl" not in result.output
    code, out = _explain_json(HOSTS / "b200.json", "0.33.0", A16)
    assert code == 0
    assert {x["engine_pick"] for x in out["layers"]} == {"marlin"}


def _explain_json(host: Path, version: str, ckpt: str) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(
        main, ["explain", "--json", "--facts", str(host), "--engine-version", version,
               "--model", ckpt],
    )  # fmt: skip
    return result.exit_code, json.loads(result.output)


@pytest.mark.parametrize(
    ("version", "expected"), [("0.22.0", "marlin-moe"), ("0.33.0", "marlin-moe")]
)
def test_weight_only_experts_pass_over_the_w4a4_moe_backends(version: str, expected: str) -> None:
    """W4A16 experts: vLLM's MoE oracle passes over every experts class that refuses an
    activation key of None (FlashInfer TRT-LLM, CuTe-DSL, CUTLASS, vLLM CUTLASS) and lands on
    Marlin; the same checkpoint in W4A4 stays on FlashInfer TRT-LLM."""
    report = _report("b200-vllm-0.33", version, MOE_A16)
    moe = next(p for p in report.families if p.family == "moe")
    assert engine_auto(moe.evaluation) == expected
    pick = family_pick(moe.evaluation)
    skipped = {c.backend: c.reason for c in pick.passed_over}
    assert "weight-only (W4A16)" in skipped["flashinfer-trtllm-moe"]
    assert not moe.evaluation.valid("flashinfer-trtllm-moe")
    w4a4 = _report("b200-vllm-0.33", version, "qwen3-30b-a3b-fp4", tp=1)
    assert engine_auto(next(p for p in w4a4.families if p.family == "moe").evaluation) == (
        "flashinfer-trtllm-moe"
    )


def test_nemotron_is_judged_on_its_ungated_shapes() -> None:
    """relu2 experts store an up projection only: at TP 8 each rank holds N = 1856 / 8 = 232
    (not halved as for a gate), and vLLM 0.17-0.25 pads a non-gated MoE to 128 (only a gated
    one to 16), so FlashInfer TRT-LLM runs it: no false 'cannot run this model'."""
    report = _report("b200-vllm-0.33", "0.20.0", NEMOTRON)
    assert report.model is not None
    gate_up = next(g for g in report.model.gemms if g.layer.name == "experts.gate_up")
    assert (gate_up.n, gate_up.intermediate) == (232, 232)
    assert not gate_up.layer.gated
    assert not [f for f in report.model.findings if f.kind is Kind.ENGINE_PICK]
    moe = next(p for p in report.families if p.family == "moe")
    assert engine_auto(moe.evaluation) == "flashinfer-trtllm-moe"
    assert moe.evaluation.valid("flashinfer-trtllm-moe")


@pytest.mark.parametrize(
    ("host", "version", "expected"),
    [
        # compressed-tensors W4A16 from SGLang 0.5.22: --fp4-gemm-backend auto is
        # flashinfer_cutedsl on SM10x, which runs the layers on FlashInfer's mm_bf16_fp4.
        ("b200-vllm-0.33", "0.5.23", "flashinfer-cutedsl-w4a16"),
        ("b300", "0.5.22", "flashinfer-cutedsl-w4a16"),
        # SM12x: auto is flashinfer_cutlass, which has no bf16 x fp4 GEMM: Marlin.
        ("rtx5090", "0.5.23", "marlin"),
        ("h200", "0.5.23", "marlin"),
    ],
)
def test_sglang_weight_only_branch_follows_the_fp4_gemm_backend(
    host: str, version: str, expected: str
) -> None:
    report = diagnose(
        Question(target="sglang", facts_file=str(HOSTS / f"{host}.json"), engine_version=version,
                 model=A16, tp=1, engine=False)
    )  # fmt: skip
    assert _linear_pick(report) == expected


def test_sglang_reads_compressed_tensors_w4a16_from_0_5_22() -> None:
    """Before 0.5.22 SGLang has no compressed-tensors W4A16 NVFP4 scheme
    (schemes/compressed_tensors_w4a16_nvfp4.py is first in the 0.5.22 wheel)."""
    report = diagnose(
        Question(target="sglang", facts_file=str(HOSTS / "b200-vllm-0.33.json"),
                 engine_version="0.5.21", model=A16, tp=1, engine=False)
    )  # fmt: skip
    assert report.model is not None
    reasons = " ".join(f.reason for f in report.model.findings)
    assert "does not read" in reasons and "0.5.21" in reasons
