"""The MoE family's live check (issue 12): the emulation on the CPU against the NVFP4
reference, and the FlashInfer CUTLASS MoE adapter against a labelled fake. Needs torch; the
rest of the family is tested without it in tests/test_moe.py."""

from __future__ import annotations

import contextlib
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
    fake_flashinfer_modules(monkeypatch, {}, {"cutlass_fused_moe": fused.cutlass_fused_moe})
    yield fused


def fake_flashinfer_modules(
    monkeypatch: pytest.MonkeyPatch, top: dict[str, Any], fused_moe: dict[str, Any]
) -> None:
    """A FAKE `flashinfer` (version 0.0.0+fake, autotune a no-op, and `top`) and
    `flashinfer.fused_moe` holding `fused_moe`, in sys.modules for the test."""
    flashinfer = types.ModuleType("flashinfer")
    flashinfer.__spec__ = importlib.machinery.ModuleSpec("flashinfer", None)
    vars(flashinfer).update(
        __version__="0.0.0+fake", autotune=lambda _on: contextlib.nullcontext(), **top
    )
    module = types.ModuleType("flashinfer.fused_moe")
    vars(module).update(fused_moe)
    monkeypatch.setitem(sys.modules, "flashinfer", flashinfer)
    monkeypatch.setitem(sys.modules, "flashinfer.fused_moe", module)


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


# --- the Blackwell MoE backends against labelled fakes ----------------------------------------
#
# The fakes below are FAKE kernels: each reads its operands back in the layout the real
# FlashInfer function documents (undoing the adapter's shuffle, interleave and swizzle), and
# computes the MoE from them. So a pass means the adapter's layout round-trips to the problem's
# answer; a fake that reads one layout detail differently must make the check fail.


def _raw(packed: Any, scales: Any) -> Any:
    """NVFP4 codes times block scales (no global scale): what the tensor cores multiply."""
    from fp4doctor.smoke import nvfp4

    return nvfp4.dequantize(packed, scales, 1.0)


def _fake_moe_kernel(x_raw: Any, gate_up: Any, w2_raw: Any, g1: Any, a2: Any, g2: Any,
                     ids: Any, weights: Any, *, up_first: bool = True) -> Any:  # fmt: skip
    """FAKE fused MoE from raw operands: `gate_up[e]` is [up; gate] (FlashInfer's order) unless
    `up_first` is False; `a2[e]` the intermediate's encode scale."""
    from fp4doctor.smoke import nvfp4

    tokens, inter = x_raw.shape[0], gate_up.shape[1] // 2
    out = torch.zeros(tokens, w2_raw.shape[1], dtype=torch.float32)
    for t in range(tokens):
        for slot in range(ids.shape[1]):
            e = int(ids[t, slot])
            h = (x_raw[t] @ gate_up[e].T) * g1[e]
            first, second = h[:inter], h[inter:]
            up, gate = (first, second) if up_first else (second, first)
            act = torch.nn.functional.silu(gate) * up
            act_raw = nvfp4.snap(act.reshape(1, -1), a2[e])[3][0] * a2[e]
            out[t] += (act_raw @ w2_raw[e].T) * g2[e] * weights[t, slot]
    return out


def _unpermute(shuffled: Any, idx: Any) -> Any:
    """Rows back in their original order, given `shuffled[i] = original[idx[i]]`."""
    original = torch.empty_like(shuffled)
    original[idx] = shuffled
    return original


def _trtllm_row_order(rows: int, gated: bool) -> Any:
    """The source row of each kernel row: gated interleave then TRT-LLM's shuffleMatrixA."""
    from fp4doctor.smoke import nvfp4

    idx = torch.arange(rows)
    if gated:
        idx = torch.stack([idx[: rows // 2], idx[rows // 2 :]], dim=1).reshape(-1)
    shuffle = nvfp4._shuffle_row_indices(rows, 128, torch.device("cpu"))
    return idx[shuffle]


class FakeBlackwellMoe:
    """Labelled FAKE of flashinfer.fused_moe's TRT-LLM and CuTe-DSL NVFP4 MoE: records every
    call, refuses when told to, and otherwise computes the answer from the operands as laid out
    for the real kernel. `mistake` makes it misread one layout detail (a wrong kernel)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.refuse: str | None = None
        self.mistake: str | None = None

    def trtllm_fp4_block_scale_moe(
        self, *, hidden_states_scale_layout: Any = None, **kw: Any
    ) -> Any:
        from fp4doctor.smoke import moe, nvfp4

        kw["hidden_states_scale_layout"] = hidden_states_scale_layout
        self.calls.append(kw)
        if self.refuse:
            raise RuntimeError(self.refuse)
        experts, rows13, _ = kw["gemm1_weights"].shape
        hidden, rows2 = kw["gemm2_weights"].shape[1], kw["gemm2_weights"].shape[1]
        order13 = _trtllm_row_order(rows13, gated=self.mistake != "no-interleave")
        order2 = _trtllm_row_order(rows2, gated=False)

        def unshuffle(w: Any, sf: Any, order: Any) -> Any:
            r, c = sf.shape[1:]
            linear = [nvfp4.unswizzle_128x4(s.reshape(-1), r, c) for s in sf.view(torch.uint8)]
            return torch.stack(
                [
                    _raw(_unpermute(we, order), _unpermute(se, order))
                    for we, se in zip(w, linear, strict=True)
                ]
            )

        w13 = unshuffle(kw["gemm1_weights"], kw["gemm1_weights_scale"], order13)
        w2 = unshuffle(kw["gemm2_weights"], kw["gemm2_weights_scale"], order2)
        x = _raw(kw["hidden_states"], kw["hidden_states_scale"])
        assert kw["routing_method_type"] == 1  # Renormalize: top-k, then softmax
        ids, weights = moe.route(kw["routing_logits"].float(), kw["top_k"])
        g1 = kw["output1_scale_gate_scalar"]
        a2 = kw["output1_scale_scalar"] / g1
        y = _fake_moe_kernel(x, w13, w2, g1, a2, kw["output2_scale_scalar"], ids, weights,
                             up_first=self.mistake != "gate-first")  # fmt: skip
        assert experts == kw["num_experts"] and hidden == y.shape[1]
        kw["output"].copy_(y)
        return [kw["output"]]

    def cute_dsl_fused_moe_nvfp4(self, **kw: Any) -> Any:
        from fp4doctor.smoke import nvfp4

        self.calls.append(kw)
        if self.refuse:
            raise RuntimeError(self.refuse)

        def from_mma(sf: Any, rows: int, cols: int) -> Any:
            # (32, 4, m_tiles, 4, k_tiles, E) view -> storage (E, m_tiles, k_tiles, 32, 4, 4)
            storage = sf.view(torch.uint8).permute(5, 2, 4, 0, 1, 3).contiguous()
            per_expert = storage.reshape(storage.shape[0], -1)
            return [nvfp4.unswizzle_128x4(s, rows, cols) for s in per_expert]

        def deinterleave(w: Any) -> Any:  # 64-row blocks [up0; gate0; up1; ...] -> [up; gate]
            if self.mistake == "no-interleave":
                return w
            e, rows = w.shape[:2]
            return w.reshape(e, rows // 128, 2, 64, *w.shape[2:]).transpose(1, 2).reshape(w.shape)

        w1, w2 = kw["w1_weight"], kw["w2_weight"]
        rows13, hidden = w1.shape[1], w1.shape[2] * 2
        inter = w2.shape[2] * 2
        w13 = torch.stack(
            [
                _raw(w, s)
                for w, s in zip(w1, from_mma(kw["w1_weight_sf"], rows13, hidden // 16), strict=True)
            ]
        )
        w2_raw = torch.stack(
            [
                _raw(w, s)
                for w, s in zip(w2, from_mma(kw["w2_weight_sf"], hidden, inter // 16), strict=True)
            ]
        )
        x = _raw(kw["x"], kw["x_sf"].squeeze(-1))
        y = _fake_moe_kernel(
            x, deinterleave(w13), w2_raw, kw["w1_alpha"], kw["fc2_input_scale"],
            kw["w2_alpha"], kw["token_selected_experts"], kw["token_final_scales"],
            up_first=self.mistake != "gate-first",
        )  # fmt: skip
        kw["moe_output"].copy_(y)
        return kw["moe_output"]


@pytest.fixture
def fake_blackwell_moe(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBlackwellMoe]:
    fused = FakeBlackwellMoe()
    fake_flashinfer_modules(
        monkeypatch,
        {"SfLayout": types.SimpleNamespace(layout_linear="linear (fake)")},
        {
            "trtllm_fp4_block_scale_moe": fused.trtllm_fp4_block_scale_moe,
            "cute_dsl_fused_moe_nvfp4": fused.cute_dsl_fused_moe_nvfp4,
        },
    )
    yield fused


def _blackwell_adapter(name: str) -> Any:
    """The adapter with `supports_cpu=True`: the FAKE kernel runs anywhere."""
    import dataclasses

    from fp4doctor.smoke.adapters import load_adapter

    return dataclasses.replace(load_adapter(name), supports_cpu=True)


BLACKWELL_MOE = ["flashinfer-trtllm-moe", "flashinfer-cutedsl-moe"]


def test_the_blackwell_moe_adapters_are_registered() -> None:
    from fp4doctor.smoke.adapters import ADAPTERS

    assert set(BLACKWELL_MOE) <= set(ADAPTERS)


@pytest.mark.parametrize("name", BLACKWELL_MOE)
def test_a_right_blackwell_moe_kernel_passes(
    fake_blackwell_moe: FakeBlackwellMoe, one_thread: None, name: str
) -> None:
    from fp4doctor.smoke import harness

    result = harness.run_adapter(_blackwell_adapter(name), "cpu")
    assert result.status == "pass", result.reason
    assert result.shapes == [[16, 256, 256], [5, 256, 128]]


@pytest.mark.parametrize("mistake", ["gate-first", "no-interleave"])
@pytest.mark.parametrize("name", BLACKWELL_MOE)
def test_a_blackwell_moe_kernel_that_reads_another_layout_fails(
    fake_blackwell_moe: FakeBlackwellMoe, one_thread: None, name: str, mistake: str
) -> None:
    from fp4doctor.smoke import harness

    fake_blackwell_moe.mistake = mistake
    result = harness.run_adapter(_blackwell_adapter(name), "cpu")
    assert result.status == "fail", result.reason
    assert "|out-ref|" in result.reason  # the check caught it, not an exception


def test_flashinfer_trtllm_moe_adapter_calls_as_vllm_does(
    fake_blackwell_moe: FakeBlackwellMoe, one_thread: None
) -> None:
    from fp4doctor.smoke import moe
    from fp4doctor.smoke.adapters.flashinfer_trtllm_moe import TRTLLM

    case = moe.make_case(5, 256, 128, "cpu")
    TRTLLM.bind(case, case.new_output("cpu"))()
    (call,) = fake_blackwell_moe.calls
    assert call["hidden_states"].dtype == torch.uint8 and call["hidden_states"].shape == (5, 128)
    assert call["hidden_states_scale"].dtype == torch.float8_e4m3fn
    assert call["hidden_states_scale"].shape == (5, 16)  # linear: one row per token, unpadded
    assert call["hidden_states_scale_layout"] == "linear (fake)"
    assert call["gemm1_weights"].dtype == torch.uint8
    assert call["gemm1_weights"].shape == (4, 256, 128)
    assert call["gemm1_weights_scale"].dtype == torch.float8_e4m3fn
    assert call["gemm1_weights_scale"].shape == (4, 256, 16)
    assert call["gemm2_weights"].shape == (4, 256, 64)
    assert call["gemm2_weights_scale"].shape == (4, 256, 8)
    g1 = 1 / (case.x_global_scale * case.w13.global_scale)
    assert torch.allclose(call["output1_scale_gate_scalar"], g1)
    assert torch.allclose(call["output1_scale_scalar"], g1 * case.inter_global_scale)
    g2 = 1 / (case.inter_global_scale * case.w2.global_scale)
    assert torch.allclose(call["output2_scale_scalar"], g2)
    assert call["routing_logits"].dtype == torch.float32 and call["routing_bias"] is None
    assert (call["num_experts"], call["top_k"], call["intermediate_size"]) == (4, 2, 128)
    assert (call["routing_method_type"], call["activation_type"]) == (1, 3)
    assert call["do_finalize"] is True and call["output"].dtype == torch.bfloat16
    # [up; gate] interleaved (up0, gate0, up1, ...), then shuffleMatrixA: kernel row j of a
    # 32-row block is interleaved row (j % 8) * 4 + j // 8. Row 1 <- 4 = up row 2 = w3 row 2,
    # row 8 <- 1 = gate row 0 = w1 row 0.
    w = call["gemm1_weights"][0]
    assert torch.equal(w[0], case.w13.packed[0, 128])
    assert torch.equal(w[1], case.w13.packed[0, 128 + 2])
    assert torch.equal(w[8], case.w13.packed[0, 0])


def test_flashinfer_cutedsl_moe_adapter_calls_as_vllm_does(
    fake_blackwell_moe: FakeBlackwellMoe, one_thread: None
) -> None:
    from fp4doctor.smoke import moe
    from fp4doctor.smoke.adapters.flashinfer_cutedsl_moe import CUTE_DSL

    case = moe.make_case(5, 256, 128, "cpu")
    CUTE_DSL.bind(case, case.new_output("cpu"))()
    (call,) = fake_blackwell_moe.calls
    assert call["x"].dtype == torch.uint8 and call["x"].shape == (5, 128)
    assert call["x_sf"].dtype == torch.float8_e4m3fn and call["x_sf"].shape == (5, 16, 1)
    assert call["w1_weight"].shape == (4, 256, 128) and call["w1_weight"].dtype == torch.uint8
    # [up; gate] in 64-row groups: rows 0..63 are w3 rows 0..63, rows 64..127 are w1 rows 0..63
    assert torch.equal(call["w1_weight"][:, :64], case.w13.packed[:, 128:192])
    assert torch.equal(call["w1_weight"][:, 64:128], case.w13.packed[:, :64])
    assert call["w1_weight_sf"].shape == (32, 4, 2, 4, 4, 4)  # (32, 4, m_tiles, 4, k_tiles, E)
    assert call["w2_weight_sf"].shape == (32, 4, 2, 4, 2, 4)
    assert call["w1_weight_sf"].dtype == torch.float8_e4m3fn
    assert call["token_selected_experts"].dtype == torch.int32
    assert call["fc2_input_scale"].shape == (4,)
    assert torch.allclose(call["fc2_input_scale"], case.inter_global_scale.expand(4))
    assert torch.allclose(call["w1_alpha"], 1 / (case.x_global_scale * case.w13.global_scale))
    assert torch.allclose(call["w2_alpha"], 1 / (case.inter_global_scale * case.w2.global_scale))
    assert (call["num_experts"], call["top_k"], call["num_local_experts"]) == (4, 2, 4)


@pytest.mark.parametrize("name", BLACKWELL_MOE)
def test_blackwell_moe_refusal_is_the_librarys_own_words(
    fake_blackwell_moe: FakeBlackwellMoe, one_thread: None, name: str
) -> None:
    from fp4doctor.smoke import harness

    fake_blackwell_moe.refuse = "[TensorRT-LLM][ERROR] unsupported SM90 (fake)"
    result = harness.run_adapter(_blackwell_adapter(name), "cpu")
    assert result.status == "fail"
    assert "unsupported SM90 (fake)" in result.reason


@pytest.mark.parametrize("name", BLACKWELL_MOE)
def test_blackwell_moe_adapters_skip_on_a_cpu_host(name: str) -> None:
    """Not `supports_cpu`: on a CPU worker they end in `skip` (or a load answer), never a crash."""
    from fp4doctor.smoke import harness
    from fp4doctor.smoke.adapters import load_adapter

    result = harness.run_adapter(load_adapter(name), "cpu")
    assert result.status in ("skip", "fail"), result
    if result.status == "skip":
        named = ("needs a CUDA GPU", "not installed", "CuTe DSL")
        assert any(words in result.reason for words in named), result.reason


def test_trtllm_moe_asks_flashinfers_own_predicate_below_blackwell(
    monkeypatch: pytest.MonkeyPatch, fake_blackwell_moe: FakeBlackwellMoe
) -> None:
    """FAKE flashinfer.fused_moe.core.is_trtllm_moe_supported answering False (its answer on an
    SM90 GPU): the adapter refuses before launching and names the predicate."""
    from fp4doctor.smoke.adapters import Refused
    from fp4doctor.smoke.adapters.flashinfer_trtllm_moe import TRTLLM

    asked: list[tuple[Any, Any]] = []
    core = types.ModuleType("flashinfer.fused_moe.core")
    core.is_trtllm_moe_supported = lambda w, a: asked.append((w, a)) or False  # type: ignore[attr-defined]
    enums = types.ModuleType("flashinfer.tllm_enums")
    enums.DtypeTrtllmGen = types.SimpleNamespace(E2m1="E2m1 (fake)")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flashinfer.fused_moe.core", core)
    monkeypatch.setitem(sys.modules, "flashinfer.tllm_enums", enums)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda _d=None: (9, 0))
    with pytest.raises(
        Refused, match=r"is_trtllm_moe_supported\(E2m1, E2m1\) is False on compute capability 9\.0"
    ):
        TRTLLM._refuse_unsupported_gpu(torch.device("cuda", 0))
    assert asked == [("E2m1 (fake)", "E2m1 (fake)")]
    assert fake_blackwell_moe.calls == []


def test_cutedsl_moe_asks_flashinfers_declared_capabilities(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FAKE function carrying FlashInfer's @supported_compute_capability([100, 103, 107])."""
    from fp4doctor.smoke.adapters import Refused
    from fp4doctor.smoke.adapters.flashinfer_cutedsl_moe import FlashInferCuteDslMoe

    def fn() -> None: ...

    fn._supported_ccs = {100, 103, 107}  # type: ignore[attr-defined]
    fn.is_compute_capability_supported = lambda cc: cc in fn._supported_ccs  # type: ignore[attr-defined]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda _d=None: (9, 0))
    with pytest.raises(
        Refused, match=r"declared for compute capabilities \[100, 103, 107\].*not 90"
    ):
        FlashInferCuteDslMoe._refuse_unsupported_gpu(fn, torch.device("cuda", 0))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda _d=None: (10, 0))
    FlashInferCuteDslMoe._refuse_unsupported_gpu(fn, torch.device("cuda", 0))  # no refusal


# --- the layouts against the installed FlashInfer's own helpers (pure torch, any host) --------


def _real_flashinfer(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except Exception as exc:  # not installed, or it needs what this host lacks
        pytest.skip(f"{module} does not import here: {exc}")


def test_trtllm_moe_row_order_is_flashinfers(one_thread: None) -> None:
    from fp4doctor.smoke import moe
    from fp4doctor.smoke.adapters.flashinfer_moe import up_first
    from fp4doctor.smoke.adapters.flashinfer_trtllm_moe import shuffled_weights

    core = _real_flashinfer("flashinfer.fused_moe.core")
    case = moe.make_case(5, 256, 128, "cpu")
    w = up_first(case.w13.packed, case.inter)
    for gated, src in ((True, w), (False, case.w2.packed)):
        if gated:
            idx = core._maybe_get_cached_w3_w1_permute_indices({}, src[0], 128)
        else:
            idx = core.get_w2_permute_indices_with_cache({}, src[0], 128)
        assert torch.equal(shuffled_weights(src, gated=gated)[0], src[0][idx])


def test_cutedsl_moe_scale_view_is_flashinfers(one_thread: None) -> None:
    from fp4doctor.smoke import moe, nvfp4
    from fp4doctor.smoke.adapters.flashinfer_cutedsl_moe import mma_scales

    utils = _real_flashinfer("flashinfer.cute_dsl.utils")
    case = moe.make_case(5, 256, 128, "cpu")
    scales = case.w2.scales.view(torch.uint8)  # [E, H, I/16]
    experts, rows, cols = scales.shape
    swizzled = torch.stack([nvfp4.swizzle_128x4(s) for s in scales])
    theirs = utils.convert_sf_to_mma_layout(
        swizzled.reshape(experts * rows, cols), m=rows, k=cols * 16, num_groups=experts
    )
    ours = mma_scales(scales).view(torch.uint8)
    assert ours.shape == theirs.shape and ours.stride() == theirs.stride()
    assert torch.equal(ours, theirs)
