"""Property-based fuzzing of the two inputs users hand us: profile YAML and facts JSON.

Every input ends in a clear error that names the file (and, for a schema error, the key), or is
accepted; never another exception, never a hang. Example counts are bounded for CI; set
FP4DOCTOR_FUZZ_EXAMPLES (e.g. 5000) for a longer run before a release (docs/reliability.md).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fp4doctor import facts
from fp4doctor.profile import ProfileError, builtin_dir, load_file
from fp4doctor.profile.schema import parse

EXAMPLES = int(os.environ.get("FP4DOCTOR_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
VLLM_TEXT = (builtin_dir() / "vllm.yaml").read_text()
VLLM_DATA = yaml.safe_load(VLLM_TEXT)
HOSTS = Path(__file__).parent / "fixtures" / "hosts"
B200 = json.loads((HOSTS / "b200.json").read_text())

# Values of every kind, hostile ones included.
ANY_VALUE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=40)
    | st.just("x" * 100_000)
    | st.just("$(touch PWNED)"),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += paths(v, (*prefix, i))
    return out


VLLM_PATHS = paths(VLLM_DATA)[1:]
B200_PATHS = paths(B200)[1:]


def mutate(data: Any, path: tuple[Any, ...], value: Any, mode: str) -> Any:
    data = copy.deepcopy(data)
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if mode == "delete":
        del parent[last]
    elif mode == "unknown-key" and isinstance(parent, dict):
        parent[f"{last}_typo"] = value
    else:
        parent[last] = value
    return data


def assert_clean_profile_error(text: str) -> None:
    start = time.perf_counter()
    try:
        parse(text, "fuzz.yaml")
    except ProfileError as exc:
        message = str(exc)
        assert message.startswith("fuzz.yaml"), message
        assert "Traceback" not in message
    assert time.perf_counter() - start < 5


@FUZZ
@given(st.integers(0, len(VLLM_TEXT)))
def test_truncated_profiles(cut: int) -> None:
    assert_clean_profile_error(VLLM_TEXT[:cut])


@FUZZ
@given(
    st.sampled_from(VLLM_PATHS), ANY_VALUE, st.sampled_from(["replace", "delete", "unknown-key"])
)
def test_mutated_profiles_fail_with_file_line_and_key(
    path: tuple[Any, ...], value: Any, mode: str
) -> None:
    try:
        text = yaml.safe_dump(mutate(VLLM_DATA, path, value, mode), allow_unicode=True)
    except (yaml.YAMLError, ValueError, OverflowError):
        return  # not representable as YAML: nothing to feed
    try:
        parse(text, "fuzz.yaml")
    except ProfileError as exc:
        message = str(exc)
        assert message.startswith("fuzz.yaml"), message
        # A schema error (not a YAML syntax one) points at a line and names a key.
        if "not valid YAML" not in message and "anchors" not in message:
            assert message.startswith("fuzz.yaml:"), message


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_as_a_profile_file(
    tmp_path_factory: pytest.TempPathFactory, blob: bytes
) -> None:
    path = tmp_path_factory.mktemp("p") / "blob.yaml"
    path.write_bytes(blob)
    try:
        load_file(path)
    except ProfileError as exc:
        assert str(exc).startswith(str(path))


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 50_000,  # deep nesting
        "a: " + "{b: " * 20_000,
        # A billion laughs: nine levels of ten aliases.
        "a0: &a0 [lol]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10)),
        "schema: !!python/object/apply:os.system ['touch PWNED']\n",
        "schema: 1\n" + "x" * (2 << 20),  # huge
        "---\nschema: 1\n---\nschema: 1\n",  # two documents
        "\ufeffschema: 1\ntarget: \u202evllm\n",
    ],
)
def test_hostile_profiles_end_quickly_in_a_clear_error(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    start = time.perf_counter()
    with pytest.raises(ProfileError):
        parse(text, "hostile.yaml")
    assert time.perf_counter() - start < 2
    assert not (tmp_path / "PWNED").exists()


# --- facts JSON -----------------------------------------------------------------------------


@FUZZ
@given(
    st.sampled_from(B200_PATHS), ANY_VALUE, st.sampled_from(["replace", "delete", "unknown-key"])
)
def test_mutated_facts_fail_with_file_and_key(path: tuple[Any, ...], value: Any, mode: str) -> None:
    data = mutate(B200, path, value, mode)
    try:
        facts.from_dict(data, "fuzz.json")
    except facts.FactsError as exc:
        assert str(exc).startswith("fuzz.json: "), exc


@FUZZ
@given(st.integers(0, 4000))
def test_truncated_facts(cut: int) -> None:
    text = json.dumps(B200, indent=2)[:cut]
    try:
        facts.loads(text, "cut.json")
    except facts.FactsError as exc:
        assert str(exc).startswith("cut.json: ")


def test_hostile_facts_through_the_cli(tmp_path: Path) -> None:
    """The command line: exit 3 (no verdict) and one clear line, never a traceback."""
    cases = {
        "deep.json": "[" * 100_000,
        "future.json": json.dumps({**B200, "schema_version": 2}),
        "wrongtype.json": json.dumps({**B200, "gpus": "all of them"}),
        "binary.json": "\udcff",
        "nan.json": json.dumps({**B200, "gpus": [{**B200["gpus"][0], "cc_major": float("nan")}]}),
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        p = subprocess.run(
            [sys.executable, "-m", "fp4doctor", "check", "--facts", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 3, (name, p.stderr)
        assert "Traceback" not in p.stderr and p.stderr.startswith("fp4doctor: error:"), (
            name,
            p.stderr,
        )
        assert str(path) in p.stderr
        assert p.stdout == ""
