"""Issue 39: advisories that hold up. Every entry of the data set states its evidence, a lower
bound (or why none) and a trigger; every trigger key is one the question, the host facts or the
model settles; one severity policy decides blocks vs warns; the four entries that blocked with no
trigger now name their mechanism."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fp4doctor import checkpoint, profile
from fp4doctor.deployment import DeployedGemm, Deployment
from fp4doctor.doctor import Question
from fp4doctor.findings import Status
from fp4doctor.profile import triggers
from fp4doctor.profile.advisories import EVIDENCE, KnownIssue, parse
from fp4doctor.profile.model import EFFECT_CRASH, EFFECT_SLOW, EFFECT_WRONG_OUTPUT
from fp4doctor.profile.triggers import KINDS, Settled
from fp4doctor.profile.yamlnode import ProfileError
from fp4doctor.rules.severity import severity

CHECKPOINTS = Path(__file__).parent / "fixtures" / "checkpoints"
HOSTS = Path(__file__).parent / "fixtures" / "hosts"
HOLDS, OUT, UNKNOWN = Settled.HOLDS, Settled.RULED_OUT, Settled.UNKNOWN


def known(issue_id: str) -> KnownIssue:
    return next(i for i in profile.known_issues() if i.id == issue_id)


def test_every_advisory_states_evidence_a_lower_bound_and_a_trigger() -> None:
    for issue in profile.known_issues():
        assert issue.evidence in EVIDENCE, issue.id
        lower = any(s.operator in (">", ">=", "==", "~=", "===") for s in issue.versions)
        assert lower != bool(issue.no_lower_bound), issue.id  # one or the other, never both
        assert issue.trigger.conditions, issue.id


# Where each trigger key is settled: the Deployment field it reads, and what fills that field.
SETTLED_BY = {
    "tp": "the question (--tp; the engine's command line)",
    "ep": "the question (--ep; the engine's command line)",
    "dp": "the engine's command line (--data-parallel-size)",
    "concurrency": "the question (--concurrency)",
    "autotune": "the question (--autotune) or the release's default (profiles/coldstart.yaml)",
    "autotune_cache": "the release's autotune rule (profiles/coldstart.yaml), with autotune",
    "cuda_graphs": "the question (--cuda-graphs) or the engine's default",
    "all2all": "the engine's command line (--all2all-backend)",
    "dtype": "the engine's command line (--dtype) or the GPU",
    "architectures": "the model (--model: config.json)",
    "experts": "the model (--model: its MoE layers)",
    "gemms": "the model (--model, with --tp/--ep: each rank's NVFP4 GEMMs)",
}
NOTHING_SETTLES = {"depends_on", "data", "always"}


@pytest.mark.parametrize("key", sorted(KINDS))
def test_every_trigger_key_is_settled_by_the_question_the_facts_or_the_model(key: str) -> None:
    kind = KINDS[key]
    fields = {f.name for f in dataclasses.fields(Deployment)}
    if key in NOTHING_SETTLES:
        assert kind.SETTLED_BY is None
        return
    assert kind.SETTLED_BY in fields, key
    assert kind.SETTLED_BY in SETTLED_BY, key


def test_the_model_fills_the_fields_its_triggers_read() -> None:
    ckpt = checkpoint.load(str(CHECKPOINTS / "qwen3-30b-a3b-nvfp4a16"))
    deployment = Question(tp=4).deployment(ckpt)
    assert deployment.architectures and deployment.experts == 128
    assert deployment.gemms is not None
    assert {(g.family, g.scheme) for g in deployment.gemms} == {
        ("linear", "W4A16"),
        ("moe", "W4A16"),
    }
    assert DeployedGemm("moe", "W4A16", 384, 2048) in deployment.gemms  # per rank at TP 4
    assert Question().deployment(None).gemms is None  # no model: not established


# The policy table: (effect, evidence, trigger settled) -> status.
POLICY = [
    (EFFECT_CRASH, "reproduced", HOLDS, Status.FAIL),
    (EFFECT_WRONG_OUTPUT, "fix-diff", HOLDS, Status.FAIL),
    (EFFECT_CRASH, None, HOLDS, Status.FAIL),  # a profile's own advisory states its rule
    (EFFECT_CRASH, "commit-message", HOLDS, Status.WARN),  # never blocks
    (EFFECT_CRASH, "reproduced", UNKNOWN, Status.WARN),
    (EFFECT_WRONG_OUTPUT, "fix-diff", UNKNOWN, Status.WARN),
    (EFFECT_CRASH, "reproduced", OUT, Status.PASS),
    (EFFECT_CRASH, "commit-message", OUT, Status.PASS),
    (EFFECT_SLOW, "reproduced", HOLDS, Status.WARN),
    (EFFECT_SLOW, "reproduced", OUT, Status.PASS),
]


@pytest.mark.parametrize(("effect", "evidence", "settled", "status"), POLICY)
def test_the_severity_policy(
    effect: str, evidence: str | None, settled: Settled, status: Status
) -> None:
    judged = severity(in_range=True, effect=effect, evidence=evidence, settled=settled)
    assert judged is not None and judged.status is status
    assert (judged.held_back is not None) == (evidence == "commit-message" and settled is HOLDS)
    assert severity(in_range=False, effect=effect, evidence=evidence, settled=settled) is None


@pytest.mark.parametrize("unsettled", ["data: 'tiny scales'", "depends_on: 'the caller'"])
def test_a_data_or_caller_condition_never_establishes_a_trigger(unsettled: str) -> None:
    trig = _trigger(f"{{autotune: true, {unsettled}}}")
    assert trig.judge(Deployment(autotune=True))[0] is UNKNOWN
    assert not trig.settleable
    assert trig.settle(Deployment(autotune=True)) is None  # nothing to pass: no choice moves


def test_no_commit_message_entry_can_block() -> None:
    for issue in profile.known_issues():
        if issue.evidence == "commit-message":
            judged = severity(
                in_range=True, effect=issue.effect, evidence=issue.evidence, settled=HOLDS
            )
            assert judged is not None and judged.status is not Status.FAIL, issue.id


def _trigger(text: str) -> triggers.Trigger:
    from fp4doctor.profile.schema import compose

    return triggers.parse(compose(f"t: {text}\n", "t.yaml").mapping()["t"])


def _gemms(*rows: tuple[str, str, int, int]) -> Deployment:
    return Deployment(gemms=tuple(DeployedGemm(*r) for r in rows))


def test_shape_triggers_read_the_per_rank_gemms_of_the_advisorys_family() -> None:
    # K/16 % 4: K = 2688 gives 168 scale columns (a multiple of 4); K = 464 gives 29.
    trig = _trigger("{k_sf_not_multiple_of: 4}")
    rank = _gemms(("linear", "W4A4", 928, 2688), ("moe", "W4A4", 2688, 464))
    assert trig.judge(rank, "moe")[0] is HOLDS
    assert trig.judge(rank, "linear")[0] is OUT
    assert trig.judge(Deployment(), "moe")[0] is UNKNOWN  # no --model
    assert _trigger("{k_not_multiple_of: 256}").judge(rank, "linear")[0] is HOLDS
    assert _trigger("{n_not_multiple_of: 32}").judge(rank, "linear")[0] is OUT


def test_the_scheme_trigger_reads_the_family_and_a_mixed_model_holds_both() -> None:
    mixed = _gemms(("linear", "W4A16", 64, 64), ("moe", "W4A4", 64, 64), ("moe", "W4A16", 64, 64))
    assert _trigger("{scheme: w4a4}").judge(mixed, "linear")[0] is OUT
    assert _trigger("{scheme: w4a4}").judge(mixed, "moe")[0] is HOLDS
    assert _trigger("{scheme: w4a16}").judge(mixed, "moe")[0] is HOLDS


def test_deployment_field_triggers() -> None:
    d = Deployment(dp=4, all2all="deepep_low_latency", dtype="float16", autotune_cache=False)
    assert _trigger("{dp_min: 2}").judge(d)[0] is HOLDS
    assert _trigger("{all2all: [deepep_high_throughput]}").judge(d)[0] is OUT
    assert _trigger("{dtype: [float16]}").judge(d)[0] is HOLDS
    assert _trigger("{autotune_cache: true}").judge(d)[0] is OUT
    assert _trigger("{experts_max: 39}").judge(Deployment(experts=8))[0] is HOLDS
    assert _trigger("{always: 'every call'}").judge(Deployment())[0] is HOLDS
    with pytest.raises(ProfileError, match="one of: float16, bfloat16"):
        _trigger("{dtype: [fp32]}")
    with pytest.raises(ProfileError, match="stands alone"):
        _trigger("{always: 'x', autotune: true}")


def test_the_autotune_file_cache_is_kept_only_where_the_release_reads_it_back() -> None:
    from fp4doctor.coldstart import rules

    r = rules.load()
    in_memory = r.autotune_for("vllm", "0.22.0")
    single = r.autotune_for("vllm", "0.25.0")
    per_rank = r.autotune_for("vllm", "0.33.0")
    assert in_memory is not None and in_memory.keeps_file(True, 1) is False
    assert single is not None and single.keeps_file(True, 1) is True
    assert single.keeps_file(True, 2) is False and single.keeps_file(True, None) is None
    assert per_rank is not None and per_rank.keeps_file(True, 8) is True
    assert per_rank.keeps_file(False, 8) is False and per_rank.keeps_file(None, 8) is None


ENTRY = """\
schema: 1
advisories:
  - id: x
    family: linear
    effect: crash
    package: flashinfer-python
    versions: "{versions}"
    backends: [flashinfer-cutlass]
    reason: r
    source: https://github.com/o/r/issues/1
{extra}"""


@pytest.mark.parametrize(
    ("versions", "extra", "message"),
    [
        (
            "<0.6",
            "    evidence: fix-diff\n    trigger: {always: y}\n",
            r":7: 'advisories\[0\]\.versions' '<0.6' has no lower bound",
        ),
        (
            ">=0.5,<0.6",
            "    trigger: {always: y}\n",
            r":3: 'advisories\[0\]' is missing the required key 'evidence'",
        ),
        (
            ">=0.5,<0.6",
            "    evidence: guess\n    trigger: {always: y}\n",
            r"'advisories\[0\]\.evidence' is 'guess'",
        ),
        (
            ">=0.5,<0.6",
            "    evidence: fix-diff\n",
            r":3: 'advisories\[0\]' is missing the required key 'trigger'",
        ),
        (
            ">=0.5,<0.6",
            "    evidence: fix-diff\n    no_lower_bound: z\n    trigger: {always: y}\n",
            "contradicts",
        ),
    ],
)
def test_a_malformed_entry_names_file_line_and_key(versions: str, extra: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        parse(ENTRY.format(versions=versions, extra=extra), "adv.yaml")
    ok = ENTRY.format(
        versions="<0.6",
        extra="    evidence: fix-diff\n    no_lower_bound: z\n    trigger: {always: y}\n",
    )
    assert parse(ok, "adv.yaml")[0].no_lower_bound == "z"


# The four entries that had shapes and no trigger, and blocked on every run (issue 39).
W4A4_MOE = _gemms(("moe", "W4A4", 1536, 2048))
W4A16_MOE = _gemms(("moe", "W4A16", 1536, 2048))


def test_b12x_quant_numerics_needs_w4a4_experts_and_warns_on_the_data() -> None:
    issue = known("flashinfer-b12x-moe-fp4-quant-numerics")
    assert issue.trigger.judge(W4A16_MOE, "moe")[0] is OUT  # no activation quantizer runs
    settled, known_text = issue.trigger.judge(W4A4_MOE, "moe")
    assert settled is UNKNOWN and "data/load" in known_text
    assert "depends on the data/load: tiny" in issue.trigger.describe()


def test_cudnn_override_shape_nan_needs_the_autotuner() -> None:
    issue = known("flashinfer-cudnn-fp4-override-shape-nan")
    assert issue.trigger.judge(Deployment(autotune=False), "linear")[0] is OUT
    assert issue.trigger.judge(Deployment(autotune=True), "linear")[0] is HOLDS
    assert issue.evidence == "fix-diff"
    assert ("nvidia-cudnn-frontend", ">=1.20") in [(d, str(s)) for d, s in issue.when]


def test_b12x_microkernel_workspace_needs_fewer_experts_than_the_micro_cutover() -> None:
    issue = known("flashinfer-b12x-moe-microkernel-workspace")
    assert issue.trigger.judge(Deployment(experts=128), "moe")[0] is OUT
    assert issue.trigger.judge(Deployment(experts=8), "moe")[0] is HOLDS
    assert issue.trigger.judge(Deployment(), "moe")[0] is UNKNOWN


def test_vllm_sm12x_cutlass_illegal_instruction_is_graph_capture_and_never_blocks() -> None:
    issue = known("vllm-sm12x-nvfp4-cutlass-illegal-instruction")
    assert issue.trigger.judge(Deployment(cuda_graphs=False), "linear")[0] is OUT
    assert issue.evidence == "commit-message"
    judged = severity(in_range=True, effect=issue.effect, evidence=issue.evidence, settled=HOLDS)
    assert judged is not None and judged.status is Status.WARN


def test_the_doctor_settles_the_autotune_file_cache_from_the_release() -> None:
    from fp4doctor import facts
    from fp4doctor.doctor import _deployment

    host = facts.load(str(HOSTS / "b200-vllm-0.33.json"))  # vLLM 0.33: per-rank files
    prof = profile.load("vllm")

    def cache(**question: object) -> bool | None:
        return _deployment(Question(**question), None, prof, host).autotune_cache

    assert cache(autotune=True, tp=2) is True
    assert cache(autotune=False, tp=2) is False
    assert cache() is None  # the autotuner not settled here: neither is its file
    assert cache(autotune=True, tp=2, engine_version="0.22.0") is False  # tunes in memory


def test_check_with_a_w4a16_model_clears_the_w4a4_quantizer_bug() -> None:
    """End to end: `--model` fills the per-rank GEMMs, and the b12x activation quantizer's bug
    passes for weight-only experts and warns (never blocks) for W4A4 ones."""
    from fp4doctor.doctor import diagnose

    def statuses(model: str) -> set[str]:
        q = Question(facts_file=str(HOSTS / "rtx5090.json"), model=str(CHECKPOINTS / model))
        found = [f for p in diagnose(q).families for f in p.findings()]
        ident = "flashinfer-b12x-moe-fp4-quant-numerics"
        return {f.status.value for f in found if f.advisory == ident}

    assert statuses("qwen3-30b-a3b-nvfp4a16") == {"pass"}
    assert statuses("qwen3-30b-a3b-fp4") == {"warn"}
