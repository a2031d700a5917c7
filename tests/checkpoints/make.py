"""Generate the header-only checkpoints under tests/fixtures/checkpoints/.

Each fixture is what fp4doctor reads of a public NVFP4 checkpoint: `config.json`, the
quantisation config (`hf_quant_config.json`, or `quantization_config` in config.json), the shard
index, and `.safetensors` files holding only their 8-byte header length and JSON header (real
tensor names, dtypes, shapes and data offsets; the data itself is absent, so no library but a
header reader can open them). Models are truncated to a few layers (and a few of their experts)
to keep the fixtures to kilobytes; the shapes, the config values fp4doctor reads, and the
experts count in config.json are the model's.

Provenance: the architecture values are those of the base models' published config.json (the
links below); the quantisation configs are rebuilt from the formats' documented layout (ModelOpt
export: NVIDIA/TensorRT-Model-Optimizer modelopt/torch/export/unified_export_hf.py;
compressed-tensors nvfp4-pack-quantized: vllm-project/llm-compressor examples
quantization_w4a4_fp4/ and quantization_w4a16_fp4/). They are reconstructions, not byte copies:
`exclude_modules` / `ignore` lists in particular are the fixture's, as noted per model.

    python tests/checkpoints/make.py            # rewrite every fixture
    python tests/checkpoints/make.py --check    # exit 1 if a committed fixture differs
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "checkpoints"
DTYPE_BYTES = {"U8": 1, "F8_E4M3": 1, "F32": 4, "BF16": 2}

MODELOPT = "modelopt"
MODELOPT_A16 = "modelopt-w4a16"
CT = "ct"
CT_A16 = "ct-a16"
BF16 = "bf16"


@dataclass(frozen=True)
class Model:
    name: str  # fixture directory
    repo: str  # the public checkpoint it reproduces
    source: str  # where its architecture values come from
    note: str
    config: dict[str, Any]
    quant: str  # MODELOPT | MODELOPT_A16 | CT | CT_A16
    layers: tuple[int, ...]  # which decoder layers are stored
    shards: int = 2
    excluded: tuple[str, ...] = ("lm_head",)
    stored_experts: int = 0  # MoE: how many experts per layer are stored
    attention_bf16: bool = False
    legacy_hf_quant: bool = True  # ModelOpt: hf_quant_config.json (else quantization_config)
    extra: dict[str, Any] = field(default_factory=dict)
    layout: str = "llama"  # tensor naming: "llama" (model.layers.N...) | "nemotron_h"


def _llama(
    hidden: int, inter: int, heads: int, kv: int, vocab: int, layers: int, **kw: Any
) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": hidden // heads,
        "vocab_size": vocab,
        "num_hidden_layers": layers,
        "torch_dtype": "bfloat16",
        **kw,
    }


# Qwen/Qwen3-30B-A3B's config.json values fp4doctor reads (two fixtures share them).
QWEN3_30B_A3B: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "vocab_size": 151936,
    "num_hidden_layers": 48,
    "torch_dtype": "bfloat16",
}


MODELS = (
    Model(
        "llama-3.1-8b-instruct-fp4",
        "nvidia/Llama-3.1-8B-Instruct-FP4",
        "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json",
        "ModelOpt NVFP4 (hf_quant_config.json), dense; lm_head excluded",
        _llama(4096, 14336, 32, 8, 128256, 32),
        MODELOPT,
        layers=(0, 1),
    ),
    Model(
        "llama-3.3-70b-instruct-fp4",
        "nvidia/Llama-3.3-70B-Instruct-FP4",
        "https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct/blob/main/config.json",
        "ModelOpt NVFP4 in config.json's quantization_config, dense, one unindexed shard",
        _llama(8192, 28672, 64, 8, 128256, 80),
        MODELOPT,
        layers=(0,),
        shards=1,
        legacy_hf_quant=False,
    ),
    Model(
        "deepseek-r1-fp4",
        "nvidia/DeepSeek-R1-FP4",
        "https://huggingface.co/deepseek-ai/DeepSeek-R1/blob/main/config.json",
        "ModelOpt NVFP4 MoE (MLA attention, 1 shared expert, 3 dense layers first); layers 0 "
        "(dense) and 3 (MoE) stored, 8 of 256 experts; attention kept BF16 and excluded in the "
        "fixture (the published exclusion list was not verified)",
        {
            "architectures": ["DeepseekV3ForCausalLM"],
            "model_type": "deepseek_v3",
            "hidden_size": 7168,
            "intermediate_size": 18432,
            "moe_intermediate_size": 2048,
            "n_routed_experts": 256,
            "n_shared_experts": 1,
            "num_experts_per_tok": 8,
            "first_k_dense_replace": 3,
            "num_attention_heads": 128,
            "num_key_value_heads": 128,
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            "vocab_size": 129280,
            "num_hidden_layers": 61,
            "torch_dtype": "bfloat16",
        },
        MODELOPT,
        layers=(0, 3),
        shards=3,
        excluded=("lm_head", "model.layers.*.self_attn*"),
        stored_experts=8,
        attention_bf16=True,
    ),
    Model(
        "qwen3-30b-a3b-fp4",
        "nvidia/Qwen3-30B-A3B-FP4",
        "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json",
        "ModelOpt NVFP4 MoE, 128 experts (8 stored); moe_intermediate_size 768 is 96 per rank "
        "at TP 8: unaligned for FlashInfer's TRT-LLM MoE in releases that do not pad",
        QWEN3_30B_A3B,
        MODELOPT,
        layers=(0, 1),
        stored_experts=8,
    ),
    Model(
        "qwen3-32b-nvfp4",
        "RedHatAI/Qwen3-32B-NVFP4",
        "https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json",
        "compressed-tensors nvfp4-pack-quantized W4A4 (config.json), dense; lm_head ignored",
        {
            **_llama(5120, 25600, 64, 8, 151936, 64),
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "head_dim": 128,
        },
        CT,
        layers=(0, 1),
    ),
    Model(
        "llama-3.1-8b-instruct-nvfp4a16",
        "llm-compressor examples/quantization_w4a16_fp4 (Llama-3.1-8B-Instruct-NVFP4A16)",
        "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json",
        "compressed-tensors nvfp4-pack-quantized W4A16 (weight-only), dense; lm_head ignored; "
        "the checkpoint vllm-project/llm-compressor's W4A16 FP4 example writes",
        _llama(4096, 14336, 32, 8, 128256, 32),
        CT_A16,
        layers=(0, 1),
    ),
    Model(
        "qwen3-30b-a3b-nvfp4a16",
        "none published: Qwen3-30B-A3B through llm-compressor's examples/quantization_w4a16_fp4 "
        "recipe (W4A16 NVFP4 on every Linear, experts included)",
        "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json",
        "compressed-tensors nvfp4-pack-quantized W4A16 (weight-only) MoE, 128 experts (2 "
        "stored, layer 0 only); lm_head ignored. A reconstruction to exercise weight-only "
        "experts: no published checkpoint is claimed",
        {**QWEN3_30B_A3B, "hidden_act": "silu"},
        CT_A16,
        layers=(0,),
        shards=1,
        stored_experts=2,
    ),
    Model(
        "qwen2.5-72b-instruct-nvfp4",
        "enfuse/Qwen2.5-72B-Instruct-NVFP4",
        "https://huggingface.co/Qwen/Qwen2.5-72B-Instruct/blob/main/config.json",
        "compressed-tensors nvfp4-pack-quantized W4A4, dense; intermediate_size 29568 is 3696 "
        "per rank at TP 8 (gate/up N 7392 is not a multiple of 128, down K not of 32)",
        {
            **_llama(8192, 29568, 64, 8, 152064, 80),
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
        },
        CT,
        layers=(0, 1),
    ),
)


# Checkpoints reproduced for field-corpus cases (tests/field/cases/*.yaml, `check --model`): the
# reported model's config values that decide the case, from its published config.json, with
# everything else kept as small as the formats allow. Written beside MODELS; kept out of it so
# the unit tests' expectations over MODELS stay what they are.
FIELD_MODELS = (
    Model(
        "nemotron-3-nano-30b-a3b-nvfp4",
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 (field case vllm-31099-tp8-n-div32)",
        "https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16/blob/main/config.json",
        "Nemotron-H hybrid (Mamba-2, MoE, attention); layers 0 (Mamba), 1 (MoE) and 5 "
        "(attention) stored, 4 of 128 experts; relu2 experts (up/down only); shared expert "
        "intermediate 3712 is 464 per rank at TP 8 (464 % 32 = 16: the 'Expected n to be "
        "divisible by 32 (16 vs. 0)' of vLLM PR #31099). Reconstructed: ModelOpt NVFP4 on the "
        "MoE layers only, Mamba and attention projections BF16 and excluded (the published "
        "checkpoint's per-layer precision was not verified)",
        {
            "architectures": ["NemotronHForCausalLM"],
            "model_type": "nemotron_h",
            "hidden_size": 2688,
            "intermediate_size": 1856,
            "moe_intermediate_size": 1856,
            "moe_shared_expert_intermediate_size": 3712,
            "n_routed_experts": 128,
            "n_shared_experts": 1,
            "num_experts_per_tok": 6,
            "mlp_hidden_act": "relu2",
            "num_attention_heads": 32,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "mamba_num_heads": 64,
            "mamba_head_dim": 64,
            "n_groups": 8,
            "ssm_state_size": 128,
            "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
            "vocab_size": 131072,
            "num_hidden_layers": 52,
            "torch_dtype": "bfloat16",
        },
        MODELOPT,
        layers=(0, 1, 5),
        excluded=(
            "lm_head",
            "backbone.layers.*.mixer.in_proj",
            "backbone.layers.*.mixer.out_proj",
            "backbone.layers.*.mixer.q_proj",
            "backbone.layers.*.mixer.k_proj",
            "backbone.layers.*.mixer.v_proj",
            "backbone.layers.*.mixer.o_proj",
        ),
        stored_experts=4,
        attention_bf16=True,
        layout="nemotron_h",
    ),
    Model(
        "step-3.7-flash-nvfp4",
        "stepfun-ai/Step-3.7-Flash-NVFP4 (field cases fi-3486-spark-step37-swiglustep, "
        "vllm-48921-b300-tp8-swiglustep)",
        "https://github.com/vllm-project/vllm/issues/48921 (moe_intermediate_size=1280, "
        "SWIGLUSTEP); vllm/model_executor/models/step3p5.py (the keys vLLM reads)",
        "Step3p7ForConditionalGeneration with the Step-3.5 text model in text_config; one MoE "
        "layer stored (layer 44), 4 of 288 experts, no shared expert, vision tower left out; "
        "moe_intermediate_size 1280 (160 per rank at TP 8) as the report states. "
        "Reconstructed: swiglu_limits (7.0 on the last layers only: vLLM's step3p5.py runs "
        "MoEActivation.SWIGLUSTEP on a layer whose limit is set, and asserts it is 7.0), the "
        "expert count, hidden size, heads and vocabulary; ModelOpt NVFP4 on the experts only, "
        "attention BF16 and excluded (the published checkpoint's precision per layer and "
        "exact config.json were not read)",
        {
            "architectures": ["Step3p7ForConditionalGeneration"],
            "model_type": "step3p7",
            "text_config": {
                "architectures": ["Step3p5ForCausalLM"],
                "model_type": "step3p5",
                "hidden_size": 4096,
                "intermediate_size": 11264,
                "moe_intermediate_size": 1280,
                "moe_num_experts": 288,
                "moe_top_k": 8,
                "share_expert_dim": 1280,
                "hidden_act": "silu",
                "swiglu_limits": [0.0] * 43 + [7.0, 7.0],
                "num_attention_heads": 64,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "vocab_size": 128896,
                "num_hidden_layers": 45,
                "torch_dtype": "bfloat16",
            },
        },
        MODELOPT,
        layers=(44,),
        excluded=("lm_head", "model.layers.*.self_attn*"),
        stored_experts=4,
        attention_bf16=True,
    ),
    Model(
        "minimax-m3-nvfp4",
        "nvidia/MiniMax-M3-NVFP4 (field case fi-3732-spark-minimax-swigluoai)",
        "https://github.com/flashinfer-ai/flashinfer/issues/3732 (swiglu_limit=7.0, "
        "SWIGLUOAI_UNINTERLEAVE); vllm/models/minimax_m3/nvidia/model.py (the keys vLLM reads)",
        "MiniMaxM3SparseForCausalLM: vLLM runs its experts on "
        "MoEActivation.SWIGLUOAI_UNINTERLEAVE with swiglu_limit=config.swiglu_limit (7.0, as "
        "the report's error states); one MoE layer stored, 4 of 256 experts. Reconstructed: "
        "the sizes, expert count, swiglu_alpha/beta, heads and vocabulary, and the tensor "
        "names (model.layers.N.mlp.experts.E.gate_proj/up_proj/down_proj); ModelOpt NVFP4 on "
        "the experts only, attention BF16 and excluded (the published config.json and "
        "exclusion list were not read)",
        {
            "architectures": ["MiniMaxM3SparseForCausalLM"],
            "model_type": "minimax_m3",
            "hidden_size": 3072,
            "intermediate_size": 1536,
            "num_local_experts": 256,
            "num_experts_per_tok": 8,
            "hidden_act": "silu",
            "swiglu_limit": 7.0,
            "swiglu_alpha": 1.702,
            "swiglu_beta": 1.0,
            "num_attention_heads": 48,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 200064,
            "num_hidden_layers": 62,
            "torch_dtype": "bfloat16",
        },
        MODELOPT,
        layers=(1,),
        excluded=("lm_head", "model.layers.*.self_attn*"),
        stored_experts=4,
        attention_bf16=True,
    ),
    Model(
        "deepseek-v4-flash-nvfp4",
        "a DeepSeek-V4-Flash NVFP4 checkpoint (field case vllm-46492-sm120-clamped-moe)",
        "https://github.com/vllm-project/vllm/pull/46492 (a model that sets swiglu_limit); "
        "vllm/models/deepseek_v4/nvidia/model.py (FusedMoE(swiglu_limit=config.swiglu_limit))",
        "DeepseekV4ForCausalLM with a SwiGLU clamp (swiglu_limit) on its silu experts; one MoE "
        "layer stored, 4 of 256 experts. Reconstructed: the clamp's value, the sizes, expert "
        "count, heads and vocabulary, and plain q/k/v attention names (DeepSeek-V4's own "
        "attention is not modelled; BF16 and excluded); ModelOpt NVFP4 on the experts only "
        "(the published config.json was not read)",
        {
            "architectures": ["DeepseekV4ForCausalLM"],
            "model_type": "deepseek_v4",
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "moe_intermediate_size": 2048,
            "n_routed_experts": 256,
            "num_experts_per_tok": 6,
            "hidden_act": "silu",
            "swiglu_limit": 10.0,
            "num_attention_heads": 64,
            "num_key_value_heads": 1,
            "head_dim": 128,
            "vocab_size": 129280,
            "num_hidden_layers": 43,
            "torch_dtype": "bfloat16",
        },
        MODELOPT,
        layers=(1,),
        excluded=("lm_head", "model.layers.*.self_attn*"),
        stored_experts=4,
        attention_bf16=True,
    ),
)


def _fp4(prefix: str, n: int, k: int, quant: str) -> Iterator[tuple[str, str, list[int]]]:
    if quant in (MODELOPT, MODELOPT_A16):
        yield f"{prefix}.weight", "U8", [n, k // 2]
        yield f"{prefix}.weight_scale", "F8_E4M3", [n, k // 16]
        yield f"{prefix}.weight_scale_2", "F32", []
        if quant == MODELOPT:
            yield f"{prefix}.input_scale", "F32", []
    else:
        yield f"{prefix}.weight_packed", "U8", [n, k // 2]
        yield f"{prefix}.weight_scale", "F8_E4M3", [n, k // 16]
        yield f"{prefix}.weight_global_scale", "F32", [1]
        if quant == CT:
            yield f"{prefix}.input_global_scale", "F32", [1]


def _linear(prefix: str, n: int, k: int, quant: str) -> Iterator[tuple[str, str, list[int]]]:
    if quant == BF16:
        yield f"{prefix}.weight", "BF16", [n, k]
    else:
        yield from _fp4(prefix, n, k, quant)


def _nemotron_h_tensors(m: Model) -> list[tuple[str, str, list[int]]]:
    """Nemotron-H's names: backbone.layers.N.mixer.* for its Mamba-2, MoE and attention layers,
    as `hybrid_override_pattern` places them (M, E, *); relu2 experts have no gate_proj."""
    c = m.config
    h, vocab = c["hidden_size"], c["vocab_size"]
    out: list[tuple[str, str, list[int]]] = [("backbone.embeddings.weight", "BF16", [vocab, h])]
    for i in m.layers:
        p = f"backbone.layers.{i}"
        out.append((f"{p}.norm.weight", "BF16", [h]))
        kind = c["hybrid_override_pattern"][i]
        if kind == "M":
            inner = c["mamba_num_heads"] * c["mamba_head_dim"]
            conv = inner + 2 * c["n_groups"] * c["ssm_state_size"]
            out += _linear(f"{p}.mixer.in_proj", inner + conv + c["mamba_num_heads"], h, BF16)
            out += _linear(f"{p}.mixer.out_proj", h, inner, BF16)
        elif kind == "*":
            hd, heads, kv = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
            out += _linear(f"{p}.mixer.q_proj", heads * hd, h, BF16)
            out += _linear(f"{p}.mixer.k_proj", kv * hd, h, BF16)
            out += _linear(f"{p}.mixer.v_proj", kv * hd, h, BF16)
            out += _linear(f"{p}.mixer.o_proj", h, heads * hd, BF16)
        else:  # "E": the MoE
            inter, shared = c["moe_intermediate_size"], c["moe_shared_expert_intermediate_size"]
            out.append((f"{p}.mixer.gate.weight", "BF16", [c["n_routed_experts"], h]))
            for e in range(m.stored_experts):
                out += _linear(f"{p}.mixer.experts.{e}.up_proj", inter, h, m.quant)
                out += _linear(f"{p}.mixer.experts.{e}.down_proj", h, inter, m.quant)
            out += _linear(f"{p}.mixer.shared_experts.up_proj", shared, h, m.quant)
            out += _linear(f"{p}.mixer.shared_experts.down_proj", h, shared, m.quant)
    out.append(("backbone.norm_f.weight", "BF16", [h]))
    out.append(("lm_head.weight", "BF16", [vocab, h]))
    return out


def tensors(m: Model) -> list[tuple[str, str, list[int]]]:
    """Every stored tensor of the fixture: (name, dtype, shape)."""
    if m.layout == "nemotron_h":
        return _nemotron_h_tensors(m)
    c = {**m.config, **m.config.get("text_config", {})}
    h, vocab = c["hidden_size"], c["vocab_size"]
    out: list[tuple[str, str, list[int]]] = [("model.embed_tokens.weight", "BF16", [vocab, h])]
    attn_q = BF16 if m.attention_bf16 else m.quant
    for i in m.layers:
        p = f"model.layers.{i}"
        out.append((f"{p}.input_layernorm.weight", "BF16", [h]))
        out.append((f"{p}.post_attention_layernorm.weight", "BF16", [h]))
        if "kv_lora_rank" in c:  # MLA
            heads, qk = c["num_attention_heads"], c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
            out += _linear(f"{p}.self_attn.q_a_proj", c["q_lora_rank"], h, attn_q)
            out += _linear(f"{p}.self_attn.q_b_proj", heads * qk, c["q_lora_rank"], attn_q)
            out += _linear(f"{p}.self_attn.kv_a_proj_with_mqa",
                           c["kv_lora_rank"] + c["qk_rope_head_dim"], h, attn_q)  # fmt: skip
            out += _linear(f"{p}.self_attn.kv_b_proj",
                           heads * (c["qk_nope_head_dim"] + c["v_head_dim"]), c["kv_lora_rank"],
                           attn_q)  # fmt: skip
            out += _linear(f"{p}.self_attn.o_proj", h, heads * c["v_head_dim"], attn_q)
        else:
            hd, heads, kv = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
            out += _linear(f"{p}.self_attn.q_proj", heads * hd, h, attn_q)
            out += _linear(f"{p}.self_attn.k_proj", kv * hd, h, attn_q)
            out += _linear(f"{p}.self_attn.v_proj", kv * hd, h, attn_q)
            out += _linear(f"{p}.self_attn.o_proj", h, heads * hd, attn_q)
        experts = (c.get("n_routed_experts") or c.get("num_experts")
                   or c.get("num_local_experts") or c.get("moe_num_experts"))  # fmt: skip
        dense = not experts or i < c.get("first_k_dense_replace", 0)
        if dense:
            inter = c["intermediate_size"]
            out += _linear(f"{p}.mlp.gate_proj", inter, h, m.quant)
            out += _linear(f"{p}.mlp.up_proj", inter, h, m.quant)
            out += _linear(f"{p}.mlp.down_proj", h, inter, m.quant)
            continue
        inter = c.get("moe_intermediate_size") or c["intermediate_size"]
        out.append((f"{p}.mlp.gate.weight", "BF16", [experts, h]))
        for e in range(m.stored_experts):
            q = f"{p}.mlp.experts.{e}"
            out += _linear(f"{q}.gate_proj", inter, h, m.quant)
            out += _linear(f"{q}.up_proj", inter, h, m.quant)
            out += _linear(f"{q}.down_proj", h, inter, m.quant)
        if c.get("n_shared_experts"):
            shared = inter * c["n_shared_experts"]
            out += _linear(f"{p}.mlp.shared_experts.gate_proj", shared, h, m.quant)
            out += _linear(f"{p}.mlp.shared_experts.up_proj", shared, h, m.quant)
            out += _linear(f"{p}.mlp.shared_experts.down_proj", h, shared, m.quant)
    out.append(("model.norm.weight", "BF16", [h]))
    out.append(("lm_head.weight", "BF16", [vocab, h]))
    return out


ALL_MODELS = MODELS + FIELD_MODELS


def header_bytes(entries: list[tuple[str, str, list[int]]]) -> bytes:
    """A safetensors file without its data: the length, then the JSON header (offsets as if the
    data followed), padded with spaces to 8 bytes as the safetensors writer does."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in entries:
        size = DTYPE_BYTES[dtype]
        for d in shape:
            size *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


def _quant_config(m: Model) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(hf_quant_config.json, config.json's quantization_config)."""
    if m.quant in (MODELOPT, MODELOPT_A16):
        algo = "NVFP4" if m.quant == MODELOPT else "W4A16_NVFP4"
        q = {"quant_algo": algo, "kv_cache_quant_algo": None, "group_size": 16,
             "exclude_modules": list(m.excluded)}  # fmt: skip
        if m.legacy_hf_quant:
            return {"producer": {"name": "modelopt", "version": "0.29.0"}, "quantization": q}, None
        return None, {"quant_method": "modelopt", **q}
    fp4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
           "symmetric": True, "dynamic": False, "observer": "minmax"}  # fmt: skip
    acts = {**fp4, "dynamic": "local"} if m.quant == CT else None
    return None, {
        "quant_method": "compressed-tensors",
        "format": "nvfp4-pack-quantized",
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": fp4,
                "input_activations": acts,
                "output_activations": None,
                "format": "nvfp4-pack-quantized",
            }
        },
        "ignore": list(m.excluded),
        "kv_cache_scheme": None,
    }


def files(m: Model) -> dict[str, bytes]:
    """The fixture's files: name -> bytes."""
    hf_quant, qc = _quant_config(m)
    config = {**m.config, **({"quantization_config": qc} if qc else {})}
    out = {"config.json": (json.dumps(config, indent=2) + "\n").encode()}
    if hf_quant:
        out["hf_quant_config.json"] = (json.dumps(hf_quant, indent=2) + "\n").encode()
    entries = tensors(m)
    if m.shards == 1:
        out["model.safetensors"] = header_bytes(entries)
        return out
    weight_map: dict[str, str] = {}
    for s in range(m.shards):
        name = f"model-{s + 1:05d}-of-{m.shards:05d}.safetensors"
        chunk = entries[s * len(entries) // m.shards : (s + 1) * len(entries) // m.shards]
        out[name] = header_bytes(chunk)
        weight_map.update({t[0]: name for t in chunk})
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    out["model.safetensors.index.json"] = (json.dumps(index, indent=2) + "\n").encode()
    return out


def readme() -> bytes:
    lines = [
        "# Header-only NVFP4 checkpoints",
        "",
        "Generated by `tests/checkpoints/make.py` (read its docstring for what is reconstructed);",
        "do not edit by hand. Each directory holds configs and safetensors headers, no tensor",
        "data.",
        "",
        "| fixture | reproduces | architecture from | what it is |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| `{m.name}` | {m.repo} | {m.source} | {m.note} |" for m in ALL_MODELS]
    return ("\n".join(lines) + "\n").encode()


def write(root: Path = ROOT) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "README.md").write_bytes(readme())
    for m in ALL_MODELS:
        d = root / m.name
        d.mkdir()
        for name, data in files(m).items():
            (d / name).write_bytes(data)


def differs(root: Path = ROOT) -> list[str]:
    """Files whose committed bytes are not what this script writes."""
    wanted = {"README.md": readme()} | {
        f"{m.name}/{n}": b for m in ALL_MODELS for n, b in files(m).items()
    }
    have = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return sorted(k for k in wanted.keys() | have.keys() if wanted.get(k) != have.get(k))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    if parser.parse_args().check:
        bad = differs()
        for name in bad:
            print(f"differs: {name}", file=sys.stderr)
        return 1 if bad else 0
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
