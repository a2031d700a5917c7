"""The MoE family's live check (issue 12): the emulation on the CPU against the NVFP4
reference, and the FlashInfer CUTLASS MoE adapter against a labelled fake. Needs torch; the
rest of the family is tested without it in tests/test_moe.py."""

from __future__ import annotations

import importlib.machinery
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
B200 = str(HOSTS / "b200.json")
H200 = str(HOSTS / "h200.json")


# --- the live MoE check ----------------------------------------------------------------------

torch = pytest.importorskip("torch", reason="the live MoE check needs torch (fp4doctor[smoke])")


@pytest.fixture(autouse=False)
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_emulation_moe_passes_against_the_reference_on_the_cpu(one_thread: None) -> None:
    from fp4doctor.smoke import harness
    from fp4doctor.smoke.adapters import load_adapter

    result = harness.run_adapter(load_adapter("emulation-moe"), "cpu")
    assert result.status == "pass", result.reason
    assert result.shapes == [[16, 256, 256], [5, 256, 128]]


def test_a_wrong_moe_answer_fails_the_check(one_thread: None) -> None:
    """Labelled fake: an emulation that forgets the routing weights (sums the experts)."""
    from fp4doctor.smoke import harness
    from fp4doctor.smoke.adapters.emulation_moe import EmulationMoe

    class UnweightedMoe(EmulationMoe):
        def bind(self, case: Any, out: Any) -> Any:
            ones = torch.ones_like(case.topk_weights)
            import dataclasses

            return super().bind(dataclasses.replace(case, topk_weights=ones), out)

    result = harness.run_adapter(UnweightedMoe(name="fake-unweighted-moe"), "cpu")
    assert result.status == "fail", result.reason


def test_the_moe_reference_is_reproducible_and_its_weights_sum_to_one(one_thread: None) -> None:
    from fp4doctor.smoke import moe

    case = moe.make_case(5, 256, 128, "cpu")
    again = moe.reference_moe(
        case.x.float(),
        case.w13.deq,
        case.w2.deq,
        case.topk_ids,
        case.topk_weights,
        case.inter_global_scale,
    )
    assert torch.equal(again, case.ref)
    assert torch.allclose(case.topk_weights.sum(dim=1), torch.ones(5))


class FakeFusedMoe:
    """Labelled fake of flashinfer.fused_moe: records the call, then answers as the library
    would on a GPU it supports (the emulation's answer) or refuses as it does on SM90."""

    def __init__(self, refuse: str | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.refuse = refuse

    def cutlass_fused_moe(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if self.refuse:
            raise RuntimeError(self.refuse)
        return kwargs["output"]


@pytest.fixture
def fake_flashinfer(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeFusedMoe]:
    fused = FakeFusedMoe()
    flashinfer = types.ModuleType("flashinfer")
    flashinfer.__spec__ = importlib.machinery.ModuleSpec("flashinfer", None)
    flashinfer.__version__ = "0.0.0+fake"  # type: ignore[attr-defined]
    flashinfer.autotune = lambda _on: __import__("contextlib").nullcontext()  # type: ignore[attr-defined]
    module = types.ModuleType("flashinfer.fused_moe")
    module.cutlass_fused_moe = fused.cutlass_fused_moe  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flashinfer", flashinfer)
    monkeypatch.setitem(sys.modules, "flashinfer.fused_moe", module)
    yield fused


def test_flashinfer_cutlass_moe_adapter_calls_as_vllm_does(
    fake_flashinfer: FakeFusedMoe, one_thread: None
) -> None:
    from fp4doctor.smoke import moe
    from fp4doctor.smoke.adapters.flashinfer_moe import CUTLASS

    case = moe.make_case(5, 256, 128, "cpu")
    out = case.new_output("cpu")
    CUTLASS.bind(case, out)()
    (call,) = fake_flashinfer.calls
    assert call["fc1_expert_weights"].dtype == torch.long
    assert call["fc1_expert_weights"].shape == (4, 2 * 128, 256 // 16)  # bytes viewed as int64
    a1, w1_sf, g1, a2, w2_sf, g2 = call["quant_scales"]
    assert w1_sf.dtype == torch.int32 and w2_sf.dtype == torch.int32
    assert torch.allclose(a1, case.x_global_scale.reshape(1))
    assert torch.allclose(g1, 1 / (case.x_global_scale * case.w13.global_scale))
    assert torch.allclose(g2, 1 / (case.inter_global_scale * case.w2.global_scale))
    assert torch.allclose(a2, case.inter_global_scale.reshape(1))
    # up (w3) first, then the gate (w1), as FlashInfer's CUTLASS MoE takes them
    up_first = call["fc1_expert_weights"].view(torch.uint8)
    assert torch.equal(up_first[:, :128], case.w13.packed[:, 128:])
    assert call["token_selected_experts"].dtype == torch.int32 and call["input_sf"] is None


def test_flashinfer_cutlass_moe_refusal_is_the_librarys_own_words(
    fake_flashinfer: FakeFusedMoe, one_thread: None
) -> None:
    from fp4doctor.smoke import harness
    from fp4doctor.smoke.adapters.flashinfer_moe import FlashInferCutlassMoe

    fake_flashinfer.refuse = "[TensorRT-LLM][ERROR] FP4 MoE is not supported on SM90 (fake)"
    adapter = FlashInferCutlassMoe(supports_cpu=True)  # the fake runs anywhere
    result = harness.run_adapter(adapter, "cpu")
    assert result.status == "fail"
    assert "not supported on SM90 (fake)" in result.reason
