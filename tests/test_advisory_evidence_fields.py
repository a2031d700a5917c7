"""The issue-39 fields of the advisories re-read on branch adv-b, checked as written.

Until the parser of the new keys (branch adv-a: `evidence`, `no_lower_bound` and the new trigger
kinds) is merged, the shipped parser refuses them, so this test reads profiles/advisories.yaml as
plain YAML and checks the entries from `flashinfer-shuffle-sf-k-mod-4-assert` to the end: every
one has an evidence level, a lower bound or the reason it has none, a trigger whose keys are the
agreed ones with well-formed values, and no commit-message entry lacks a trigger that could block.
Once adv-a's parser is in, its own tests enforce the same over every entry and this one can go.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.specifiers import SpecifierSet

LEDGER = Path(__file__).resolve().parent.parent / "profiles" / "advisories.yaml"
FIRST = "flashinfer-shuffle-sf-k-mod-4-assert"
EVIDENCE = ("reproduced", "fix-diff", "commit-message")
POSITIVE = ("ep_min", "tp_min", "dp_min", "concurrency_min", "experts_min")
MULTIPLE = ("k_sf_not_multiple_of", "k_not_multiple_of", "n_not_multiple_of")
SWITCHES = ("autotune", "cuda_graphs", "autotune_cache")
TEXTS = ("depends_on", "data", "always")
TRIGGER_KEYS = (*POSITIVE, *MULTIPLE, *SWITCHES, *TEXTS, "scheme", "all2all", "dtype", "model_arch")
ENTRY_KEYS = (
    "id", "family", "effect", "package", "versions", "no_lower_bound", "compute_capability",
    "cuda_runtime", "backends", "targets", "when", "trigger", "shapes", "reason", "fixed_in",
    "workaround", "alternatives", "source", "fix_source", "evidence", "verified",
)  # fmt: skip
# The ids of this branch's entries whose evidence is only a commit message or a code comment
# (reported to the lead; they never block).
COMMIT_MESSAGE_ONLY = {
    "flashinfer-cudnn-gemm-autotune-cached-plan-index",
    "flashinfer-autotuner-cross-runner-plan",
    "flashinfer-cutedsl-moe-autotune-replay-deadlock",
    "sglang-marlin-moe-shared-workspace-graph-capture-deadlock",
}


def mine() -> list[dict[str, Any]]:
    entries = yaml.safe_load(LEDGER.read_text(encoding="utf-8"))["advisories"]
    ids = [e["id"] for e in entries]
    return list(entries[ids.index(FIRST) :])


ENTRIES = mine()


def test_the_branch_reread_thirty_entries() -> None:
    assert len(ENTRIES) == 30  # 29 re-read, 1 split off (b12x EP for W4A4 from 0.7.1)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["id"])
def test_entry_fields(entry: dict[str, Any]) -> None:
    assert set(entry) <= set(ENTRY_KEYS), set(entry) - set(ENTRY_KEYS)
    assert entry["evidence"] in EVIDENCE
    spec = SpecifierSet(entry["versions"])
    lower = any(s.operator in (">=", ">", "==", "~=", "===") for s in spec)
    reason = entry.get("no_lower_bound")
    assert lower != bool(reason), "a lower bound in versions, or no_lower_bound with its reason"
    assert reason is None or (isinstance(reason, str) and len(reason) > 20)
    assert "Re-read for issue 39" in entry["verified"]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["id"])
def test_trigger_keys_are_the_agreed_ones(entry: dict[str, Any]) -> None:
    trigger = entry.get("trigger")
    assert isinstance(trigger, dict) and trigger, "every entry names its mechanism"
    assert set(trigger) <= set(TRIGGER_KEYS), set(trigger) - set(TRIGGER_KEYS)
    for key, value in trigger.items():
        if key in POSITIVE or key in MULTIPLE:
            assert isinstance(value, int) and not isinstance(value, bool) and value >= 1, key
        elif key in SWITCHES:
            assert isinstance(value, bool), key
        elif key in TEXTS:
            assert isinstance(value, str) and value.strip(), key
        elif key == "scheme":
            assert value in ("w4a4", "w4a16")
        elif key == "dtype":
            assert isinstance(value, list) and set(value) <= {"float16", "bfloat16"}
        else:  # all2all, model_arch
            assert isinstance(value, list) and value and all(isinstance(v, str) for v in value)


def test_commit_message_entries_are_the_reported_ones() -> None:
    found = {e["id"] for e in ENTRIES if e["evidence"] == "commit-message"}
    assert found == COMMIT_MESSAGE_ONLY


def test_no_inline_advisory_repeats_the_ledger() -> None:
    """The inline sm120_zeros / sm120_nan advisories repeated ledger entries
    (flashinfer-nvfp4-quantize-nonfp32-global-scale-zeros, flashinfer-cutlass-fp4-gemm-pdl-nan-
    under-concurrency) with proxy conditions; one rule lives in one place."""
    profiles = LEDGER.parent
    for name in ("vllm.yaml", "sglang.yaml", "flashinfer.yaml"):
        text = (profiles / name).read_text(encoding="utf-8")
        assert "sm120_zeros" not in text and "sm120_nan" not in text, name
