"""The deployment as it will run (issue 38): the engine's command line and its defaults settle every
field a rule reads (fp4doctor/settle.py), `check` judges what the engine runs as set, and the
report says so first. Every case judges a fixture host (tests/fixtures/hosts/), so it means the
same on any machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fp4doctor.doctor import Outcome, Question, QuestionError, diagnose
from fp4doctor.findings import Status
from fp4doctor.settle import engine_flags, moe_by_name
from tests.test_cli import fixture, run

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
MOE_MODEL = "nvidia/Qwen3-30B-A3B-FP4"  # not in any cache: counted as MoE by its name
DENSE_MODEL = "nvidia/Llama-3.3-70B-Instruct-FP4"


def deployment(**question: object):  # type: ignore[no-untyped-def]
    report = diagnose(Question(**question))  # type: ignore[arg-type]
    return report, report.families[0].evaluation.context.deployment


# --- defaults are facts ---------------------------------------------------------------------


def test_the_engines_defaults_settle_every_field_and_say_where_they_come_from() -> None:
    _, d = deployment(facts_file=fixture("b200"), engine=False)
    assert (d.tp, d.ep, d.autotune, d.cuda_graphs) == (1, 1, True, True)
    assert d.origin("autotune") is not None and "vLLM 0.15.1 default" in d.origin("autotune")
    assert "--enforce-eager" in (d.origin("cuda_graphs") or "")
    assert d.concurrency is None and d.origin("concurrency") is None  # the load: not said


def test_autotune_off_where_the_release_has_no_switch_is_not_believed() -> None:
    # vLLM 0.15.1 tunes at every start with no knob to skip it (profiles/coldstart.yaml).
    _, d = deployment(facts_file=fixture("b200"), autotune=False, engine=False)
    assert d.autotune is True
    assert any("cannot be honoured" in n for n in d.notes)


def test_the_releases_switch_on_the_command_line_turns_autotune_off_everywhere() -> None:
    report, d = deployment(
        facts_file=fixture("b200-vllm-0.33"),
        command=("vllm", "serve", DENSE_MODEL, "--no-enable-flashinfer-autotune"),
        engine=False,
    )
    assert d.autotune is False and "--no-enable-flashinfer-autotune" in (d.origin("autotune") or "")
    for part in report.families:
        assert part.cold_start is not None and part.cold_start.autotune.state != "will-tune"


@pytest.mark.parametrize("host", sorted(p.stem for p in HOSTS.glob("*.json")))
def test_no_report_says_will_tune_and_autotune_not_established(host: str) -> None:
    p = run("check", "--no-engine", "--facts", fixture(host), "--json")
    if p.returncode == 3 or not p.stdout:
        pytest.skip(f"{host}: no verdict")
    doc = json.loads(p.stdout)
    tunes = any(
        (fam.get("cold_start") or {}).get("autotune", {}).get("state") == "will-tune"
        for fam in doc["families"].values()
    )
    unsettled = [f for f in doc["findings"] if "no --autotune on|off given" in f["reason"]]
    assert not (tunes and unsettled), unsettled[:1]


def test_no_flashinfer_means_nothing_to_tune() -> None:
    _, d = deployment(facts_file=fixture("b200-no-flashinfer"), engine_version="0.18.0",
                      engine=False)  # fmt: skip
    assert d.autotune is False and "no FlashInfer" in (d.origin("autotune") or "")


# --- the command line is the question -------------------------------------------------------


def test_the_command_line_settles_tp_ep_and_the_model() -> None:
    report, d = deployment(
        facts_file=fixture("b200-vllm-0.33"),
        command=("vllm", "serve", MOE_MODEL, "-tp", "4", "--enable-expert-parallel"),
        engine=False,
    )
    assert (d.tp, d.ep) == (4, 4)
    assert d.origin("tp") == "set by -tp 4"
    assert report.question.model == MOE_MODEL
    assert any("judged without the model's checkpoint" in n for n in d.notes)
    assert all(p in report.counted for p in report.families)  # MoE by its name


def test_a_flag_the_release_does_not_have_is_a_usage_error() -> None:
    with pytest.raises(QuestionError, match="--moe-backend"):
        command = ("vllm", "serve", MOE_MODEL, "--moe-backend", "cutlass")
        diagnose(Question(facts_file=fixture("b200"), engine=False, command=command))
    p = run("check", "--facts", fixture("b200"), "--", "vllm", "serve", "M", "--moe-backend=x")
    assert p.returncode == 2 and p.stdout == "" and len(p.stderr.strip().splitlines()) == 1


def test_fp4doctor_options_that_contradict_the_command_line_are_a_usage_error() -> None:
    with pytest.raises(QuestionError, match="disagrees"):
        diagnose(Question(facts_file=fixture("b200-vllm-0.33"), tp=2, engine=False,
                          command=("vllm", "serve", DENSE_MODEL, "-tp", "4")))  # fmt: skip


def test_a_target_the_command_line_contradicts_is_a_usage_error() -> None:
    with pytest.raises(QuestionError, match="starts vllm"):
        diagnose(Question(facts_file=fixture("b200"), target="sglang", engine=False,
                          command=("vllm", "serve", DENSE_MODEL)))  # fmt: skip


def test_engine_flags_reads_both_spellings_and_the_last_one_wins() -> None:
    flags = engine_flags(["vllm", "serve", "M", "--linear_backend", "a", "--moe-backend=b",
                          "--enforce-eager", "--linear-backend=c"])  # fmt: skip
    assert flags == {"--linear-backend": "c", "--moe-backend": "b", "--enforce-eager": "true"}


# --- one contract: as set -------------------------------------------------------------------


def test_vllm_0_18_without_flashinfer_fails_as_set_and_env_fixes_it() -> None:
    """vLLM 0.17-0.19.1 without FlashInfer stops at load on an NVFP4 MoE model (its automatic
    MoE walk imports the TRT-LLM experts module); the knobs `env` writes make it run."""
    host = fixture("b200-no-flashinfer")
    command = ["--", "vllm", "serve", MOE_MODEL, "-tp", "2"]
    p = run("check", "--facts", host, "--engine-version", "0.18.0", *command)
    assert p.returncode == 1, p.stdout
    assert "as set, vLLM 0.18.0 picks flashinfer-trtllm-moe" in p.stdout
    env = run("env", "--facts", host, "--engine-version", "0.18.0", "--shell", "json", *command)
    assert env.returncode == 0, env.stderr
    words = json.loads(env.stdout)["set"]["FP4DOCTOR_VLLM_ARGS"].split()
    fixed = run("check", "--facts", host, "--engine-version", "0.18.0", *command, *words)
    assert fixed.returncode == 0, fixed.stdout


def test_a_flag_that_selects_a_backend_that_cannot_run_fails_naming_the_flag() -> None:
    p = run("check", "--facts", fixture("b200-vllm-0.33"), "--family", "linear", "--",
            "vllm", "serve", DENSE_MODEL, "--linear-backend", "flashinfer-b12x")  # fmt: skip
    assert p.returncode == 1
    assert "--linear-backend flashinfer_b12x makes vLLM 0.33.0 use flashinfer-b12x" in p.stdout


def test_json_gives_as_set_and_best_per_family() -> None:
    p = run("check", "--facts", fixture("b200-no-flashinfer"), "--engine-version", "0.18.0",
            "--json", "--", "vllm", "serve", MOE_MODEL)  # fmt: skip
    doc = json.loads(p.stdout)
    moe = doc["families"]["moe"]
    assert moe["as_set"]["backend"] == "flashinfer-trtllm-moe" and moe["as_set"]["runs"] is False
    assert moe["best"]["backend"] == moe["chosen"] == "cutlass-moe"
    assert doc["deployment"]["fields"]["tp"] == {"value": 1, "origin": "vLLM 0.18.0 default"}
    assert doc["deployment"]["command"] == ["vllm", "serve", MOE_MODEL]


@pytest.mark.parametrize("host", sorted(p.stem for p in HOSTS.glob("*.json")))
def test_json_junit_and_the_headline_name_the_same_choice(host: str) -> None:
    p = run("check", "--no-engine", "--facts", fixture(host), "--json")
    if not p.stdout:
        pytest.skip(f"{host}: no report")
    doc = json.loads(p.stdout)
    for name, fam in doc["families"].items():
        choice = [f for f in doc["findings"]
                  if f["id"] == ("resolve.choice" if name == "linear" else f"resolve.{name}.choice")
                  and f["status"] == "pass"]  # fmt: skip
        assert [f.get("backend") for f in choice] == ([fam["chosen"]] if fam["chosen"] else [])
        if fam["chosen"] and fam["counted"] and doc["ready"]:
            assert fam["chosen"] in doc["headline"]


def test_a_bare_require_binds_the_family_whose_backend_it_names() -> None:
    report = diagnose(Question(facts_file=fixture("b200-vllm-0.33"), require="cutlass",
                               engine=False))  # fmt: skip
    linear, moe = report.families
    assert linear.resolution.chosen == "cutlass"
    assert not any(f.id.startswith("resolve.moe.require") for f in moe.resolution.findings)


# --- which families decide ------------------------------------------------------------------


def test_without_a_model_the_moe_family_is_assumed_not_counted() -> None:
    report = diagnose(Question(facts_file=fixture("b200"), engine=False))
    assert [p.family for p in report.counted] == ["linear"]
    assert report.not_counted()[0].family == "moe"


@pytest.mark.parametrize(
    ("name", "moe"),
    [
        ("nvidia/DeepSeek-R1-FP4", True),
        ("nvidia/Qwen3-235B-A22B-FP4", True),
        ("RedHatAI/gpt-oss-120b-NVFP4", True),
        ("nvidia/Llama-4-Scout-17B-16E-Instruct-FP4", True),
        ("nvidia/Llama-3.3-70B-Instruct-FP4", False),
        ("Qwen/Qwen3-32B-FP4", False),
        ("a" * 100_000, False),
    ],
)
def test_a_models_name_tells_whether_it_has_experts(name: str, moe: bool) -> None:
    assert (moe_by_name(name) is not None) is moe


# --- a report a person reads ----------------------------------------------------------------


def test_the_b200_report_leads_with_the_verdict_and_fits_60_lines() -> None:
    p = run("check", "--no-engine", "--facts", fixture("b200"))
    lines = p.stdout.splitlines()
    assert len(lines) <= 60, len(lines)
    assert lines[2].startswith(("READY", "NOT READY"))  # after the title and a gap
    assert lines[-1].startswith("Checks:")


def test_ids_are_never_broken_across_lines() -> None:
    p = run("check", "--no-engine", "-v", "--facts", fixture("b200"))  # 80 columns
    doc = json.loads(run("check", "--no-engine", "--facts", fixture("b200"), "--json").stdout)
    ids = {f["advisory"] for f in doc["findings"] if f.get("advisory")}
    text = p.stdout
    for advisory in ids:
        assert advisory in text, advisory


def test_github_annotations_say_each_problem_once_for_every_gpu() -> None:
    p = run("check", "--no-engine", "--facts", fixture("b200"), "--format", "github", "-v")
    titles = [line.split("::", 2)[1] for line in p.stdout.splitlines() if line.startswith("::")]
    annotations = [t for t in titles if t.startswith(("error", "warning"))]
    assert len(annotations) == len(set(annotations))
    assert not any(".gpu" in t for t in annotations)


def test_the_report_status_of_an_as_set_failure_is_a_failure_not_a_warning() -> None:
    report = diagnose(Question(facts_file=fixture("b200-no-flashinfer"), engine_version="0.18.0",
                               model=MOE_MODEL, engine=False))  # fmt: skip
    assert report.outcome is Outcome.NOT_READY and report.env_makes_ready
    picked = [f for f in report.blocking() if f.id == "resolve.moe.engine_auto"]
    assert picked and picked[0].status is Status.FAIL
