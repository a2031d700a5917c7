"""The published JSON Schemas (fp4doctor/schemas, draft 2020-12) describe the documents exactly.

Every fixture host and report, and (through the autouse hook in conftest.py) every JSON document
the tests make fp4doctor write, is validated against the schema it names. Here: the schemas
themselves, the fixtures, the facts model against its schema field by field, Hypothesis-made facts
documents, and the hook, which must refuse a document that does not match.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import subprocess
import types
import typing
from pathlib import Path
from typing import Any, Union

import jsonschema
import pytest
from conftest import HOSTS_DIR, _json_command, schema_errors
from hypothesis import given, settings
from hypothesis import strategies as st

from fp4doctor import facts, render, schemas
from fp4doctor.doctor import Question, diagnose

pytest_plugins = ("pytester",)

REPORTS_DIR = Path(__file__).parent / "fixtures" / "reports"
# Real H200 captures made by an fp4doctor that wrote no `outcome` yet (commit e0b999a); they stay
# as captured, and the next GPU round (benchmarks/gpu_round.sh) re-captures them.
BEFORE_OUTCOME = {"h200x2/check-vllm-cvd1.json", "h200x2/check-vllm-smoke.json"}


# --- the schemas themselves --------------------------------------------------------------------


@pytest.mark.parametrize("name", schemas.available())
def test_each_shipped_schema_is_a_valid_2020_12_schema_with_its_id(name: str) -> None:
    stem = name.removesuffix(".schema.json")
    kind, version = stem.rsplit("-v", 1)
    schema = schemas.load(kind, int(version))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == schemas.URN_PREFIX + stem
    assert schema["description"]


def test_every_kind_has_a_schema_for_the_version_the_code_writes() -> None:
    shipped = [schemas.file_name(k, v) for k in schemas.KINDS for v in schemas.VERSIONS[k]]
    assert schemas.available() == sorted(shipped)
    assert schemas.VERSIONS["report"][-1] == render.REPORT_SCHEMA_VERSION
    assert schemas.load("facts", facts.SCHEMA_VERSION)["properties"]["schema_version"] == {
        "const": facts.SCHEMA_VERSION
    }
    assert schemas.load("report", render.REPORT_SCHEMA_VERSION)["properties"]["schema_version"] == {
        "const": render.REPORT_SCHEMA_VERSION
    }


def test_an_unknown_kind_or_version_is_refused_with_the_choices() -> None:
    with pytest.raises(schemas.UnknownDocument, match="known: facts, report"):
        schemas.load("nosuch")
    with pytest.raises(schemas.UnknownDocument, match="shipped: advisories-v1"):
        schemas.load("facts", 99)


@pytest.mark.parametrize(
    ("document", "kind"),
    [
        ([], "advisories"),
        ({"set": {}, "unset": []}, "env"),
        ({"schema_version": 1, "nvml": {}}, "facts"),
        ({"schema_version": 1, "findings": []}, "report"),
    ],
)
def test_a_document_names_its_schema(document: Any, kind: str) -> None:
    assert schemas.kind_of(document) == (kind, 1)


@pytest.mark.parametrize("document", [{}, {"schema_version": 1}, "text", 3, {"set": {}}])
def test_a_document_fp4doctor_does_not_write_names_no_schema(document: Any) -> None:
    with pytest.raises(schemas.UnknownDocument):
        schemas.kind_of(document)


# --- the fixtures --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(HOSTS_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_every_fixture_host_matches_the_facts_schema(path: Path) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    assert schemas.kind_of(document) == ("facts", 1)
    assert schema_errors(document) == []


def _report_fixtures() -> list[Any]:
    out = []
    for path in sorted(REPORTS_DIR.rglob("*.json")):
        name = path.relative_to(REPORTS_DIR).as_posix()
        marks = (
            [pytest.mark.xfail(strict=True, reason="captured before `outcome`; re-capture it")]
            if name in BEFORE_OUTCOME
            else []
        )
        out.append(pytest.param(path, id=name, marks=marks))
    return out


@pytest.mark.parametrize("path", _report_fixtures())
def test_every_fixture_report_matches_the_report_schema(path: Path) -> None:
    """A report of either version (v2 since the families became equal: the H200 SGLang capture
    of 2026-12-04), valid against the schema its `schema_version` names."""
    document = json.loads(path.read_text(encoding="utf-8"))
    assert schemas.kind_of(document) in (("report", 1), ("report", 2))
    assert schema_errors(document) == []


def test_the_reports_captured_before_outcome_miss_only_outcome() -> None:
    """What keeps them out of the schema is that one key, nothing else."""
    for name in BEFORE_OUTCOME:
        document = json.loads((REPORTS_DIR / name).read_text(encoding="utf-8"))
        outcome = {0: "ready", 1: "not ready", 3: "no verdict"}[document["exit_code"]]
        assert schema_errors({**document, "outcome": outcome}) == []


# --- the facts model and its schema, field by field ----------------------------------------------


def _object_schemas(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """`node` with its `$ref` followed (one level, as the facts schema writes them)."""
    ref = node.get("$ref")
    if ref:
        node = schema["$defs"][ref.rsplit("/", 1)[1]]
    for option in node.get("anyOf", ()):
        if "$ref" in option:
            return _object_schemas(schema, option)
    items = node.get("items") or node.get("additionalProperties")
    if node.get("type") in ("array", "object") and isinstance(items, dict) and "$ref" in items:
        return _object_schemas(schema, items)
    return node


def _dataclass_of(tp: Any) -> Any:
    """The dataclass a field's type holds (through `X | None`, `list[X]`, `dict[str, X]`)."""
    if dataclasses.is_dataclass(tp):
        return tp
    for arg in typing.get_args(tp):
        found = _dataclass_of(arg)
        if found is not None:
            return found
    return None


def _compare(schema: dict[str, Any], cls: Any, node: dict[str, Any], where: str) -> None:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert set(node["properties"]) == set(fields), f"{where}: schema and {cls.__name__} differ"
    assert node["additionalProperties"] is False, where
    omitted = {n for n, f in fields.items() if f.metadata.get("omit_empty")}
    assert set(node["required"]) == set(fields) - omitted, f"{where}: required keys"
    hints = typing.get_type_hints(cls)
    for name in fields:
        inner = _dataclass_of(hints[name])
        if inner is not None:
            _compare(schema, inner, _object_schemas(schema, node["properties"][name]), name)


def test_the_facts_schema_names_every_field_of_the_facts_model_and_no_other() -> None:
    """A field added to HostFacts (or any part of it) without its schema fails here."""
    schema = schemas.load("facts")
    _compare(schema, facts.HostFacts, schema, "(top)")


# --- Hypothesis: any facts document the model can write matches the schema ------------------------

_NVML_STATES = [
    facts.NVML_OK, facts.NVML_LIBRARY_NOT_FOUND, facts.NVML_DRIVER_NOT_LOADED,
    facts.NVML_DRIVER_MISMATCH, facts.NVML_NO_GPU, facts.NVML_ERROR,
]  # fmt: skip
_SPECIAL: dict[tuple[str, str], st.SearchStrategy[Any]] = {
    ("HostFacts", "schema_version"): st.just(facts.SCHEMA_VERSION),
    ("NvmlFacts", "status"): st.sampled_from(_NVML_STATES),
}


def _field_strategy(cls: Any, f: dataclasses.Field[Any], tp: Any) -> st.SearchStrategy[Any]:
    if (cls.__name__, f.name) in _SPECIAL:
        return _SPECIAL[(cls.__name__, f.name)]
    if f.metadata.get("omit_empty") and tp == (str | None):
        # Written only when not empty, so "" reads back as None: the probe never records "".
        return st.none() | st.text(min_size=1, max_size=12)
    return _strategy(tp)


def _strategy(tp: Any) -> st.SearchStrategy[Any]:
    """Values of a facts field's type, built from the type itself: a field added to the model is
    generated here without a change (and then fails unless the schema has it)."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return st.one_of([_strategy(a) for a in typing.get_args(tp)])
    if tp is type(None):
        return st.none()
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return st.builds(
            typing.cast(Any, tp),
            **{f.name: _field_strategy(tp, f, hints[f.name]) for f in dataclasses.fields(tp)},
        )
    if origin is list:
        return st.lists(_strategy(typing.get_args(tp)[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), _strategy(typing.get_args(tp)[1]), max_size=3)
    if tp is int:
        return st.integers(min_value=0, max_value=2**40)
    if tp is str:
        return st.text(max_size=12)
    if tp is bool:
        return st.booleans()
    raise TypeError(f"no strategy for {tp!r}")


@settings(max_examples=60)
@given(_strategy(facts.HostFacts))
def test_any_facts_document_matches_the_schema(host: facts.HostFacts) -> None:
    document = json.loads(facts.dumps(host))
    assert schema_errors(document) == []
    assert facts.from_dict(document) == host


@settings(max_examples=30)
@given(_strategy(facts.HostFacts), st.text(min_size=1, max_size=8))
def test_an_unknown_key_anywhere_is_refused(host: facts.HostFacts, key: str) -> None:
    document = json.loads(facts.dumps(host))
    top = {**document, f"x{key}": 1}
    nested = {**document, "nvml": {**document["nvml"], f"x{key}": 1}}
    assert schema_errors(top) and schema_errors(nested)


def test_a_missing_key_or_a_wrong_type_is_refused() -> None:
    document = json.loads((HOSTS_DIR / "b200.json").read_text(encoding="utf-8"))
    assert schema_errors({k: v for k, v in document.items() if k != "gpus"})
    assert schema_errors({**document, "nvml": {**document["nvml"], "status": "fine"}})
    gpu = {**document["gpus"][0], "cc_major": "10"}
    assert schema_errors({**document, "gpus": [gpu]})
    assert schema_errors({**document, "schema_version": 2})  # a v2 document names a v2 schema


# --- reports the code writes now -----------------------------------------------------------------


@functools.cache
def _reports() -> dict[str, dict[str, Any]]:
    """The JSON report of each fixture host, as `check --json --facts HOST --no-smoke` writes it."""
    out = {}
    for path in sorted(HOSTS_DIR.glob("*.json")):
        report = diagnose(Question(facts_file=str(path), smoke=False))
        out[path.stem] = json.loads(render.dumps(render.document(report)))
    return out


def test_the_report_of_every_fixture_host_matches_the_schema() -> None:
    reports = _reports()
    for name, document in reports.items():
        assert schema_errors(document) == [], name
    assert {d["outcome"] for d in reports.values()} == {"ready", "not ready", "no verdict"}


def test_no_verdict_judges_no_backend() -> None:
    document = _reports()["nvml-mismatch"]
    assert document["outcome"] == "no verdict"
    assert {b["valid"] for b in document["families"]["linear"]["backends"].values()} == {None}
    assert {b["problem"] for b in document["families"]["linear"]["backends"].values()} == {
        render.NO_VERDICT_TEXT
    }
    for family in document.get("families", {}).values():
        assert {b["valid"] for b in family["backends"].values()} == {None}


def test_the_report_schema_ties_outcome_exit_code_and_ready() -> None:
    document = _reports()["a100"]
    other = {0: 1, 1: 0, 3: 1}[document["exit_code"]]
    assert schema_errors({**document, "exit_code": other})
    assert schema_errors({**document, "ready": not document["ready"]})
    assert schema_errors({**document, "outcome": "maybe"})
    finding = {**document["findings"][0], "status": "ok"}
    assert schema_errors({**document, "findings": [finding]})
    assert schema_errors({**document, "new_key": 1})
    assert schema_errors({**document, "backends": {}}), "no family at the top level (v2)"
    families = {
        name: {
            **family,
            "backends": {k: {**b, "valid": None} for k, b in family["backends"].items()},
        }
        for name, family in document.get("families", {}).items()
    }
    if families:
        assert schema_errors({**document, "families": families}), "null only under no verdict"


# --- the hook that validates what the tests emit -------------------------------------------------


def test_the_hook_knows_an_fp4doctor_json_command_line() -> None:
    assert _json_command(["python", "-m", "fp4doctor", "check", "--json"]) == "report"
    assert _json_command(["/venv/bin/fp4doctor", "env", "--shell", "json"]) == "env"
    assert _json_command(("fp4doctor", "check", "--format", "json")) == "report"
    assert _json_command(["fp4doctor", "probe", "--json"]) == "facts"
    assert _json_command(["fp4doctor", "advisories", "--json"]) == "advisories"
    assert _json_command(["fp4doctor", "fleet", "--facts", "d", "--json"]) == "fleet"
    assert _json_command(["fp4doctor", "explain", "--model", "m", "--json"]) == "explain"
    assert _json_command(["fp4doctor", "check"]) is None
    assert _json_command(["fp4doctor", "check", "--json", "--help"]) is None
    assert _json_command("fp4doctor check --json") is None  # a shell string: not parsed


def test_the_hook_refuses_a_document_that_does_not_match(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test whose fp4doctor writes a bad document fails, though its own asserts pass."""
    conftest = Path(__file__).with_name("conftest.py")
    pytester.makeconftest(conftest.read_text(encoding="utf-8"))
    pytester.syspathinsert(Path(__file__).parent)
    pytester.makepyfile(
        test_bad="""
        import click
        from fp4doctor import console

        def _in(command, text):
            with click.Context(click.Command(command), info_name=command):
                console.write(text, kind="json")

        def test_writes_a_bad_report():
            _in("check", '{"schema_version": 1, "findings": [], "outcome": "maybe"}')

        def test_writes_a_good_env_document():
            _in("env", '{"set": {"A": "b"}, "unset": []}')

        def test_a_command_without_a_schema_is_not_checked():
            _in("node", '{"schema_version": 1, "anything": []}')

        def test_a_subprocess_writes_a_bad_document():
            import subprocess, sys

            code = "print('{\\"schema_version\\": 1}')"
            argv = [sys.executable, "-c", code, "fp4doctor", "probe", "--json"]
            assert subprocess.run(argv, capture_output=True).returncode == 0
        """
    )
    # This test's own hook must not see the inner run's bad document: the inner hook does.
    from fp4doctor import console

    monkeypatch.setattr(console, "write", console.write.__wrapped__)  # type: ignore[attr-defined]
    monkeypatch.setattr(subprocess, "run", subprocess.run.__wrapped__)  # type: ignore[attr-defined]
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=4, errors=2)
    result.stdout.fnmatch_lines(["*does not match its schema*", "*report-v1 at $*"])
    result.stdout.fnmatch_lines(["*fp4doctor probe --json: facts-v1 at $: 'fp4doctor_version'*"])


# --- the snippet docs/pipelines.md shows ---------------------------------------------------------


def test_the_validation_snippet_of_pipelines_md_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    from click.testing import CliRunner

    from fp4doctor import cli

    text = (Path(__file__).parent.parent / "docs" / "pipelines.md").read_text(encoding="utf-8")
    (snippet,) = re.findall(r"```python\n(.*?)\n```", text, re.S)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(
        cli.main, ["check", "--format", "json", "--facts", str(HOSTS_DIR / "cpu.json")]
    )
    (tmp_path / "fp4doctor-report.json").write_text(out.stdout, encoding="utf-8")
    exec(compile(snippet, "docs/pipelines.md", "exec"), {})
    (tmp_path / "fp4doctor-report.json").write_text(
        out.stdout.replace('"outcome": "not ready"', '"outcome": "ready"'), encoding="utf-8"
    )
    with pytest.raises(jsonschema.ValidationError):
        exec(compile(snippet, "docs/pipelines.md", "exec"), {})


# --- fleet and explain: real documents against their schemas --------------------------------

FIXTURES = Path(__file__).parent / "fixtures"


def _validate(kind: str, argv: list[str]) -> Any:
    from click.testing import CliRunner

    from fp4doctor import cli

    result = CliRunner().invoke(cli.main, argv)
    assert result.exit_code in (0, 1, 3), result.stderr
    document = json.loads(result.stdout)
    assert schemas.kind_of(document) == (kind, 1)
    jsonschema.Draft202012Validator(schemas.load(kind)).validate(document)
    return document


def test_fleet_json_matches_its_schema(tmp_path: Path) -> None:
    document = _validate("fleet", ["fleet", "--facts", str(FIXTURES / "fleet"), "--json"])
    assert document["outliers"] and len(document["groups"]) > 1
    # A group's facts are a facts document.
    facts_schema = jsonschema.Draft202012Validator(schemas.load("facts"))
    for group in document["groups"]:
        facts_schema.validate(group["facts"])
    # An unreadable snapshot: a node that could not be judged.
    shutil.copy(FIXTURES / "fleet" / "b200-01.json", tmp_path / "ok.json")
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    document = _validate("fleet", ["fleet", "--facts", str(tmp_path), "--json"])
    assert [f["node"] for f in document["failed"]] == ["broken"]


@pytest.mark.parametrize(
    "checkpoint", sorted(p.name for p in (FIXTURES / "checkpoints").iterdir() if p.is_dir())
)
def test_explain_json_matches_its_schema(checkpoint: str) -> None:
    argv = ["explain", "--facts", str(HOSTS_DIR / "b200-vllm-0.33.json"), "--json"]
    argv += ["--model", str(FIXTURES / "checkpoints" / checkpoint)]
    from click.testing import CliRunner

    from fp4doctor import cli

    if CliRunner().invoke(cli.main, argv).exit_code == 2:
        pytest.skip(f"{checkpoint} is a checkpoint fp4doctor refuses (tested elsewhere)")
    document = _validate("explain", argv)
    assert document["layers"]
