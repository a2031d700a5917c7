"""--model reads the checkpoint's content: each tensor the declared NVFP4 format needs, per layer
class and per expert, its dtype, and the scalar scales' values; each defect is a finding with
what the engine release does with it (issue 40, item 3 and class 4).

Every case is a small REAL checkpoint written here (tests/safetensors_writer.py: safetensors
files with their data, not headers alone), judged by the real command line against the B200
fixture host with the engine release named (`--engine-version`), so the verdict never depends
on this machine. JSON output is validated against fp4doctor/schemas (conftest.py's autouse
hook, and `schema_errors` here).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
import safetensors_writer as w
from click.testing import CliRunner
from conftest import schema_errors

from fp4doctor import checkpoint, profile
from fp4doctor.checkpoint import constraints, content_rules, judge
from fp4doctor.checkpoint.safetensors import read_header, read_scalars
from fp4doctor.cli import main

ROOT = Path(__file__).resolve().parent.parent
B200 = str(ROOT / "tests" / "fixtures" / "hosts" / "b200.json")
EXPERT = "model.layers.1.mlp.experts.2"


def _check(model: Path, target: str = "vllm", version: str = "0.33.0") -> tuple[int, Any]:
    """`check --json` of `model` on the B200 fixture: the exit code and the document."""
    result = CliRunner().invoke(
        main,
        ["check", "--json", "--facts", B200, "--target", target, "--engine-version", version,
         "--no-smoke", "--model", str(model)],
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)  # the document stays whole, whatever the verdict
    assert schema_errors(doc, "report") == []
    return result.exit_code, doc


def _content(doc: Any) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in doc["model"]["findings"] if f["id"].startswith("model.content")}


def test_a_good_checkpoint_stays_ready_and_its_scales_are_read(tmp_path: Path) -> None:
    model = w.moe_checkpoint().write(tmp_path / "m")
    code, doc = _check(model)
    assert code == 0 and _content(doc) == {}
    read = doc["model"]["content"]
    # 2 layers x (4 attention + 4 experts x 3) modules, each a weight_scale_2 and an input_scale.
    assert read["modules"] == 32 and read["scalars"] == 64 and read["bytes_read"] == 64 * 4
    assert read["values"] == "read" and read["headers_read"] == 2


def test_an_expert_without_input_scale_is_not_ready(tmp_path: Path) -> None:
    layout = w.moe_checkpoint()
    layout.drop(f"{EXPERT}.up_proj.input_scale")
    code, doc = _check(layout.write(tmp_path / "m"))
    assert code == 1
    f = _content(doc)["model.content.missing.experts.gate_up.input_scale"]
    assert f["status"] == "fail" and f["details"]["experts"] == 1
    assert f"{EXPERT}.up_proj.input_scale" in f["reason"] and "torch.empty" in f["reason"]
    assert "vllm-project/vllm" in f["source"] and f["fix"]


def test_ignore_model_content_downgrades_the_content_findings(tmp_path: Path) -> None:
    layout = w.moe_checkpoint()
    layout.drop(f"{EXPERT}.up_proj.input_scale")
    result = CliRunner().invoke(
        main,
        ["check", "--json", "--facts", B200, "--target", "vllm", "--engine-version", "0.33.0",
         "--no-smoke", "--ignore", "model.content", "--model", str(layout.write(tmp_path / "m"))],
    )  # fmt: skip
    (f,) = _content(json.loads(result.stdout)).values()
    assert result.exit_code == 0 and f["status"] == "warn" and f["ignored"] is True


def test_an_expert_missing_whole_is_found_from_the_expert_grid(tmp_path: Path) -> None:
    layout = w.moe_checkpoint()
    for name in ("weight", "weight_scale", "weight_scale_2", "input_scale"):
        layout.drop(f"{EXPERT}.down_proj.{name}")
    code, doc = _check(layout.write(tmp_path / "m"))
    f = _content(doc)["model.content.missing.experts.down.module"]
    assert code == 1 and f["details"]["count"] == 1 and f"{EXPERT}.down_proj" in f["reason"]


@pytest.mark.parametrize(
    ("tensor", "value", "kind"),
    [
        (f"{EXPERT}.down_proj.weight_scale_2", 0.0, "zero"),
        ("model.layers.0.self_attn.o_proj.input_scale", float("inf"), "nonfinite"),
        (f"{EXPERT}.gate_proj.input_scale", float("nan"), "nonfinite"),
    ],
)
def test_a_zero_or_non_finite_scale_is_not_ready(
    tmp_path: Path, tensor: str, value: float, kind: str
) -> None:
    layout = w.moe_checkpoint()
    layout.set(tensor, value=value)
    code, doc = _check(layout.write(tmp_path / "m"))
    (f,) = _content(doc).values()
    assert code == 1 and f["status"] == "fail" and f["id"].startswith(f"model.content.{kind}.")
    assert tensor in f["reason"]


def test_gate_and_up_global_scales_that_differ_warn_with_what_the_engine_picks(
    tmp_path: Path,
) -> None:
    layout = w.moe_checkpoint()
    layout.set(f"{EXPERT}.up_proj.weight_scale_2", value=0.004)
    code, doc = _check(layout.write(tmp_path / "m"))
    f = _content(doc)["model.content.gate_up_scale.experts.gate_up.weight_scale_2"]
    assert code == 0 and f["status"] == "warn"
    assert "w1_weight_scale_2 must match w3_weight_scale_2" in f["reason"]
    assert "gate_proj 0.0025 vs up_proj 0.004" in f["reason"]
    # SGLang from 0.5.14 keeps both for FlashInfer TRT-LLM, the gate's elsewhere.
    _, sgl = _check(tmp_path / "m", "sglang", "0.5.23")
    f = _content(sgl)["model.content.gate_up_scale.experts.gate_up.weight_scale_2"]
    assert f["status"] == "warn" and "g1_alphas_up" in f["reason"]


def test_a_weight_in_the_wrong_dtype_is_a_finding_not_a_usage_error(tmp_path: Path) -> None:
    layout = w.moe_checkpoint()
    layout.set(f"{EXPERT}.gate_proj.weight", dtype="BF16", shape=[128, 256])
    code, doc = _check(layout.write(tmp_path / "m"))
    f = _content(doc)["model.content.dtype.experts.gate_up.weight"]
    assert code == 1 and f["status"] == "fail" and "BF16, not U8" in f["reason"]


def test_a_checkpoint_with_no_nvfp4_weight_is_exit_1_with_the_json_whole(tmp_path: Path) -> None:
    """Was exit 2 with nothing on stdout (issue 40)."""
    layout = w.moe_checkpoint()
    for shard in layout.shards:
        for name in list(shard):
            if name.endswith(("_scale", "_scale_2")):
                del shard[name]
            elif name.endswith(".weight") and shard[name].dtype == "U8":
                shape = shard[name].shape
                shard[name] = w.Tensor("BF16", [shape[0], shape[1] * 2])
    code, doc = _check(layout.write(tmp_path / "m"))
    f = _content(doc)["model.content.dtype.checkpoint.weight"]
    assert code == 1 and "no NVFP4 weight" in f["reason"] and "BF16" in f["reason"]
    code, doc = _check(tmp_path / "m", "sglang", "0.5.23")
    assert code == 1 and _content(doc)["model.content.dtype.checkpoint.weight"]["status"] == "fail"


def test_compressed_tensors_names_are_checked_too(tmp_path: Path) -> None:
    layout = w.moe_checkpoint(fmt=w.CT)
    layout.drop(f"{EXPERT}.gate_proj.input_global_scale")
    layout.set("model.layers.0.self_attn.q_proj.weight_global_scale", value=0.0)
    code, doc = _check(layout.write(tmp_path / "m"))
    found = _content(doc)
    assert code == 1
    assert found["model.content.missing.experts.gate_up.input_global_scale"]["status"] == "fail"
    assert found["model.content.zero.qkv.weight_global_scale"]["status"] == "fail"


# --- class 4: quant_algo NVFP4 whose config groups quantise weights only -----------------------

GROUPS = {"group_0": {"targets": ["Linear"], "input_activations": None,
                      "weights": {"num_bits": 4, "type": "float", "group_size": 16}}}  # fmt: skip


def _weight_only_groups(tmp_path: Path) -> Path:
    return w.moe_checkpoint(w4a4=False, config_groups=GROUPS).write(tmp_path / "m")


def _schemes(doc: Any) -> set[str]:
    return {g["scheme"] for g in doc["model"]["gemms"] if g.get("scheme")}


@pytest.mark.parametrize(
    ("target", "version", "code", "status", "scheme"),
    [
        ("vllm", "0.28.0", 1, "fail", "W4A4"),  # the W4A4 path, input scales uninitialised
        ("vllm", "0.29.0", 0, None, "W4A16"),  # rerouted to W4A16_NVFP4: Marlin
        ("vllm", "0.34.0", 0, None, "W4A16"),
        ("sglang", "0.5.16", 1, "fail", "W4A4"),  # quant_algo only: W4A4, torch.empty
        ("sglang", "0.5.23", 0, "warn", "W4A4"),  # W4A4 with input scales of 1.0
    ],
)
def test_weight_only_config_groups_under_quant_algo_nvfp4_per_release(
    tmp_path: Path, target: str, version: str, code: int, status: str | None, scheme: str
) -> None:
    got, doc = _check(_weight_only_groups(tmp_path), target, version)
    found = {k: f for k, f in _content(doc).items() if "weight_only_groups" in k}
    assert got == code
    assert {f["status"] for f in found.values()} == ({status} if status else set())
    ckpt = checkpoint.load(str(tmp_path / "m"))
    rules = constraints.load()
    runs = judge.judge(ckpt, profile.load(target, []), version, rules)
    assert {g.layer.scheme for g in runs.gemms if g.layer.fp4} == {scheme}
    assert not [k for k in _content(doc) if ".missing." in k]  # not each module's input_scale


def test_sglang_defaults_a_missing_expert_input_scale_to_one_from_0_5_17(tmp_path: Path) -> None:
    layout = w.moe_checkpoint()
    layout.drop(f"{EXPERT}.up_proj.input_scale")
    model = layout.write(tmp_path / "m")
    fid = "model.content.missing.experts.gate_up.input_scale"
    assert _content(_check(model, "sglang", "0.5.16")[1])[fid]["status"] == "fail"
    f = _content(_check(model, "sglang", "0.5.23")[1])[fid]
    assert f["status"] == "warn" and "1.0" in f["reason"]


# --- hostile and partial files ----------------------------------------------------------------


def test_offsets_past_the_end_of_the_file_are_a_truncated_shard_never_read(tmp_path: Path) -> None:
    model = w.moe_checkpoint().write(tmp_path / "m")
    shard = sorted(model.glob("*.safetensors"))[-1]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) - 64])  # a partial download: the last tensors cut off
    code, doc = _check(model)
    found = [f for k, f in _content(doc).items() if k.startswith("model.content.truncated")]
    assert code == 1 and found and all(f["status"] == "fail" for f in found)
    assert "download the shard again" in found[0]["fix"]


def test_offsets_that_are_no_offsets_are_never_followed(tmp_path: Path) -> None:
    """data_offsets reversed, beyond 2**64, or past the file by 2**60: nothing is read there."""
    offsets = {"q": [8, 4], "k": [2**64, 2**64 + 4], "v": [2**60, 2**60 + 4], "o": [0, 4]}
    raw = json.dumps({
        f"a.{p}_proj.weight_scale_2": {"dtype": "F32", "shape": [1] if p == "o" else [],
                                       "data_offsets": at}
        for p, at in offsets.items()
    }).encode()  # fmt: skip
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + struct.pack("<f", 0.5))
    got = read_scalars(path, read_header(path).values())
    assert got.values == {"a.o_proj.weight_scale_2": (0.5,)}
    assert got.beyond == ["a.v_proj.weight_scale_2"] and got.bytes_read == 4


def test_a_huge_header_length_is_one_clear_error(tmp_path: Path) -> None:
    model = w.moe_checkpoint().write(tmp_path / "m")
    shard = sorted(model.glob("*.safetensors"))[-1]  # not a shard the layer classes need
    shard.write_bytes(struct.pack("<Q", 2**63) + b"{}")
    result = CliRunner().invoke(
        main, ["check", "--facts", B200, "--no-smoke", "--model", str(model)]
    )
    assert result.exit_code == 2 and "header length" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.output


def test_header_only_files_are_said_not_read() -> None:
    ckpt = checkpoint.load(str(ROOT / "tests" / "fixtures" / "checkpoints" / "qwen3-30b-a3b-fp4"))
    assert ckpt.content.defects == () and ckpt.content.scalars == 0
    assert ckpt.content.values.startswith("not read: header-only")


# --- the rules ----------------------------------------------------------------------------------


def test_every_content_rule_cites_a_release_and_blocks_only_on_errors_and_garbage() -> None:
    rules = constraints.load().content
    assert {r.defect for r in rules} >= {"missing", "zero", "nonfinite", "gate_up_scale",
                                         "dtype", "truncated", "weight_only_groups"}  # fmt: skip
    for r in rules:
        assert r.blocking == (r.effect in ("load-error", "wrong-output")), r.id
        assert r.source and any(ch.isdigit() for ch in r.source), r.id


def test_a_content_rule_with_scheme_for_another_defect_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "shapes.yaml"
    bad.write_text(
        "schema: 1\ncontent:\n  - id: x\n    target: vllm\n    engine: '>=0.1'\n"
        "    defect: zero\n    scheme: W4A4\n    effect: reads\n    says: s\n    source: s\n"
    )
    with pytest.raises(profile.ProfileError, match="scheme"):
        constraints.load(str(bad))
    assert content_rules.pick((), "vllm", "0.33.0", "zero") is None
