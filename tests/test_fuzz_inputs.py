"""Property-based fuzzing of the two inputs users hand us: profile YAML and facts JSON.

Every input ends in a clear error that names the file (and, for a schema error, the key), or is
accepted; never another exception, never a hang. Example counts are bounded for CI (50 per
property, which keeps this module to a few seconds on a 2-core host); set
FP4DOCTOR_FUZZ_EXAMPLES (e.g. 5000) for a longer run before a release (docs/reliability.md).

Deeply nested YAML is parsed in a child process: libyaml's composer (PyYAML's CSafeLoader)
recurses once per level, and some builds (PyYAML 6.0.3's wheels) overflow the C stack on
`[` * 50_000 and die with SIGSEGV, which in-process would end the whole pytest run.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fp4doctor import facts
from fp4doctor.profile import ProfileError, builtin_dir, load_file
from fp4doctor.profile.schema import parse

EXAMPLES = int(os.environ.get("FP4DOCTOR_FUZZ_EXAMPLES", "50"))
FUZZ = settings(
    max_examples=EXAMPLES,
    # replaces the suite's list (tests/conftest.py), so it names too_slow again
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# libyaml's emitter where PyYAML has it: the pure-Python one spent ~80 ms per example dumping
# the 23 kB profile, most of this module's time.
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
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


# The work a parse may do, counted in Python calls (`sys.setprofile`), not timed: a wall-clock
# budget fails on a busy machine. The whole vLLM profile takes about 48,000; every hostile text
# below takes under 400 (nesting and aliases are refused before they are walked).
MAX_PARSE_CALLS = 200_000
MAX_HOSTILE_CALLS = 10_000


def calls_of(call: Callable[[], None]) -> int:
    """How many Python and C functions `call()` calls (what it raises, it raises)."""
    count = [0]

    def tally(frame: object, event: str, arg: object) -> None:
        if event in ("call", "c_call"):
            count[0] += 1

    sys.setprofile(tally)
    try:
        call()
    finally:
        sys.setprofile(None)
    return count[0]


def assert_clean_profile_error(text: str) -> None:
    def attempt() -> None:
        try:
            parse(text, "fuzz.yaml")
        except ProfileError as exc:
            message = str(exc)
            assert message.startswith("fuzz.yaml"), message
            assert "Traceback" not in message

    assert calls_of(attempt) < MAX_PARSE_CALLS


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
        text = yaml.dump(mutate(VLLM_DATA, path, value, mode), Dumper=DUMPER, allow_unicode=True)
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


# Nested far deeper than any profile (100 000 levels), in flow and in block style. Each one
# is parsed in its own child process (see the module's docstring): on PyYAML 6.0.3 with
# libyaml the flow `[` and block `- ` cases crash libyaml's composer with SIGSEGV unless the
# loader refuses deep nesting before composing.
DEEP = {
    "deep-flow-sequences": "a: " + "[" * 100_000,
    "deep-flow-sequences-top-level": "[" * 100_000,
    "deep-flow-mappings": "a: " + "{b: " * 100_000,
    "deep-block-sequences": "a:\n" + "- " * 100_000 + "x\n",
}
HOSTILE = {
    **DEEP,
    # A billion laughs: nine levels of ten aliases.
    "billion-laughs": "a0: &a0 [lol]\n"
    + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10)),
    "python-object": "schema: !!python/object/apply:os.system ['touch PWNED']\n",
    "huge": "schema: 1\n" + "x" * (2 << 20),
    "two-documents": "---\nschema: 1\n---\nschema: 1\n",
    "bom-and-bidi": "\ufeffschema: 1\ntarget: \u202evllm\n",
}

_PARSE_IN_A_CHILD = (
    """
import json, sys
from fp4doctor.profile import ProfileError
from fp4doctor.profile.schema import parse
from collections.abc import Callable
text = sys.stdin.read()
outcome = {"raised": None}
"""
    + inspect.getsource(calls_of)
    + """
def attempt():
    try:
        parse(text, "hostile.yaml")
    except ProfileError as exc:
        outcome.update(raised="ProfileError", message=str(exc))
outcome["calls"] = calls_of(attempt)
print(json.dumps(outcome))
"""
)


def parse_in_a_child(text: str, cwd: Path) -> dict[str, Any]:
    """`parse(text)` in a fresh interpreter: a crash of the parser fails this one case."""
    done = subprocess.run(
        [sys.executable, "-c", _PARSE_IN_A_CHILD],
        input=text,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )
    assert done.returncode >= 0, (
        f"the parser killed its process with signal {-done.returncode} "
        f"(PyYAML {yaml.__version__}, libyaml {yaml.__with_libyaml__}): {done.stderr[-2000:]}"
    )
    assert done.returncode == 0, done.stderr[-2000:]  # any exception but ProfileError is a bug
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


def parse_here(text: str) -> dict[str, Any]:
    outcome: dict[str, Any] = {"raised": None}

    def attempt() -> None:
        try:
            parse(text, "hostile.yaml")
        except ProfileError as exc:
            outcome.update(raised="ProfileError", message=str(exc))

    outcome["calls"] = calls_of(attempt)
    return outcome


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_profiles_end_quickly_in_a_clear_error(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    text = HOSTILE[name]
    outcome = parse_in_a_child(text, tmp_path) if name in DEEP else parse_here(text)
    assert outcome["raised"] == "ProfileError", outcome
    assert outcome["message"].startswith("hostile.yaml"), outcome
    assert outcome["calls"] < MAX_HOSTILE_CALLS, outcome
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
