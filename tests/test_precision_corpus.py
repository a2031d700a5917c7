"""The precision corpus: setups public sources report running NVFP4 correctly, replayed as tests.

Each case in tests/field/working/cases/ runs its `command` against working/hosts/<id>.json and must
end READY (exit 0) with, per family the source names, that backend as the doctor's choice (the
rule is in tests/field/corpus.py, `judge_working`). A false NOT READY here is a defect like a missed
crash.

KNOWN_FALSE_NOT_READY lists the cases the doctor gets wrong today, each with what blocks it. The
test asserts that set exactly: it fails when another case starts failing and when a listed one is
fixed (then take it out of the set), so the precision only moves on purpose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from field_loader import load_corpus

corpus = load_corpus()
WORKING = corpus.load_working()

# Case id -> what blocks READY today (advisory ids, or the rule/finding id), as of this commit.
KNOWN_FALSE_NOT_READY: dict[str, str] = {
    "fi-1959-rtxpro6000-0.4.1-mm-fp4-cutlass": (
        "flashinfer-cutlass-fp4-gemm-pdl-nan-under-concurrency (trigger: concurrent load)"
    ),
    "sglang-19081-b200-v0.5.9-dsv32-trtllm-tp4": (
        "flashinfer-trtllm-fp4-moe-int32-overflow-ep32 (EP>=32; here TP4), "
        "flashinfer-trtllm-moe-autotune-clusterdimz-wrong-output (autotune), "
        "flashinfer-trtllm-moe-route-map-oob (intermittent); --require judged 'as set'"
    ),
    "sglang-25054-b200-v0.5.12-gemma4-trtllm": (
        "flashinfer-trtllm-moe-minimax2-routed-scaling-ignored (MiniMax2 routing; Gemma 4 is not), "
        "flashinfer-trtllm-moe-route-map-oob (intermittent)"
    ),
    "sglang-26384-b200-v0.5.12-glm47-trtllm": (
        "flashinfer-trtllm-moe-minimax2-routed-scaling-ignored (MiniMax2 routing; GLM-4.7 is not), "
        "flashinfer-trtllm-moe-route-map-oob (intermittent)"
    ),
    "sglang-32229-gb200-v0.5.17-minimax-cutedsl": (
        "flashinfer-trtllm-moe-route-map-oob on the engine's auto pick although --require names "
        "flashinfer-cutedsl-moe"
    ),
    "sglang-32229-gb200-v0.5.17-minimax-fi-cutlass": (
        "flashinfer-trtllm-moe-route-map-oob on the engine's auto pick although --require names "
        "flashinfer-cutlass-moe"
    ),
    "vllm-28892-gb200x2-v0.12.0-trtllm-moe": (
        "backend.flashinfer-trtllm-moe.cubins (FlashInfer 0.5.3 downloads the cubins at run time "
        "without flashinfer-cubin), then the ep32, glm-routing, clusterdimz and route-map-oob "
        "advisories"
    ),
    "vllm-29242-rtx5090-v0.12.0-cutlass-moe": (
        "flashinfer-cutlass-fp4-gemm-pdl-nan-under-concurrency (trigger: concurrent load)"
    ),
    "vllm-33417-rtxpro6000-v0.15.1-fi-cutlass-moe": (
        "flashinfer-cutlass-fp4-gemm-pdl-nan-under-concurrency, "
        "flashinfer-cutlass-moe-pdl-sm12x-illegal-instruction (both: under load)"
    ),
    "vllm-club3090-rtx5090-v0.24.0-qwen36": (
        "flashinfer-nvfp4-quantize-nonfp32-global-scale-zeros (trigger: a non-float32 global scale)"
    ),
    "vllm-recipes-632-gb10-nemotron3-super": (
        "flashinfer-nvfp4-quantize-nonfp32-global-scale-zeros (trigger: a non-float32 global scale)"
    ),
    "vllm-spark-playbooks-gb10-v0.15.1-llama70b": (
        "flashinfer-cutlass-fp4-gemm-pdl-nan-under-concurrency (trigger: concurrent load)"
    ),
}


def test_precision_corpus_shape() -> None:
    """At least 30 cases, one id per file, every host snapshot loads and names its source."""
    from fp4doctor import facts

    assert len(WORKING) >= 30
    assert corpus.shape_problems(WORKING, corpus.WORKING_HOSTS_DIR) == []
    for case in WORKING:
        synthetic = facts.load(case.host_path).synthetic or ""
        assert synthetic.startswith("synthetic-from-source"), case.id
    assert set(KNOWN_FALSE_NOT_READY) <= {c.id for c in WORKING}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in WORKING])
def test_working_setup(case: Any) -> None:
    """READY with the source's backend, unless the case is a known false NOT READY (then not)."""
    verdict = corpus.judge_working(case)
    if case.id in KNOWN_FALSE_NOT_READY:
        assert not verdict.held, (
            f"{case.id} is READY now: take it out of KNOWN_FALSE_NOT_READY "
            f"(was: {KNOWN_FALSE_NOT_READY[case.id]})"
        )
        return
    assert verdict.held, (
        f"{case.id} ({case.link}): {verdict.explain()}\ncommand: fp4doctor {' '.join(case.argv())}"
    )


def test_working_case_format_is_checked(tmp_path: Path) -> None:
    """A working case must expect ready: true and may pick only linear/moe backends."""
    import yaml

    case = WORKING[0]
    data = yaml.safe_load(case.path.read_text(encoding="utf-8"))
    path = tmp_path / case.path.name
    bad_cases = (
        ({"expect": {"exit": 1}}, "ready"),
        ({"expect": {"ready": True, "pick": {"dense": "cutlass"}}}, "family"),
        ({"link": "github.com/x"}, "https"),
    )
    for bad, message in bad_cases:
        path.write_text(yaml.safe_dump({**data, **bad}), encoding="utf-8")
        with pytest.raises(corpus.CaseError, match=message):
            corpus.parse_working(path)
