"""SGLang, era by era: knob names, accepted values and the automatic order.

Table-driven over fixture hosts × SGLang versions; the expected values follow
engines-nvfp4-backend-selection.md §3 (read from the released SGLang wheels).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fp4doctor import facts, profile
from fp4doctor.findings import Status
from fp4doctor.rules import Evaluation, evaluate
from fp4doctor.selection.choice import resolve

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
SGLANG = profile.load("sglang")


def judge(name: str, version: str | None = None, **env: str) -> Evaluation:
    host = dataclasses.replace(facts.load(HOSTS / f"{name}.json"), env=dict(env))
    return evaluate(SGLANG, host, override_version=version)


@pytest.mark.parametrize(
    ("version", "knob"),
    [
        ("0.5.5", ("SGLANG_FLASHINFER_FP4_GEMM_BACKEND", "cudnn")),  # a free string passed on
        ("0.5.7", ("SGLANG_FLASHINFER_FP4_GEMM_BACKEND", "cudnn")),
        ("0.5.8", ("--fp4-gemm-backend", "flashinfer_cudnn")),  # the env var is deprecated
        ("0.5.9", ("--fp4-gemm-backend", "flashinfer_cudnn")),
        ("0.5.11", ("--fp4-gemm-backend", "flashinfer_cudnn")),
        ("0.5.23", ("--fp4-gemm-backend", "flashinfer_cudnn")),
    ],
)
def test_prefer_cudnn_on_b200(version: str, knob: tuple[str, str]) -> None:
    r = resolve(judge("b200", version), prefer="cudnn")
    assert r.chosen == "flashinfer-cudnn"
    assert r.set_env + r.cli_args == (knob,)


def test_before_0_5_5_cudnn_follows_flashinfers_own_default() -> None:
    # SGLang 0.5.2 has no knob; with FlashInfer 0.6.1 on CUDA 12.8, FlashInfer's auto picks
    # cutlass, so cuDNN cannot be reached and the fallback says so.
    r = resolve(judge("b200", "0.5.2"), prefer="cudnn")
    assert r.chosen == "flashinfer-cutlass"
    assert any("flashinfer-cudnn is not usable here" in n for n in r.notes)


@pytest.mark.parametrize(
    ("fixture", "version", "engine_auto", "chosen"),
    [
        ("b200", "0.5.4", "flashinfer-cutlass", "flashinfer-cutlass"),  # the default flips to true
        ("b200", "0.5.9", "flashinfer-cutlass", "flashinfer-cutlass"),  # default flashinfer_cutlass
        ("gb200", None, "flashinfer-cutedsl", "flashinfer-cutedsl"),  # SM10x -> cutedsl (0.5.12+)
        # SM12x -> cudnn (PR #20047); its cached-plan-index crash with autotuning on (FlashInfer
        # < 0.6.16) is not ruled out here, so cutlass is advised
        ("rtx5090", "0.5.10", "flashinfer-cudnn", "flashinfer-cutlass"),
        ("rtx5090", "0.5.13", "flashinfer-cutlass", "flashinfer-cutlass"),  # SM120 back to cutlass
        ("h100", "0.5.13", "marlin", "marlin"),  # 8.0 <= cc < 10.0 -> marlin
        ("h100", "0.5.23", "marlin", "marlin"),
        ("h100", "0.5.12", "flashinfer-cutlass", None),  # no Marlin before 0.5.13: not ready
    ],
)
def test_automatic_order(
    fixture: str, version: str | None, engine_auto: str, chosen: str | None
) -> None:
    ev = judge(fixture, version)
    assert engine_auto(ev) == engine_auto
    assert resolve(ev).chosen == chosen


def test_env_var_removed_in_0_5_10_is_reported_as_ignored() -> None:
    ev = judge("b200", "0.5.10", SGLANG_FLASHINFER_FP4_GEMM_BACKEND="cudnn")
    f = next(f for f in ev.env_findings if f.id == "env.SGLANG_FLASHINFER_FP4_GEMM_BACKEND")
    assert f.status is Status.WARN and "SGLang 0.5.10 ignores" in f.reason
    assert (
        f.fix == "unset SGLANG_FLASHINFER_FP4_GEMM_BACKEND; use --fp4-gemm-backend flashinfer_cudnn"
    )


def test_env_var_is_deprecated_in_0_5_8() -> None:
    ev = judge("b200", "0.5.8", SGLANG_FLASHINFER_FP4_GEMM_BACKEND="cudnn")
    ids = {f.id: f.status for f in ev.env_findings}
    assert ids["env.SGLANG_FLASHINFER_FP4_GEMM_BACKEND.deprecated"] is Status.WARN


def test_trtllm_on_rtx5090_selected_by_env_fails() -> None:
    ev = judge("rtx5090", "0.5.5", SGLANG_FLASHINFER_FP4_GEMM_BACKEND="trtllm")
    f = next(f for f in ev.env_findings if f.id.endswith(".backend"))
    assert f.status is Status.FAIL and "compute capability 12.0" in f.reason


def test_sglang_cutlass_moe_builds_its_kernels_from_0_5_10() -> None:
    # sglang/srt/layers/moe/cutlass_moe.py imports cutlass_fp4_group_mm from sglang.jit_kernel
    # from 0.5.10 (sgl_kernel's before): without nvcc and ninja it cannot be built.
    host = facts.load(HOSTS / "b200-no-nvcc-no-cubin.json")
    for version, needs in (("0.5.9", False), ("0.5.10", True), ("0.5.15.post1", True)):
        ev = evaluate(SGLANG, host, override_version=version, family="moe")
        ids = {p.id for p in ev.verdicts["sgl-cutlass-moe"].problems()}
        assert any("jit_toolchain" in i for i in ids) is needs, (version, ids)
