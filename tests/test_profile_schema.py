"""A malformed profile fails with file, line and key, and the valid choices; never a traceback."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from fp4doctor.cli import main
from fp4doctor.profile import ProfileError, load, load_file
from fp4doctor.profile.kinds.compute_capability import ComputeCapability
from fp4doctor.profile.schema import parse

GOOD = textwrap.dedent(
    """\
    schema: 1
    target: demo
    title: Demo
    engine:
      package: demo-engine
      newest_known: "1.2.0"
    backends:
      fast:
        summary: the fast one
        native: true
        aliases: [f]
        requires:
          - compute_capability: [100]
            source: test
          - package: demo-lib
            version: ">=1.0"
            source: test
      slow:
        summary: the slow one
        native: false
    eras:
      - versions: "<2"
        source: test
        knobs:
          - env: DEMO_BACKEND
            values: {fast: fast, slow: [slow, SLOW]}
        auto:
          - backend: fast
            if: [{compute_capability: ">=10.0"}]
          - backend: slow
    """
)


def broken(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


def error_of(text: str) -> str:
    with pytest.raises(ProfileError) as info:
        parse(text, "demo.yaml")
    return str(info.value)


def test_good_profile_parses_into_the_model() -> None:
    p = parse(GOOD, "demo.yaml")
    assert p.target == "demo"
    assert list(p.backends) == ["fast", "slow"]
    assert p.lookup("f") is p.backends["fast"]
    knob = p.eras[0].knobs[0]
    assert knob.backend_for("SLOW") == "slow"
    assert knob.backend_for("slow") == "slow"
    assert knob.backend_for("Fast") is None  # case-sensitive by default
    assert p.backends["fast"].requires[0].kind == ComputeCapability(exact=(100,))


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "native: true",
            "native: maybe",
            "demo.yaml:10: 'backends.fast.native' should be true or false",
        ),
        ("  fast:\n", "  Fast!:\n", "demo.yaml:9: 'backends.Fast!' backend names are lower-case"),
        (
            "- compute_capability: [100]",
            "- compute_capabilty: [100]",
            "demo.yaml:13: 'backends.fast.requires[0]' needs exactly one requirement kind",
        ),
        (
            'version: ">=1.0"',
            'version: "at least one"',
            "demo.yaml:16: 'backends.fast.requires[1].version' 'at least one' is not a PEP 440",
        ),
        (
            "values: {fast: fast",
            "values: {quick: fast",
            "'eras[0].knobs[0].values.quick' names no backend of this profile (valid: fast, slow)",
        ),
        (
            "      - backend: slow",
            "      - backend: slower",
            "'eras[0].auto[1].backend' names no backend of this profile (valid: fast, slow)",
        ),
        (
            'newest_known: "1.2.0"',
            "newest_known: soon",
            "'engine.newest_known' 'soon' is not a version",
        ),
        ("schema: 1", "schema: 7", "demo.yaml:1: 'schema' is 7; this fp4doctor reads schema 1"),
        (
            "title: Demo",
            "title: Demo\ncolour: blue",
            "'colour' is not a known key here (valid: schema,",
        ),
        (
            "summary: the slow one",
            "summary: [a, b]",
            "'backends.slow.summary' should be a single value",
        ),
        (
            "- env: DEMO_BACKEND",
            "- env: 'BAD NAME'",
            "'BAD NAME' is not a valid environment variable name",
        ),
        (
            "- compute_capability: [100]",
            "- compute_capability: []",
            "'backends.fast.requires[0].compute_capability' should list at least one",
        ),
        (
            "values: {fast: fast, slow: [slow, SLOW]}",
            "values: {fast: [], slow: [slow, SLOW]}",
            "'eras[0].knobs[0].values.fast' should give at least one spelling",
        ),
    ],
)
def test_errors_name_file_line_key_and_choices(old: str, new: str, expected: str) -> None:
    assert expected in error_of(broken(old, new))


def test_missing_key_names_the_parent() -> None:
    text = GOOD.replace("    native: false\n", "")
    assert "'backends.slow' is missing the required key 'native'" in error_of(text)


def test_not_yaml_gives_the_line() -> None:
    assert error_of("schema: 1\ntarget: [unclosed\n").startswith("demo.yaml:3: not valid YAML")


def test_anchors_and_aliases_are_refused() -> None:
    text = "x: &a Demo\n" + GOOD.replace("title: Demo", "title: *a")
    assert error_of(text) == "demo.yaml: YAML anchors and aliases are not allowed in profiles"


def test_python_tags_are_refused_never_constructed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    scalar = GOOD.replace("title: Demo", "title: !!python/name:os.system")
    assert (
        "'title' has an unsupported YAML tag 'tag:yaml.org,2002:python/name:os.system'"
        in error_of(scalar)
    )
    applied = GOOD.replace("title: Demo", "title: !!python/object/apply:os.system ['touch pwned']")
    assert "'title' should be a single value, got a list" in error_of(applied)
    assert not (tmp_path / "pwned").exists()


def test_duplicate_requirement_ids_need_when() -> None:
    text = GOOD.replace(
        "      - package: demo-lib",
        "      - compute_capability: [103]\n        source: x\n      - package: demo-lib",
    )
    assert "two requirements with id 'compute_capability'" in error_of(text)


def test_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read"):
        load_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"schema: 1\ntitle: \xff\xfe\n")
    with pytest.raises(ProfileError, match="not UTF-8"):
        load_file(bad)


def test_unknown_target_lists_the_shipped_ones() -> None:
    with pytest.raises(ProfileError, match=r"no profile for target 'tgi' \(valid: .*vllm"):
        load("tgi")


def test_user_profile_overrides_a_target(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(GOOD.replace("target: demo", "target: vllm"))
    assert list(load("vllm", [path]).backends) == ["fast", "slow"]


def test_cli_validate_exit_codes(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text(broken("native: true", "native: 3"))
    runner = CliRunner()
    ok = runner.invoke(main, ["profiles", "validate", str(good)])
    assert ok.exit_code == 0 and "ok (demo: 2 backends, 1 eras)" in ok.output
    result = runner.invoke(main, ["profiles", "validate", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:10: 'backends.fast.native' should be true or false" in result.output
    assert "Traceback" not in result.output


def test_check_with_a_broken_profile_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "vllm.yaml"
    bad.write_text(
        GOOD.replace("target: demo", "target: vllm").replace("native: true", "native: 3")
    )
    result = CliRunner().invoke(main, ["check", "--no-smoke", "--profile", str(bad)])
    assert result.exit_code == 2, result.output
    assert "fp4doctor: error:" in result.output and "Traceback" not in result.output
