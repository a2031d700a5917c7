"""`fp4doctor explain`: per layer class, the kernel the engine release picks and why each
earlier candidate was skipped, for vLLM and SGLang, in text and JSON (fixture facts only)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from fp4doctor.cli import main

ROOT = Path(__file__).resolve().parent.parent
CKPTS = ROOT / "tests" / "fixtures" / "checkpoints"
B200 = str(ROOT / "tests" / "fixtures" / "hosts" / "b200.json")
H200 = str(ROOT / "tests" / "fixtures" / "hosts" / "h200.json")


def _explain(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["explain", *args])
    return result.exit_code, result.output


def test_vllm_explains_the_layer_its_pick_fails_on() -> None:
    code, out = _explain(
        "--facts", B200, "--target", "vllm", "--tp", "8",
        "--model", str(CKPTS / "qwen2.5-72b-instruct-nvfp4"),
    )  # fmt: skip
    assert code == 0, out
    down = out[out.index("\ndown ") :]
    assert "N=8192 K=3696 per rank" in down
    assert "flashinfer-cutlass  FAILS" in down and "K 3696 is not a multiple of 32" in down
    assert "fp4doctor env: marlin (VLLM_NVFP4_GEMM_BACKEND=marlin)" in down
    qkv = out[out.index("\nqkv ") : out.index("\no ")]
    assert "flashinfer-cutlass  picked" in qkv


def test_vllm_skips_the_candidates_whose_conditions_fail() -> None:
    """On an H200 (CC 9.0) vLLM 0.20's automatic order skips FlashInfer CUTLASS and CUTLASS
    and lands on Marlin; each skip says why."""
    code, out = _explain(
        "--facts", H200, "--target", "vllm", "--engine-version", "0.20.0", "--tp", "2",
        "--model", str(CKPTS / "llama-3.1-8b-instruct-fp4"),
    )  # fmt: skip
    assert code == 0, out
    qkv = out[out.index("\nqkv ") : out.index("\no ")]
    lines = [
        line.split()[1:3] for line in qkv.splitlines() if line.strip()[:2] in ("1.", "2.", "3.")
    ]
    assert lines == [
        ["flashinfer-cutlass", "skipped"],
        ["cutlass", "skipped"],
        ["marlin", "picked"],
    ]
    assert "compute capability" in qkv


def test_sglang_explains_linear_and_moe() -> None:
    """SGLang 0.5.20 leaves the per-rank MoE intermediate size unpadded: at TP 8 (96) its
    FlashInfer TRT-LLM MoE pick fails on the experts, and env switches the MoE family away."""
    code, out = _explain(
        "--facts", B200, "--target", "sglang", "--engine-version", "0.5.20", "--tp", "8",
        "--model", str(CKPTS / "qwen3-30b-a3b-fp4"),
    )  # fmt: skip
    assert code == 0, out
    assert out.startswith("SGLang 0.5.20 · ")
    assert "qkv  linear W4A4  N=768 K=2048 per rank" in out
    moe = out[out.index("\nexperts.gate_up ") :]
    assert re.search(r"flashinfer-trtllm-moe +FAILS", moe), moe
    assert "the MoE intermediate size 96 is not a multiple of 64" in moe
    env_line = next(line for line in moe.splitlines() if "fp4doctor env:" in line)
    assert "flashinfer-trtllm-moe" not in env_line


def test_json() -> None:
    code, out = _explain(
        "--json", "--facts", B200, "--target", "vllm", "--engine-version", "0.20.0", "--tp", "8",
        "--model", str(CKPTS / "qwen3-30b-a3b-fp4"),
    )  # fmt: skip
    assert code == 0, out
    doc = json.loads(out)
    assert doc["engine"] == "vLLM 0.20.0" and doc["tp"] == 8
    layers = {entry["layer"]: entry for entry in doc["layers"]}
    moe = layers["experts.gate_up"]
    assert moe["per_rank"] == [192, 2048] and moe["intermediate_per_rank"] == 96
    assert moe["engine_pick"] == "flashinfer-trtllm-moe"
    assert moe["candidates"][-1]["status"] == "picked, fails"
    assert moe["choice"] not in (None, "flashinfer-trtllm-moe")


def test_explain_needs_a_model() -> None:
    code, out = _explain("--facts", B200)
    assert code == 2 and "explain needs --model" in out


def test_a_backend_the_engine_passes_over_for_this_model_says_why() -> None:
    """MiniMax-M3's clamped SWIGLUOAI experts on a DGX Spark (field case fi-3732): vLLM passes
    over the CUTLASS MoE backends because of the activation, and the skip says so (it once
    said only that "its condition in the automatic order does not hold")."""
    host = str(ROOT / "tests" / "field" / "hosts" / "fi-3732-spark-minimax-swigluoai.json")
    code, out = _explain(
        "--facts", host, "--target", "vllm", "--tp", "4",
        "--model", str(CKPTS / "minimax-m3-nvfp4"),
    )  # fmt: skip
    assert code == 0, out
    skipped = [line for line in out.splitlines() if "cutlass-moe" in line and "skipped" in line]
    assert skipped, out
    for line in skipped:
        assert "SWIGLUOAI_UNINTERLEAVE" in line and "does not hold" not in line, line
