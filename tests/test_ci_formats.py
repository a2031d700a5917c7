"""`check --format junit|github` (fp4doctor/ci_formats.py) and the workflow example that uses them.

JUnit is parsed with xml.etree and held to the shape the JUnit XML schema that Jenkins and GitLab
read gives it (testsuites > testsuite > testcase > failure | error | skipped | system-out, the
counts on each suite true); no JUnit validator package is installed here, so the structure is
checked directly. GitHub's workflow commands are checked line by line, escaping as actions/toolkit
does it; docs/examples/github-actions.yml is run step by step in a real bash against fixture hosts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import HOSTS_DIR

from fp4doctor import ci_formats, cli, render
from fp4doctor.doctor import Question, diagnose
from fp4doctor.findings import Status

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / "docs" / "examples" / "github-actions.yml"
READY, NOT_READY, NO_VERDICT = "b200-vllm-0.33", "cpu", "nvml-mismatch"


def host(name: str) -> str:
    return str(HOSTS_DIR / f"{name}.json")


def check(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, ["check", *args], env=env)
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    return result.exit_code, result.stdout, result.stderr


# --- the option ---------------------------------------------------------------------------------


def test_json_is_the_same_as_format_json() -> None:
    code, out, _ = check("--facts", host(READY), "--json")
    code2, out2, _ = check("--facts", host(READY), "--format", "json")
    assert (code, out) == (code2, out2) and json.loads(out)["outcome"] == "ready"


def test_json_with_another_format_is_a_usage_error() -> None:
    code, out, err = check("--facts", host(READY), "--json", "--format", "junit")
    assert code == 2 and out == ""
    assert err == "fp4doctor: error: --json is --format json: it cannot go with --format junit\n"


def test_an_unknown_format_names_the_choices() -> None:
    code, _, err = check("--facts", host(READY), "--format", "xml")
    assert code == 2
    assert "'text', 'json', 'junit', 'github'" in err and "Traceback" not in err


# --- JUnit ----------------------------------------------------------------------------------------

# The attributes the JUnit schema Jenkins reads allows (jenkinsci/junit-plugin, junit-10.xsd; its
# common subset with GitLab's parser): anything else would be dropped or refused.
SUITE_ATTRS = {"name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname"}
CASE_ATTRS = {"name", "classname", "time"}
CASE_CHILDREN = {"failure", "error", "skipped", "system-out", "system-err"}


def junit_of(name: str, *args: str) -> tuple[int, ET.Element, str]:
    code, out, _ = check("--facts", host(name), "--format", "junit", *args)
    assert out.startswith('<?xml version="1.0" encoding="UTF-8"?>\n') and out.isascii()
    return code, ET.fromstring(out), out


@pytest.mark.parametrize("name", [READY, NOT_READY, NO_VERDICT, "b200", "mixed"])
def test_junit_has_one_case_per_check_and_true_counts(name: str) -> None:
    code, root, _ = junit_of(name)
    report = diagnose(Question(facts_file=host(name), smoke=None))
    assert code == report.outcome.exit_code
    assert root.tag == "testsuites"
    cases = root.findall("testsuite/testcase")
    ids = [c.get("name") for c in cases]
    assert ids[0] == ci_formats.OUTCOME_ID  # then grouped by suite: the same ids, each once
    assert sorted(ids[1:]) == sorted(f.id for f in report.findings())
    for suite in root.findall("testsuite"):
        assert set(suite.attrib) <= SUITE_ATTRS and suite.get("name")
        own = suite.findall("testcase")
        assert suite.get("tests") == str(len(own))
        for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            assert suite.get(attr) == str(sum(1 for c in own if c.find(tag) is not None))
    for attr, tag in (("tests", None), ("failures", "failure"), ("errors", "error")):
        expected = len(cases) if tag is None else sum(1 for c in cases if c.find(tag) is not None)
        assert root.get(attr) == str(expected)
    by_id = {f.id: f for f in report.findings()}
    for case in cases[1:]:
        finding = by_id[case.get("name", "")]
        assert set(case.attrib) <= CASE_ATTRS and case.get("classname")
        assert {child.tag for child in case} <= CASE_CHILDREN
        kinds = {
            Status.FAIL: ["failure"],
            Status.ERROR: ["error"],
            Status.SKIP: ["skipped"],
            Status.WARN: ["system-out"],
        }
        expected_tags = kinds.get(finding.status, [])
        if finding.status.blocking and finding not in report.blocking():
            expected_tags = ["skipped", "system-out"]  # fails here, decides nothing
        assert [child.tag for child in case] == expected_tags
        assert case.get("classname", "").startswith(report.profile.target + ".")
        if finding.gpu is not None:
            assert case.get("classname", "").endswith(f".gpu{finding.gpu}")


@pytest.mark.parametrize(("name", "fails"), [(READY, False), (NOT_READY, True), (NO_VERDICT, True)])
def test_the_outcome_case_fails_unless_ready(name: str, fails: bool) -> None:
    _, root, _ = junit_of(name)
    outcome = root.find("testsuite/testcase")
    assert outcome is not None and outcome.get("name") == ci_formats.OUTCOME_ID
    failure = outcome.find("failure")
    assert (failure is not None) is fails
    if failure is not None:
        assert "exit code" in (failure.get("message") or "")


@pytest.mark.parametrize("name", [READY, NOT_READY, NO_VERDICT, "b200", "mixed", "gb200"])
def test_a_case_fails_exactly_when_its_finding_decides_not_ready(name: str) -> None:
    """A ready host has no failing case (Jenkins would mark the build unstable, GitLab show failed
    tests): a backend that is not chosen is skipped, and says why."""
    code, root, _ = junit_of(name)
    report = diagnose(Question(facts_file=host(name), smoke=None))
    blocking = {f.id for f in report.blocking()}
    failing = [
        c.get("name")
        for c in root.iter("testcase")
        if c.find("failure") is not None or c.find("error") is not None
    ]
    if report.ready:
        assert code == 0 and failing == [] and root.get("failures") == root.get("errors") == "0"
    else:
        assert failing[0] == ci_formats.OUTCOME_ID and set(failing[1:]) == blocking
    skipped = [c for c in root.iter("testcase") if c.find("skipped") is not None]
    not_chosen = [
        c for c in skipped if "does not decide" in (c.find("skipped").get("message") or "")
    ]  # type: ignore[union-attr]
    assert not_chosen and all(
        c.findtext("system-out", "").startswith("not valid here: ") for c in not_chosen
    )


def test_every_suite_says_when_and_where_the_hostname_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    report = diagnose(Question(facts_file=host(READY), smoke=None))
    root = ET.fromstring(ci_formats.junit(report))
    suites = root.findall("testsuite")
    assert suites and {s.get("timestamp") for s in suites} == {"2026-01-01T00:00:00"}
    assert {s.get("hostname") for s in suites} == {"<redacted>"}
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    stamp = ET.fromstring(ci_formats.junit(report)).find("testsuite").get("timestamp")  # type: ignore[union-attr]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", stamp or "")


def test_junit_carries_hostile_text_as_valid_xml(tmp_path: Path) -> None:
    """A GPU name with terminal escapes, XML's own characters, characters XML 1.0 cannot carry."""
    data = json.loads(Path(host("b200")).read_text(encoding="utf-8"))
    data["gpus"][0]["name"] = 'B200 <x a="1"> & \x1b]0;owned\x07 \x00 \ufffe é ]]>'
    data["synthetic"] = "line one\nline two\x0c"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    _, out, _ = check("--facts", str(path), "--format", "junit")
    root = ET.fromstring(out)  # parses: nothing XML 1.0 forbids
    assert out.isascii() and "\x1b" not in out and "\x00" not in out
    text = ET.tostring(root, encoding="unicode")
    assert "\\e]0;owned\\x07" in text and "é" in text


# --- GitHub workflow commands -------------------------------------------------------------------


def test_escaping_is_actions_toolkits() -> None:
    assert ci_formats.escape_data("50% a\r\nb: c, d") == "50%25 a%0D%0Ab: c, d"
    assert ci_formats.escape_property("50% a\r\nb: c, d") == "50%25 a%0D%0Ab%3A c%2C d"
    assert ci_formats.command("error", "x\ny", title="a:b,c") == "::error title=a%3Ab%2Cc::x%0Ay\n"


def _commands(out: str) -> tuple[list[str], list[str]]:
    """The command lines before the report's group, and the report's lines."""
    head, _, rest = out.partition("::group::fp4doctor report\n")
    start, _, rest = rest.partition("\n")
    assert start.startswith("::stop-commands::")
    token = start.removeprefix("::stop-commands::")
    assert len(token) == 32
    body, _, tail = rest.partition(f"::{token}::\n")
    assert tail == "::endgroup::\n"
    return head.splitlines(), body.splitlines()


@pytest.mark.parametrize("name", [READY, NOT_READY, NO_VERDICT])
def test_github_annotates_what_blocks_and_the_answer(name: str) -> None:
    code, out, _ = check("--facts", host(name), "--format", "github")
    report = diagnose(Question(facts_file=host(name), smoke=None))
    assert code == report.outcome.exit_code
    commands, body = _commands(out)
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in commands)
    last = commands[-1]
    if report.ready:
        assert last.startswith("::notice title=fp4doctor::READY: use ")
    else:
        assert last.startswith("::error title=fp4doctor::NOT READY") or last.startswith(
            "::error title=fp4doctor::NO VERDICT"
        )
        blocking = report.blocking()[: ci_formats.ANNOTATIONS_PER_KIND]
        titles = [line.split("::")[1] for line in commands if line.startswith("::error title=")]
        assert [f"error title={f.id}" for f in blocking] == titles[: len(blocking)]
    assert (
        body
        == render.human(
            report, verbose=False, style=render.Style(unicode=True, color=False)
        ).splitlines()
    )


def test_a_hostile_gpu_name_cannot_start_a_command(tmp_path: Path) -> None:
    data = json.loads(Path(host(NO_VERDICT)).read_text(encoding="utf-8"))
    data["synthetic"] = "x\n::error::injected\r\n::add-mask::y %0A"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    _, out, _ = check("--facts", str(path), "--format", "github")
    commands, _ = _commands(out)
    assert not any("injected" in line and line.startswith("::error::") for line in commands)
    warning = next(line for line in commands if line.startswith("::warning title=host.synthetic"))
    # CR and other controls are first written as escapes (render.clean), LF then as %0A.
    assert "x%0A::error::injected\\r%0A::add-mask::y %250A" in warning


def test_the_step_summary_is_appended_not_replaced(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# an earlier step\n", encoding="utf-8")
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    code, _, err = check("--facts", host(NOT_READY), "--format", "github", env=env)
    assert code == 1 and err == ""
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# an earlier step\n### fp4doctor: NOT READY")
    assert text.splitlines()[1].endswith("(exit code 1)")
    assert "| backend | verdict | why |" in text and "| marlin | not valid |" in text


def test_no_summary_variable_writes_no_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    code, _, _ = check("--facts", host(READY), "--format", "github")
    assert code == 0 and list(tmp_path.iterdir()) == []


def test_a_summary_that_is_not_a_regular_file_is_left_alone(tmp_path: Path) -> None:
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    env = {"GITHUB_STEP_SUMMARY": str(fifo)}
    code, out, err = check("--facts", host(READY), "--format", "github", env=env)
    assert code == 0 and out.startswith("::")  # the answer still reaches the log
    assert err.startswith("fp4doctor: cannot append to $GITHUB_STEP_SUMMARY")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    with pytest.raises(ci_formats.SummaryError, match="not a regular file"):
        ci_formats.append_step_summary("/dev/null", "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_the_summary_escapes_markdown_and_html() -> None:
    assert ci_formats._md("a|b <img src=x> `c`\nd") == "a\\|b &lt;img src=x&gt; \\`c\\` d"


# --- the workflow example, run in a real bash ---------------------------------------------------


def _steps_that_run_fp4doctor() -> list[dict[str, str]]:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert workflow["defaults"]["run"]["shell"] == "bash"
    steps = workflow["jobs"]["fp4-preflight"]["steps"]
    install = [s for s in steps if "pip install" in s.get("run", "")]
    assert len(install) == 1 and "./fp4doctor" in install[0]["run"], "installed from the source"
    assert not any("pip install fp4doctor" in s.get("run", "") for s in steps)
    return [s for s in steps if "fp4doctor " in s.get("run", "") and s not in install]


def _run_workflow(tmp_path: Path, facts_name: str) -> tuple[list[int], dict[str, Path]]:
    """Each step as GitHub runs it (bash --noprofile --norc -eo pipefail), with `fp4doctor` on
    PATH judging a fixture host; a failed step skips the next unless it says `if: always()`."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "fp4doctor"
    wrapper.write_text(
        f'#!/bin/sh\nexec {sys.executable} -m fp4doctor "$@" --facts {host(facts_name)}\n'
    )
    wrapper.chmod(0o755)
    files = {k: tmp_path / k.lower() for k in ("GITHUB_ENV", "GITHUB_STEP_SUMMARY", "GITHUB_PATH")}
    for path in files.values():
        path.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "SGLANG_"))}
    env.update({k: str(v) for k, v in files.items()})
    env["PATH"] = f"{bindir}:{env['PATH']}"
    codes: list[int] = []
    for step in _steps_that_run_fp4doctor():
        if codes and codes[-1] != 0 and step.get("if") != "always()":
            continue
        script = tmp_path / "step.sh"
        script.write_text(step["run"])
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "Traceback" not in done.stderr, done.stderr
        codes.append(done.returncode)
    return codes, files


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_workflow_passes_and_switches_the_path_on_for_a_ready_host(tmp_path: Path) -> None:
    codes, files = _run_workflow(tmp_path, READY)
    assert codes == [0, 0, 0]
    assert files["GITHUB_STEP_SUMMARY"].read_text().startswith("### fp4doctor: READY: use ")
    assert "FP4DOCTOR_VLLM_ARGS<<" in files["GITHUB_ENV"].read_text()
    junit = ET.parse(tmp_path / "fp4doctor-junit.xml").getroot()
    outcome = junit.find("testsuite/testcase")
    assert outcome is not None and outcome.get("name") == ci_formats.OUTCOME_ID
    assert outcome.find("failure") is None


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("name", "code"), [(NOT_READY, 1), (NO_VERDICT, 3)])
def test_the_workflow_stops_at_the_gate_otherwise(tmp_path: Path, name: str, code: int) -> None:
    codes, files = _run_workflow(tmp_path, name)
    # The gate fails; `env` is skipped; the JUnit step (if: always()) keeps its report.
    assert codes[0] == code and len(codes) == 2
    assert files["GITHUB_ENV"].read_text() == ""
    assert "### fp4doctor: NO" in files["GITHUB_STEP_SUMMARY"].read_text()
    junit = ET.parse(tmp_path / "fp4doctor-junit.xml").getroot()
    assert junit.find("testsuite/testcase/failure") is not None
    assert codes[1] == (0 if code == 1 else 1)  # 1 is the gate's to report; 3 fails here too


def test_the_summary_has_a_table_per_family_judged() -> None:
    report = diagnose(Question(facts_file=host("b200"), smoke=None))
    text = ci_formats.step_summary(report)
    assert text.count("| backend | verdict | why |") == len(report.families)
    for part in report.families:
        for name in part.evaluation.verdicts:
            assert f"| {name} | " in text
