"""Per layer class, what ran: vLLM's module tree (VLLM_LOG_MODEL_INSPECTION=1) joined with its
NVFP4 GEMM and MoE backend lines and the MoE backends it skipped, SGLang's server_args, and the
comparison with `explain --model`; `env --log-kernels`.

The two vLLM logs (tests/fixtures/logs/inspection/) were written by the released 0.33.0 and
0.34.0 wheels' own logger, formatter and module-tree printer over a FAKE Qwen3-MoE module tree
(standing for the GPU that building the real model needs); make.py there writes them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fp4doctor.logs import layers
from fp4doctor.logs.reading import read_text

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "logs" / "inspection"
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
QWEN3_MOE = ROOT / "tests" / "fixtures" / "checkpoints" / "qwen3-30b-a3b-fp4"


def _rows(name: str) -> list[layers.Row]:
    r = read_text((LOGS / name).read_text())
    assert r.failures == []  # the skipped backends (DEBUG) are no errors
    return layers.rows(r.tree, r.ran, r.refused, r.sglang)


def test_the_0_34_tree_gives_one_row_per_layer_class() -> None:
    rows = _rows("vllm-0.34.0-inspection.log")
    assert [(r.layer, r.family, r.scheme, r.modules, r.kernel, r.backend) for r in rows] == [
        ("qkv", "linear", "ModelOptLinearMethod", 4, "FlashInferCutlassNvFp4LinearKernel",
         "flashinfer-cutlass"),
        ("o", "linear", "ModelOptLinearMethod", 4, "FlashInferCutlassNvFp4LinearKernel",
         "flashinfer-cutlass"),
        ("experts", "moe", "ModelOptNvFp4FusedMoE", 4, "FLASHINFER_CUTLASS",
         "flashinfer-cutlass-moe"),
    ]  # fmt: skip
    assert [b for b, _ in rows[2].skipped] == ["FLASHINFER_TRTLLM", "FLASHINFER_CUTEDSL"]
    assert rows[0].note and "every ModelOpt format" in rows[0].note


def test_the_0_33_tree_and_its_quoted_moe_line() -> None:
    rows = _rows("vllm-0.33.0-inspection.log")
    assert [(r.layer, r.backend, r.skipped) for r in rows] == [
        ("qkv", "flashinfer-cutedsl", ()),
        ("o", "flashinfer-cutedsl", ()),
        ("experts", "flashinfer-trtllm-moe", ()),
    ]


def test_collapsed_groups_multiply_and_compressed_tensors_schemes_are_read() -> None:
    tree = layers.Tree(1)
    for line in [
        "LlamaForCausalLM()(",
        "  (model): LlamaModel()(",
        "    (layers): ModuleList()(",
        "      (0-27, 29-31): 31 x LlamaDecoderLayer()(",
        "        (mlp): LlamaMLP()(",
        "          (gate_up_proj): MergedColumnParallelLinear(quant=CompressedTensorsW4A4Fp4, "
        "in_features=4096, output_features=28672, bias=False, tp_size=1, gather_output=False)",
        "          (down_proj): RowParallelLinear(quant=CompressedTensorsW4A16Fp4, "
        "in_features=14336, output_features=4096, bias=False, tp_size=1, reduce_results=True)",
        "        )",
        "      )",
        "    )",
        "  )",
        "  (lm_head): ParallelLMHead(num_embeddings=128256, embedding_dim=4096)",
        ")",
    ]:
        tree.feed(line, 1)
    assert tree.done
    assert [(m.path, m.scheme, m.count) for m in tree.modules] == [
        ("model.layers.*.mlp.gate_up_proj", "CompressedTensorsW4A4Fp4", 31),
        ("model.layers.*.mlp.down_proj", "CompressedTensorsW4A16Fp4", 31),
    ]
    assert [layers.layer_class(m) for m in tree.modules] == [
        ("gate_up", "linear"), ("down", "linear")
    ]  # fmt: skip


def test_sglang_server_args_give_a_row_per_family() -> None:
    r = read_text(
        "[2026-12-03 10:00:00] server_args={'model_path': 'm', 'quantization': 'modelopt_fp4', "
        "'fp4_gemm_runner_backend': 'flashinfer_cutlass', 'moe_runner_backend': 'auto'}\n"
    )
    rows = layers.rows(r.tree, r.ran, r.refused, r.sglang)
    assert [(x.layer, x.scheme, x.kernel) for x in rows] == [
        ("all linear layers", "modelopt_fp4", "flashinfer_cutlass"),
        ("all moe layers", "modelopt_fp4", "auto"),
    ]


def _verify(log: Path, version: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FP4DOCTOR_CACHE_DIR": ""}
    return subprocess.run(
        [sys.executable, "-m", "fp4doctor", "verify-log", str(log), "--no-engine",
         "--facts", str(HOSTS / "b200.json"), "--engine-version", version,
         "--model", str(QWEN3_MOE)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def test_each_layer_class_agrees_with_explain() -> None:
    done = _verify(LOGS / "vllm-0.33.0-inspection.log", "0.33.0")
    for cls in ("qkv", "o", "experts"):
        assert f"✓ log.layer.{cls}: layer class {cls}" in done.stdout, done.stdout
    assert "what ran, per layer class:" in done.stdout
    assert "FLASHINFER_TRTLLM (flashinfer-trtllm-moe)" in done.stdout


def test_a_layer_class_that_differs_from_explain_exits_1_naming_it() -> None:
    done = _verify(LOGS / "vllm-0.34.0-inspection.log", "0.34.0")
    assert done.returncode == 1
    assert "✗ log.layer.qkv: layer class qkv" in done.stdout
    assert "`explain --model` predicts qkv: flashinfer-cutedsl" in done.stdout
    assert "✗ log.layer.experts" in done.stdout
    assert "FLASHINFER_TRTLLM: kernel does not support current device cuda" in done.stdout


def _env(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FP4DOCTOR_CACHE_DIR": ""}
    return subprocess.run(
        [sys.executable, "-m", "fp4doctor", "env", "--no-engine",
         "--facts", str(HOSTS / "b200.json"), *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def test_env_log_kernels_emits_what_each_engine_needs() -> None:
    vllm = _env("--target", "vllm", "--engine-version", "0.34.0", "--log-kernels")
    assert vllm.returncode == 0, vllm.stderr
    assert "export VLLM_LOGGING_LEVEL='DEBUG'" in vllm.stdout
    assert "export VLLM_LOG_MODEL_INSPECTION='1'" in vllm.stdout
    plain = _env("--target", "vllm", "--engine-version", "0.34.0")
    assert "VLLM_LOG_MODEL_INSPECTION" not in plain.stdout
    sglang = _env("--target", "sglang", "--log-kernels")
    assert "--log-level info" in sglang.stdout
