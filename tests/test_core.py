"""The doctor core and what it is built from: the kinds registry, profiles that reuse (modules,
era inheritance), era coverage, the one meaning of version ranges, and `diagnose`."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from fp4doctor import facts, profile
from fp4doctor.doctor import Outcome, Question, QuestionError, diagnose
from fp4doctor.profile import kinds
from fp4doctor.profile.kinds.base import Kind
from fp4doctor.profile.schema import parse
from fp4doctor.profile.yamlnode import ProfileError
from fp4doctor.versions import contains

HOSTS = Path(__file__).parent / "fixtures" / "hosts"

ENGINE = textwrap.dedent(
    """\
    schema: 1
    target: demo
    title: Demo
    engine:
      package: demo-engine
      newest_known: "1.2.0"
    include: [flashinfer]
    backends:
      fast:
        summary: the fast one
        native: true
        requires:
          - use: fi_cudnn_cc
          - package: demo-lib
            source: test
      slow:
        summary: the slow one
        native: false
    eras:
      - versions: ">=1.0,<1.1"
        source: test
        knobs:
          - env: DEMO_OLD
            type: bool
            values: {fast: "1"}
          - env: DEMO_BACKEND
            values: {fast: fast, slow: slow}
        auto:
          - backend: fast
          - backend: slow
      - versions: ">=1.1,<1.2"
        source: test
        drop: [DEMO_OLD]
        knobs:
          - cli: --demo-backend
            values: {fast: fast}
            before: DEMO_BACKEND
      - versions: ">=1.2"
        source: test
        knobs:
          - env: DEMO_BACKEND
            values: {slow: slow}
        auto:
          - backend: slow
    """
)


def demo(text: str = ENGINE) -> profile.Profile:
    return parse(text, "demo.yaml", profile.load_module)


def host(name: str) -> facts.HostFacts:
    return facts.load(HOSTS / f"{name}.json")


# --- kinds ---------------------------------------------------------------------------------------


def test_every_registered_kind_is_a_kind_under_its_own_key() -> None:
    assert kinds.KINDS, "no kinds registered"
    for key, kind in kinds.KINDS.items():
        assert issubclass(kind, Kind)
        assert kind.key == key


def test_an_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(KeyError, match="valid: package, compute_capability"):
        kinds.get("gpu_count")


def test_a_kind_names_the_packages_it_reads_and_the_probe_looks_them_up() -> None:
    p = demo()
    assert {"demo-engine", "demo-lib"} <= p.packages()
    vllm = profile.load("vllm")
    assert {"flashinfer-python", "nvidia-cudnn-frontend", "fbgemm-gpu-genai"} <= vllm.packages()


# --- profiles that reuse -------------------------------------------------------------------------


def test_eras_inherit_what_they_do_not_restate() -> None:
    first, second, third = demo().eras
    assert [k.name for k in first.knobs] == ["DEMO_OLD", "DEMO_BACKEND"]
    # dropped one, placed a new one before an inherited one, inherited the automatic order
    assert [k.name for k in second.knobs] == ["--demo-backend", "DEMO_BACKEND"]
    assert second.auto == first.auto
    # a restated knob replaces the inherited one in place; a new automatic order replaces
    assert [k.name for k in third.knobs] == ["--demo-backend", "DEMO_BACKEND"]
    assert third.knobs[1].values == {"slow": ("slow",)}
    assert [s.backend for s in third.auto] == ["slow"]


def test_an_included_module_brings_its_conditions() -> None:
    fast = demo().backends["fast"]
    assert isinstance(fast.requires[0].kind, kinds.Use)
    assert fast.requires[0].kind.name == "fi_cudnn_cc"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("include: [flashinfer]", "include: [nosuch]", "includes no shipped module 'nosuch'"),
        ("drop: [DEMO_OLD]", "drop: [DEMO_NEW]", "drops no knob of the era before"),
        ("before: DEMO_BACKEND", "before: NOSUCH", "'before: NOSUCH' names no knob"),
        ('">=1.1,<1.2"', '">=1.15,<1.2"', "does not start where the era before ends (<1.1)"),
        ('">=1.1,<1.2"', '">=1.0,<1.2"', "does not start where the era before ends (<1.1)"),
        ('">=1.2"', '">=1.2,<1.2.0"', "is empty"),
        ('">=1.2"', '">=1.2,<1.2.0"', "demo.yaml:"),
        ('">=1.0,<1.1"', '"==1.0"', "is not a range of the form '>=A,<B'"),
    ],
)
def test_malformed_reuse_and_coverage_is_refused_with_file_and_line(
    old: str, new: str, message: str
) -> None:
    assert old in ENGINE
    with pytest.raises(ProfileError) as info:
        demo(ENGINE.replace(old, new, 1))
    assert message in str(info.value)
    assert str(info.value).startswith("demo.yaml:")


def test_eras_must_reach_the_newest_known_version() -> None:
    text = ENGINE.replace('">=1.2"', '">=1.2,<1.2.0.1"').replace('"1.2.0"', '"1.3.0"')
    with pytest.raises(ProfileError, match=r"ends below engine\.newest_known 1\.3\.0"):
        demo(text)


@pytest.mark.parametrize("target", profile.builtin_names())
def test_shipped_profiles_validate_from_the_command_line(target: str) -> None:
    p = profile.load(target)
    assert p.eras and p.backends


# --- one meaning of a version in a range ---------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "version", "inside"),
    [
        (">=0.5.10", "0.5.10rc0", True),  # a candidate of 0.5.10 is judged as 0.5.10
        ("<0.5.10", "0.5.10rc0", False),
        (">=0.7.0", "0.7.2+cu128", True),  # local builds
        ("==0.6.12", "0.6.12.post1", True),  # post-releases belong to their release
        (">=1.2.0rc5", "1.2.0rc4", False),  # a boundary inside the candidates is honoured
        (">=1.2.0rc5", "1.2.0rc5", True),
        (">=1.2.0rc0,<1.2.0rc5", "1.2.0rc3", True),
        (">=1.2.0rc5", "1.2.0", True),
        (">=0.5.5.post3", "0.5.5.post2", False),  # and inside a release's post-releases
        (">=0.5.5.post3", "0.5.5.post3", True),
        ("<0.5.5.post3", "0.5.5", True),
    ],
)
def test_a_version_is_judged_by_its_release(spec: str, version: str, inside: bool) -> None:
    assert contains(SpecifierSet(spec), version) is inside


def test_an_unreadable_version_is_none_not_an_exception() -> None:
    assert contains(SpecifierSet(">=1"), "not-a-version") is None


# --- the core ------------------------------------------------------------------------------------


def test_diagnose_returns_an_immutable_report_with_one_outcome() -> None:
    # The dense linear family (this fixture's MoE family is NOT READY as set: tests/test_moe.py)
    report = diagnose(Question(facts_file=str(HOSTS / "b200.json"), family="linear"))
    assert report.outcome is Outcome.READY and report.ready
    assert report.outcome.exit_code == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.engine = None  # type: ignore[misc]
    assert isinstance(report.families[0].evaluation.verdicts["cutlass"].findings, tuple)


def test_a_version_older_than_the_profile_covers_gets_no_verdict() -> None:
    report = diagnose(Question(facts_file=str(HOSTS / "b200.json"), engine_version="0.1"))
    assert report.outcome is Outcome.NO_VERDICT
    assert report.outcome.exit_code == 3
    assert "older than any version this profile covers" in (report.engine.note or "")


def test_a_version_newer_than_the_profile_knows_is_judged_and_said() -> None:
    report = diagnose(
        Question(
            facts_file=str(HOSTS / "b200-vllm-0.33.json"), engine_version="0.99", family="linear"
        )
    )
    assert report.outcome is Outcome.READY
    assert "newer than this profile knows" in (report.engine.note or "")


def test_ignore_downgrades_once_and_validity_follows_it() -> None:
    path = str(HOSTS / "h200.json")
    before = diagnose(Question(facts_file=path, target="vllm"))
    assert not before.families[0].evaluation.valid("cutlass")
    after = diagnose(Question(facts_file=path, target="vllm", ignore=("backend.cutlass",)))
    assert after.families[0].evaluation.valid("cutlass")
    ignored = [f for f in after.findings() if f.ignored]
    assert ignored and all(f.reason.count("(ignored)") == 1 for f in ignored)


def test_a_bad_question_is_a_question_error_naming_the_valid_choices() -> None:
    with pytest.raises(QuestionError, match="valid: "):
        diagnose(Question(facts_file=str(HOSTS / "b200.json"), prefer="nosuch"))
    with pytest.raises(QuestionError, match="is not a version"):
        diagnose(Question(facts_file=str(HOSTS / "b200.json"), engine_version="latest"))


def test_a_user_profile_for_its_own_engine_sees_its_installed_version(tmp_path: Path) -> None:
    """The probe looks up the packages the loaded profile reads: a user's engine included."""
    site = tmp_path / "site"
    dist = site / "my_engine-2.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-engine\nVersion: 2.1.0\n")
    user = tmp_path / "my-engine.yaml"
    user.write_text(
        ENGINE.replace("target: demo", "target: my-engine")
        .replace("package: demo-engine", "package: my-engine")
        .replace('"1.2.0"', '"2.1.0"')
    )
    from fp4doctor.probe.packages import probe_packages

    found = probe_packages(path=[str(site)], names=demo().packages() | {"my-engine"})
    assert found.version("my-engine") == "2.1.0"
    snapshot = json.loads(json.dumps(facts.to_dict(host("b200"))))
    snapshot["packages"]["versions"]["my-engine"] = "2.1.0"
    facts_file = tmp_path / "host.json"
    facts_file.write_text(json.dumps(snapshot))
    report = diagnose(
        Question(target="my-engine", profiles=(str(user),), facts_file=str(facts_file))
    )
    assert report.engine.version == "2.1.0"
    assert report.engine.source == "installed"


# --- when no knob helps, and families -------------------------------------------------------------


def test_a_backend_the_engine_cannot_reach_is_not_valid_and_the_package_fix_is_given() -> None:
    # A100 with vLLM 0.10.1.1 and FlashInfer installed: vLLM picks flashinfer-cutlass whenever
    # FlashInfer imports and has no knob for Marlin, which alone would run here.
    report = diagnose(Question(facts_file=str(HOSTS / "a100.json")))
    assert not report.families[0].evaluation.valid("marlin")
    knob = next(
        f
        for f in report.families[0].evaluation.verdicts["marlin"].findings
        if f.id.endswith(".knob")
    )
    assert knob.fix is not None and "pip uninstall flashinfer-python" in knob.fix
    choice = next(f for f in report.families[0].resolution.findings if f.id == "resolve.choice")
    assert choice.status.blocking and choice.fix == knob.fix
    assert report.outcome is Outcome.NOT_READY


@pytest.mark.parametrize(
    ("version", "chosen"), [("0.5.12", "sgl-cutlass"), ("0.5.20", "flashinfer-cutlass")]
)
def test_prefer_names_a_family_and_tries_each_member(version: str, chosen: str) -> None:
    question = Question(
        facts_file=str(HOSTS / "b200.json"),
        target="sglang",
        engine_version=version,
        prefer="cutlass",
    )
    report = diagnose(question)
    assert report.families[0].resolution.chosen == chosen
