"""The emitters, as a specification: exact output per format, what each refuses, and read-back.

The formats that no shell reads are read back here by ports of their consumers' own parsers
(python-dotenv's, docker's env-file reader, the GitHub Actions runner's ``$GITHUB_ENV``
reader), so the check does not depend on those tools being installed. The shell formats are
executed by the real shells in tests/test_emit_shells.py.
"""

from __future__ import annotations

import codecs
import itertools
import json
import os
import re
from collections.abc import Mapping

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fp4doctor.emit import FORMATS, EmitError, Exports, emit, fish, gha, pwsh, sh
from fp4doctor.emit.config import render_args_yaml, render_trtllm_yaml
from fp4doctor.emit.exports import check

# Examples per property (a deep run: FP4DOCTOR_FUZZ_EXAMPLES=2000).
FUZZ_EXAMPLES = int(os.environ.get("FP4DOCTOR_FUZZ_EXAMPLES", "100"))

SIMPLE = Exports(set=(("A", "x"), ("B", "it's")), unset=("C",))

# ---------------------------------------------------------------------------------------------
# Exact output per format


def test_formats_are_the_documented_ones() -> None:
    assert FORMATS == ("bash", "zsh", "fish", "sh", "pwsh", "dotenv", "gha", "json")


@pytest.mark.parametrize("fmt", ["bash", "zsh", "sh"])
def test_posix_shells(fmt: str) -> None:
    assert emit(fmt, SIMPLE) == "unset -v C\nexport A='x'\nexport B='it'\\''s'\n"


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("", "''"),
        ("'", "\\'"),
        ("''", "\\'\\'"),
        ("a'", "'a'\\'"),
        ("'a", "\\''a'"),
        ('$(x) `y` \\ "z"', "'$(x) `y` \\ \"z\"'"),
        ("a\nb", "'a\nb'"),
    ],
)
def test_posix_quote(value: str, quoted: str) -> None:
    assert sh.quote(value) == quoted


def _posix_tokens(word: str) -> list[str]:
    """Split a quoted word into 'quoted' runs and backslash-escaped characters."""
    tokens, i = [], 0
    while i < len(word):
        if word[i] == "\\":
            tokens.append(word[i : i + 2])
            i += 2
        else:
            assert word[i] == "'", word
            end = word.index("'", i + 1)
            tokens.append(word[i : end + 1])
            i = end + 1
    return tokens


@pytest.mark.parametrize("value", ["'", "''", "a''b", "'''", "x'", "'x'y''", "a"])
def test_posix_quote_never_closes_and_reopens_quotes(value: str) -> None:
    # zsh with RC_QUOTES reads '' inside a quoted string as a literal quote, so a closing
    # quote is never directly followed by an opening one.
    tokens = _posix_tokens(sh.quote(value))
    assert all(a[0] != "'" or b[0] != "'" for a, b in itertools.pairwise(tokens)), tokens
    assert "".join(t[1] if t[0] == "\\" else t[1:-1] for t in tokens) == value


def test_fish() -> None:
    assert emit("fish", SIMPLE) == "set -e -g C;\nset -gx A 'x';\nset -gx B 'it\\'s';\n"


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("", "''"),
        ("a\\b", "'a\\\\b'"),
        ("\\", "'\\\\'"),
        ("'", "'\\''"),
        ("a\nb", "'a'\\n'b'"),
        ("\r\n", "\\r\\n"),
        ("$(x) (y) {a,b} *", "'$(x) (y) {a,b} *'"),
    ],
)
def test_fish_quote(value: str, quoted: str) -> None:
    assert fish.quote(value) == quoted


def test_pwsh() -> None:
    assert emit("pwsh", SIMPLE) == (
        "Remove-Item -LiteralPath Env:C -ErrorAction Ignore\n$env:A = 'x'\n$env:B = 'it''s'\n"
    )


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("a", "'a'"),
        ("it's", "'it''s'"),
        ("\u2018\u2019\u201a\u201b", "'\u2018\u2018\u2019\u2019\u201a\u201a\u201b\u201b'"),
        ('$x `y` "z" \u201c', "'$x `y` \"z\" \u201c'"),
        ("a\nb", "'a' + [char]10 + 'b'"),
        ("\n", "'' + [char]10"),
        ("a\r\n\r\nb", "'a' + [char]13 + [char]10 + [char]13 + [char]10 + 'b'"),
    ],
)
def test_pwsh_quote(value: str, quoted: str) -> None:
    assert pwsh.quote(value) == quoted


def test_pwsh_refuses_an_empty_value() -> None:
    with pytest.raises(EmitError, match=r"cannot emit A for pwsh.*empty string") as info:
        emit("pwsh", Exports(set=(("A", ""),)))
    assert info.value.key == "A"


def test_dotenv() -> None:
    exports = Exports(set=(("A", "x"), ("B", "--linear-backend=flashinfer_cudnn")), unset=("C",))
    assert emit("dotenv", exports) == (
        "# unset C (a dotenv file cannot remove a variable)\n"
        "A=x\nB=--linear-backend=flashinfer_cudnn\n"
    )


@pytest.mark.parametrize(
    "value",
    ["--linear-backend=flashinfer_cudnn", "a=b", "a:b,c", "x+y@z%1/2_3.4-5", "=", ""],
)
def test_dotenv_writes_bare_values(value: str) -> None:
    assert emit("dotenv", Exports(set=(("A", value),))) == f"A={value}\n"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("a\nb", "newline"),
        ("a\rb", "newline"),
        ("--linear-backend flashinfer_cudnn", "two flags in one value"),
        (" a", "whitespace"),
        ("a ", "whitespace"),
        ("a\t", "whitespace"),
        ("a\u00a0", "whitespace"),
        ("'a'", "quote"),
        ('"a"', "quote"),
        ("a'b", "quote"),
        ("\\", "backslash"),
        ("a #b", "whitespace"),
        ("a#b", "comment"),
        ("#x", "comment"),
        ("~/x", "tilde"),
        ("${HOME}", r"expands"),
        ("$HOME", r"expands"),
        ("`id`", r"expands"),
        ("a;b", "operator"),
        ("a|b", "operator"),
        ("(a)", "operator"),
        ("é", "ASCII"),
        ("\x1b", "ASCII"),
        ("x" * 70_000, "64"),
    ],
)
def test_dotenv_refuses_what_its_readers_would_change(value: str, why: str) -> None:
    with pytest.raises(EmitError, match=rf"cannot emit A for dotenv.*{why}") as info:
        emit("dotenv", Exports(set=(("A", value),)))
    assert info.value.key == "A"
    assert "fp4doctor env --shell bash" in str(info.value)
    assert "fp4doctor env --shell json" in str(info.value)


def test_gha_with_a_known_delimiter() -> None:
    text = gha.render(SIMPLE, delimiter="EOF")
    # C, the name to unset, is left out: $GITHUB_ENV cannot unset, and an empty value would
    # be read as set (the CLI names it on stderr instead).
    assert text == "A<<EOF\nx\nEOF\nB<<EOF\nit's\nEOF\n"


def test_gha_delimiter_is_random_and_long() -> None:
    first, second = emit("gha", SIMPLE), emit("gha", SIMPLE)
    assert first != second
    delimiter = first.splitlines()[0].split("<<")[1]
    assert re.fullmatch(r"FP4DOCTOR_EOF_[0-9a-f]{32}", delimiter)


@pytest.mark.parametrize("value", ["EOF", "a\nEOF\nb", "xEOFy", "a\nEOF"])
def test_gha_refuses_a_value_containing_the_delimiter(value: str) -> None:
    with pytest.raises(EmitError, match=r"cannot emit B for gha.*delimiter") as info:
        gha.render(Exports(set=(("A", "fine"), ("B", value))), delimiter="EOF")
    assert info.value.key == "B"


def test_gha_refusal_through_emit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gha, "new_delimiter", lambda: "FIXED")  # fake: a guessable delimiter
    with pytest.raises(EmitError, match="delimiter"):
        emit("gha", Exports(set=(("A", "a\nFIXED\nA=pwned"),)))


def test_gha_refuses_a_trailing_cr() -> None:
    with pytest.raises(EmitError, match=r"cannot emit A for gha.*CR"):
        emit("gha", Exports(set=(("A", "a\r"),)))


def test_json() -> None:
    assert emit("json", SIMPLE) == (
        '{\n  "outcome": "ready",\n  "set": {\n    "A": "x",\n    "B": "it\'s"\n  },\n'
        '  "unset": [\n    "C"\n  ]\n}\n'
    )


def test_json_is_ascii() -> None:
    text = emit("json", Exports(set=(("A", "é\n😀"),)))
    assert text.isascii()
    assert json.loads(text)["set"]["A"] == "é\n😀"


# ---------------------------------------------------------------------------------------------
# Rules shared by every format


@pytest.mark.parametrize("fmt", FORMATS)
def test_output_ends_with_newline_and_unsets_come_first(fmt: str) -> None:
    text = emit(fmt, Exports(set=(("SETME", "v"),), unset=("GONE",)))
    assert text.endswith("\n")
    if fmt == "gha":  # $GITHUB_ENV cannot unset: names to unset are left out
        assert "GONE" not in text
    elif fmt != "json":  # a document, {"set": ..., "unset": ...}, not statements
        assert text.index("GONE") < text.index("SETME")


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "json"])
def test_nothing_to_export_is_empty(fmt: str) -> None:
    assert emit(fmt, Exports()) == ""


def test_nothing_to_export_in_json() -> None:
    assert json.loads(emit("json", Exports())) == {"outcome": "ready", "set": {}, "unset": []}


BAD_KEYS = ["", "1A", "A-B", "A B", "A=B", "É", "A\n", "A;rm", "$(x)", "A.B", "a\0"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("key", BAD_KEYS)
def test_invalid_names_are_refused(fmt: str, key: str) -> None:
    for exports in (Exports(set=((key, "v"),)), Exports(unset=(key,))):
        with pytest.raises(EmitError, match=re.escape(repr(key))) as info:
            emit(fmt, exports)
        assert "^[A-Za-z_][A-Za-z0-9_]*$" in str(info.value)


@pytest.mark.parametrize("key", ["A", "_", "_a1", "vllm_x", "VLLM_NVFP4_GEMM_BACKEND"])
def test_valid_names(key: str) -> None:
    assert key in emit("bash", Exports(set=((key, "v"),)))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value", ["\0", "a\0b", "abc\0"])
def test_nul_is_refused_everywhere(fmt: str, value: str) -> None:
    with pytest.raises(EmitError, match=r"KNOB.*NUL") as info:
        emit(fmt, Exports(set=(("KNOB", value),)))
    assert info.value.key == "KNOB"


@pytest.mark.parametrize("fmt", FORMATS)
def test_lone_surrogate_is_refused_everywhere(fmt: str) -> None:
    with pytest.raises(EmitError, match=r"KNOB.*surrogate"):
        emit(fmt, Exports(set=(("KNOB", "a\udcff"),)))


def test_non_string_value_is_refused() -> None:
    with pytest.raises(EmitError, match=r"KNOB.*string"):
        emit("bash", Exports(set=(("KNOB", 1),)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("exports", "message"),
    [
        (Exports(set=(("A", "1"), ("A", "2"))), "A is set twice"),
        (Exports(set=(("A", "1"),), unset=("A",)), "A is both set and unset"),
        (Exports(unset=("A", "A")), "A is named twice"),
    ],
)
def test_each_name_appears_once(exports: Exports, message: str) -> None:
    with pytest.raises(EmitError, match=message):
        emit("bash", exports)


def test_unknown_format_lists_the_valid_ones() -> None:
    with pytest.raises(EmitError) as info:
        emit("tcsh", SIMPLE)
    message = str(info.value)
    assert "'tcsh'" in message
    for fmt in FORMATS:
        assert fmt in message


def test_emit_error_is_a_value_error() -> None:
    assert issubclass(EmitError, ValueError)


# ---------------------------------------------------------------------------------------------
# Read back by the consumers' own parsers

HOSTILE_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=40)
FRAGMENTS = st.sampled_from(
    ["'", '"', "\\", "$", "${A}", "$A", "#", " #", " ", "\t", "\n", "\r", "=", "<<", "EOF", "é"]
)
VALUES = st.one_of(HOSTILE_TEXT, st.lists(FRAGMENTS | HOSTILE_TEXT, max_size=10).map("".join))
NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)


@st.composite
def exports_strategy(draw: st.DrawFn) -> Exports:
    names = draw(st.lists(NAMES, min_size=1, max_size=5, unique=True))
    n_unset = draw(st.integers(0, len(names)))
    values = [draw(VALUES) for _ in names[n_unset:]]
    return Exports(
        set=tuple(zip(names[n_unset:], values, strict=True)), unset=tuple(names[:n_unset])
    )


# python-dotenv (src/dotenv/parser.py and variables.py), ported: the parts a line of ours
# can reach, including the ${NAME} expansion that load_dotenv/dotenv_values apply.
_DOTENV_WS = re.compile(r"[^\S\r\n]*")
_DOTENV_EXPORT = re.compile(r"(?:export[^\S\r\n]+)?")
_DOTENV_KEY = re.compile(r"([^=\#\s]+)")
_DOTENV_EQUAL = re.compile(r"(=[^\S\r\n]*)")
_DOTENV_SINGLE = re.compile(r"'((?:\\'|[^'])*)'")
_DOTENV_DOUBLE = re.compile(r'"((?:\\"|[^"])*)"')
_DOTENV_UNQUOTED = re.compile(r"([^\r\n]*)")
_DOTENV_COMMENT = re.compile(r"(?:[^\S\r\n]*#[^\r\n]*)?")
_DOTENV_EOL = re.compile(r"[^\S\r\n]*(?:\r\n|\n|\r|$)")
_DOTENV_VARIABLE = re.compile(r"\$\{(?P<name>[^\}:]*)(?::-(?P<default>[^\}]*))?\}")


def _unescape(pattern: str, value: str) -> str:
    return re.sub(pattern, lambda m: codecs.decode(m.group(0), "unicode-escape"), value)


def python_dotenv_values(text: str, environ: Mapping[str, str]) -> dict[str, str | None]:
    text = text.removeprefix("\ufeff")
    pos = 0
    values: dict[str, str | None] = {}

    def read(regex: re.Pattern[str]) -> re.Match[str]:
        nonlocal pos
        match = regex.match(text, pos)
        assert match is not None, f"python-dotenv cannot parse at {pos}: {text[pos : pos + 40]!r}"
        pos = match.end()
        return match

    while pos < len(text):
        read(re.compile(r"\s*", re.MULTILINE))
        if pos >= len(text):
            break
        read(_DOTENV_EXPORT)
        key = None if text[pos] == "#" else read(_DOTENV_KEY).group(1)
        read(_DOTENV_WS)
        value: str | None = None
        if text[pos : pos + 1] == "=":
            spaced = len(read(_DOTENV_EQUAL).group(1)) > 1
            first = text[pos : pos + 1]
            if first == "'":
                value = _unescape(r"\\[\\']", read(_DOTENV_SINGLE).group(1))
            elif first == '"':
                value = _unescape(r"\\[\\'\"abfnrtv]", read(_DOTENV_DOUBLE).group(1))
            elif first in ("", "\n", "\r"):
                value = ""
            else:
                part = read(_DOTENV_UNQUOTED).group(1)
                value = "" if spaced and part.startswith("#") else re.sub(r"\s+#.*", "", part)
                value = value.rstrip()
        read(_DOTENV_COMMENT)
        read(_DOTENV_EOL)
        if key is not None:
            if value is not None:
                env = {**environ, **values}  # dotenv_values: override=True

                def resolve(m: re.Match[str], env: Mapping[str, str | None] = env) -> str:
                    found = env.get(m.group("name"), m.group("default") or "")
                    return found or ""

                value = _DOTENV_VARIABLE.sub(resolve, value)
            values[key] = value
    return values


def docker_env_file(text: str) -> dict[str, str]:
    """docker/cli opts/file.go parseKeyValueFile (bufio.Scanner lines, 64 KiB limit)."""
    data = text.encode("utf-8")
    result: dict[str, str] = {}
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    for number, raw in enumerate(lines):
        assert len(raw) + 1 <= 64 * 1024, "bufio.Scanner: token too long"
        raw = raw.removesuffix(b"\r")  # ScanLines drops a trailing CR
        if number == 0:
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        line = raw.decode("utf-8").lstrip()  # TrimLeftFunc(unicode.IsSpace)
        if not line or line.startswith("#"):
            continue
        variable, sep, value = line.partition("=")
        variable = variable.lstrip(" \t")
        assert variable and not re.search("[ \t]", variable), f"ErrBadKey: {line!r}"
        assert sep, f"a bare name takes its value from docker's environment: {line!r}"
        result[variable] = value
    return result


@settings(max_examples=FUZZ_EXAMPLES)
@given(exports=exports_strategy())
@example(exports=Exports(set=(("A", "${HOME}"),)))
@example(exports=Exports(set=(("A", "a #b"),)))
def test_dotenv_reads_back_exactly_in_python_dotenv_and_docker(exports: Exports) -> None:
    try:
        text = emit("dotenv", exports)
    except EmitError as exc:
        assert exc.key in dict(exports.set)
        return
    intended = dict(exports.set)
    assert docker_env_file(text) == intended
    assert python_dotenv_values(text, {"HOME": "/root", "A": "from-env"}) == intended


@settings(max_examples=FUZZ_EXAMPLES)
@given(exports=exports_strategy())
def test_dotenv_accepts_every_plain_value(exports: Exports) -> None:
    plain = Exports(
        set=tuple((k, re.sub(r"[^A-Za-z0-9_.,:+=@%/-]", "", v) + "-v") for k, v in exports.set),
        unset=exports.unset,
    )
    emit("dotenv", plain)


def github_env_file(text: str, *, windows: bool) -> dict[str, str]:
    """actions/runner SetEnvFileCommand.ProcessCommand, ported (with its OS_WINDOWS branch)."""
    result: dict[str, str] = {}
    index = 0

    def read_line() -> tuple[str | None, str | None]:
        nonlocal index
        if index >= len(text):
            return None, None
        start = index
        lf = text.find("\n", index)
        if lf < 0:
            index = len(text)
            return text[start:], None
        crlf = text.find("\r\n", index) if windows else -1
        if 0 <= crlf < lf:
            index = crlf + 2
            return text[start:crlf], "\r\n"
        index = lf + 1
        return text[start:lf], "\n"

    line, _ = read_line()
    while line is not None:
        if line:
            equals, heredoc = line.find("="), line.find("<<")
            if equals >= 0 and (heredoc < 0 or equals < heredoc):
                name, value = line.split("=", 1)
                result[name] = value
            elif heredoc >= 0 and (equals < 0 or heredoc < equals):
                name, delimiter = line.split("<<", 1)
                assert name and delimiter
                start = end = index
                temp, newline = read_line()
                while temp != delimiter:
                    assert temp is not None, f"Matching delimiter not found '{delimiter}'"
                    assert newline is not None
                    end = index - len(newline)
                    temp, newline = read_line()
                result[name] = text[start:end] if end > start else ""
            else:
                raise AssertionError(f"Invalid format '{line}'")
        line, _ = read_line()
    return result


@settings(max_examples=FUZZ_EXAMPLES)
@given(exports=exports_strategy(), delimiter=st.sampled_from([None, "EOF", "x"]))
def test_gha_reads_back_exactly_on_linux_and_windows_runners(
    exports: Exports, delimiter: str | None
) -> None:
    try:
        text = gha.render(check(exports), delimiter=delimiter)
    except EmitError as exc:
        assert exc.key in dict(exports.set)
        return
    intended = dict(exports.set)
    assert github_env_file(text, windows=False) == intended
    assert github_env_file(text, windows=True) == intended


@settings(max_examples=FUZZ_EXAMPLES)
@given(exports=exports_strategy())
def test_json_round_trip(exports: Exports) -> None:
    document = json.loads(emit("json", exports))
    assert document == {"outcome": "ready", "set": dict(exports.set), "unset": list(exports.unset)}
    assert list(document["set"]) == [name for name, _ in exports.set]


# ---------------------------------------------------------------------------------------------
# Engine config files


def test_vllm_yaml() -> None:
    text = render_args_yaml([("--linear-backend", "flashinfer_cudnn")])
    assert text.startswith("# ")
    assert "fp4doctor" in text.splitlines()[0]
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == ["linear-backend: flashinfer_cudnn"]


def test_vllm_yaml_quotes_what_yaml_would_retype() -> None:
    args = [("--a", "yes"), ("--b", "1.0"), ("--c", "null"), ("--d", "x: y # z"), ("--e", "")]
    loaded = yaml.safe_load(render_args_yaml(args))
    assert loaded == {"a": "yes", "b": "1.0", "c": "null", "d": "x: y # z", "e": ""}


@settings(max_examples=FUZZ_EXAMPLES)
@given(values=st.lists(VALUES, max_size=4))
def test_vllm_yaml_round_trip(values: list[str]) -> None:
    args = [(f"--opt-{i}", v) for i, v in enumerate(values)]
    assert yaml.safe_load(render_args_yaml(args)) == {k[2:]: v for k, v in args}


@pytest.mark.parametrize("option", ["linear-backend", "-x", "--", "--a b", "--a=b", "--\n"])
def test_vllm_yaml_refuses_what_is_not_a_long_option(option: str) -> None:
    with pytest.raises(EmitError, match="invalid vLLM option"):
        render_args_yaml([(option, "v")])


def test_vllm_yaml_refuses_a_repeated_option_and_nul() -> None:
    with pytest.raises(EmitError, match="twice"):
        render_args_yaml([("--a", "1"), ("--a", "2")])
    with pytest.raises(EmitError, match="NUL"):
        render_args_yaml([("--a", "x\0")])


def test_trtllm_yaml_nests_dotted_keys_in_block_style() -> None:
    text = render_trtllm_yaml({"nvfp4_gemm_config.allowed_backends": ["cutlass"]})
    assert text.startswith("# ")
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == ["nvfp4_gemm_config:", "  allowed_backends:", "  - cutlass"]


def test_trtllm_yaml_round_trip() -> None:
    config = {
        "nvfp4_gemm_config.allowed_backends": ("cutlass", "cublaslt"),
        "a.b.c": 1,
        "a.b.d": True,
        "a.e": None,
        "f": "yes",
        "g": {"h": 1.5},
    }
    assert yaml.safe_load(render_trtllm_yaml(config)) == {
        "nvfp4_gemm_config": {"allowed_backends": ["cutlass", "cublaslt"]},
        "a": {"b": {"c": 1, "d": True}, "e": None},
        "f": "yes",
        "g": {"h": 1.5},
    }


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"a.b": 1, "a.b.c": 2}, "conflicts"),
        ({"a.b.c": 1, "a.b": 2}, "conflicts|twice"),
        ({"a..b": 1}, "invalid TensorRT-LLM option"),
        ({"a-b": 1}, "invalid TensorRT-LLM option"),
        ({"": 1}, "invalid TensorRT-LLM option"),
        ({"a": object()}, "cannot write"),
        ({"a": "x\0"}, "NUL"),
        ({"a": {1: 2}}, "keys must be strings"),
    ],
)
def test_trtllm_yaml_refusals(config: dict[str, object], message: str) -> None:
    with pytest.raises(EmitError, match=message):
        render_trtllm_yaml(config)
