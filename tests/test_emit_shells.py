"""Every shell format, executed by the real shell, sets exactly the intended bytes and runs nothing.

For each shell the emitted text is applied the way a user applies it (``eval "$(...)"`` in
bash, zsh and dash; ``... | source`` in fish; ``Invoke-Expression`` in pwsh) inside a fresh
environment where every name already holds another value. The environment is dumped with
``env -0`` before and after, from inside that shell, and the difference must be exactly the
intended sets and unsets, byte for byte. Values are hostile (quotes, command substitutions,
separators, control bytes, non-ASCII, very long); a canary file that many of them try to create
must never appear, and the working directory must hold nothing new.

Example counts are bounded for CI (``FP4DOCTOR_SHELL_EXAMPLES``, default 100 per shell); for a
release run: ``FP4DOCTOR_SHELL_EXAMPLES=3000 pytest tests/test_emit_shells.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fp4doctor.emit import EmitError, Exports, emit

pytestmark = pytest.mark.shells

EXAMPLES = int(os.environ.get("FP4DOCTOR_SHELL_EXAMPLES", "25"))  # a deep run: 1000
CANARY = "CANARY"

# Names a knob could have: upper, lower, leading underscore, and a *PATH name (fish treats
# those as colon lists).
NAMES = ("FP4_A", "FP4_B", "VLLM_NVFP4_GEMM_BACKEND", "FP4_LIB_PATH", "fp4_lower", "_FP4_U")

# Fragments that mean something to at least one shell. "CANARY" is the relative name of the
# canary file (the shell runs in its directory); @CANARY@ is replaced by its absolute path.
FRAGMENTS = (
    "'", '"', "\\", "`", "$", "\\'", "'\\''", "''", "$(touch CANARY)", "`touch CANARY`",
    "$(touch @CANARY@)", "; touch CANARY", "&& touch CANARY", "|| touch CANARY",
    "| touch CANARY", "\ntouch CANARY\n", "'; touch CANARY; '", "\"; touch CANARY; \"",
    "'$(touch CANARY)'", "$'\\x41'", "${HOME}", "$HOME", "${FP4_A}", "$FP4_B", "$((1+1))",
    "%PATH%", "!!", "!$", "!-1", "*", "?", "[a-z]*", "~", "~root", "{a,b}", "{", "}", "(", ")",
    "(touch CANARY)", "$(New-Item CANARY)", "@(touch CANARY)", "$env:PATH", "#", " #", "# x",
    "&", "&&", ";", "|", "<", ">", ">CANARY", "2>CANARY", "<<EOF", "\\n", "\\x41", "\\u0041",
    "%", "%s", "=", "--", "-e", "-x", "set -gx FP4_A pwned;", "export FP4_A=pwned",
    "\r", "\r\n", "\n", "\t", "\x0b", "\x0c", "\x1b[31m", "\x7f", "\x01", "\x1f", "é",
    "€", "😀", "\u00a0", "\u0085", "\u2028", "\u2029", "\ufeff", "\u200b", "\u202e",
    "\u2018", "\u2019", "\u201a", "\u201b", "\u201c", "\u201d", "\uf600", "\uf641", "\uf6ff",
    "\ufdd0", "\ufdd1", "\ufdef", "\U0010fffd", "\x85", "\xff", " ", "  ", "\\\\", "\\\n",
)  # fmt: skip


def _text() -> st.SearchStrategy[str]:
    return st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=8)


def _control() -> st.SearchStrategy[str]:
    return st.characters(min_codepoint=1, max_codepoint=0x1F) | st.just("\x7f")


def _long(fragments: list[str]) -> st.SearchStrategy[str]:
    # One execve() string holds at most 128 KiB: stay well below it with the name.
    return st.sampled_from(fragments).flatmap(
        lambda f: st.integers(1, 60_000 // len(f.encode())).map(lambda n: f * n)
    )


def hostile_values(canary: Path) -> st.SearchStrategy[str]:
    fragments = [f.replace("@CANARY@", str(canary)) for f in FRAGMENTS]
    piece = st.sampled_from(fragments) | _text() | _control()
    short = st.lists(piece, max_size=12).map("".join)
    value = st.one_of(
        short, short, short, _long(fragments), st.just(""), st.sampled_from(fragments)
    )
    # A trailing backslash, alone or after anything.
    return value | short.map(lambda v: v + "\\")


def hostile_exports(canary: Path) -> st.SearchStrategy[Exports]:
    @st.composite
    def build(draw: st.DrawFn) -> Exports:
        names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
        n_unset = draw(st.integers(0, len(names) - 1))
        values = [draw(hostile_values(canary)) for _ in names[n_unset:]]
        return Exports(
            set=tuple(zip(names[n_unset:], values, strict=True)), unset=tuple(names[:n_unset])
        )

    return build()


@dataclass(frozen=True)
class Shell:
    name: str
    fmt: str
    argv: tuple[str, ...]  # the script path is appended
    driver: str  # dumps the environment, applies ./emitted, dumps again

    @property
    def binary(self) -> str | None:
        return shutil.which(self.argv[0], path="/usr/local/bin:/usr/bin:/bin")


POSIX_DRIVER = 'env -0 > before\neval "$(cat ./emitted)"\nenv -0 > after\n'
SHELLS = (
    Shell("bash", "bash", ("bash", "--norc", "--noprofile"), POSIX_DRIVER),
    Shell("zsh", "zsh", ("zsh", "-f"), POSIX_DRIVER),
    # RC_QUOTES makes '' inside single quotes a literal quote: the output must not care.
    Shell("zsh-rcquotes", "zsh", ("zsh", "-f", "-o", "rcquotes"), POSIX_DRIVER),
    Shell("dash", "sh", ("dash",), POSIX_DRIVER),
    Shell(
        "fish",
        "fish",
        ("fish", "--no-config"),
        "env -0 > before\ncat ./emitted | source\nenv -0 > after\n",
    ),
    Shell(
        "pwsh",
        "pwsh",
        ("pwsh", "-NoProfile", "-NonInteractive", "-File"),
        "$ErrorActionPreference = 'Stop'\n"
        "& /bin/sh -c 'exec env -0 > before'\n"
        "Get-Content -Raw -Encoding utf8 ./emitted | Invoke-Expression\n"
        "& /bin/sh -c 'exec env -0 > after'\n",
    ),
)

TRIED: dict[str, int] = {}


def _env_dump(data: bytes) -> dict[bytes, bytes]:
    entries = data.split(b"\0")
    assert entries[-1] == b""
    return dict(entry.partition(b"=")[::2] for entry in entries[:-1])


def apply_in_shell(
    shell: Shell, text: str, exports: Exports, workdir: Path, locale: str = "C.UTF-8"
) -> dict[bytes, bytes]:
    """Run `text` in the real shell; return the environment it leaves, checked against before."""
    (workdir / "emitted").write_bytes(text.encode("utf-8"))
    script = workdir / ("driver.ps1" if shell.fmt == "pwsh" else "driver")
    script.write_text(shell.driver)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir / "home"),
        "LC_ALL": locale,
        "FP4_BYSTANDER": "left alone: $(touch CANARY) ' \" \\ é",
    }
    for name in NAMES:
        env[name] = f"old value of {name}"
    proc = subprocess.run(
        [*shell.argv, str(script)],
        cwd=workdir,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    _check_nothing_ran(workdir)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stderr == b"", proc.stderr.decode(errors="replace")
    before = _env_dump((workdir / "before").read_bytes())
    after = _env_dump((workdir / "after").read_bytes())
    expected = dict(before)
    for name in exports.unset:
        assert name.encode() in before  # pre-set, so that the unset is observable
        del expected[name.encode()]
    for name, value in exports.set:
        expected[name.encode()] = value.encode("utf-8")
    assert after == expected
    return after


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fp4doctor-shells-") as tmp:
        yield Path(tmp)
    # Shown with `pytest -s`: the figure docs/reliability.md reports.
    print("\nhostile values applied per shell:", dict(sorted(TRIED.items())))


def _workdir(sandbox: Path) -> Path:
    workdir = Path(tempfile.mkdtemp(dir=sandbox))
    (workdir / "home").mkdir()
    return workdir


# Where test_sourcing_a_saved_file_works_too saves the output (POSIX shells: emitted.sh).
SAVED_FILE = {"pwsh": "emitted.ps1", "fish": "emitted.fish"}

# What a driver run leaves in its directory; anything else was created by a value.
EXPECTED_FILES = frozenset(
    [
        "home",
        "before",
        "after",
        "driver",
        "driver.ps1",
        "emitted",
        *SAVED_FILE.values(),
        "emitted.sh",
    ]
)


def _check_nothing_ran(workdir: Path) -> None:
    assert not (workdir / CANARY).exists(), "a value ran code: the canary file exists"
    left = {p.name for p in workdir.iterdir()}
    assert left <= EXPECTED_FILES, left


def _require(shell: Shell) -> None:
    if shell.binary is None:
        pytest.skip(f"{shell.argv[0]} is not installed on this host")


# A fixed worst case, tried first by every shell run.
EVERYTHING = Exports(
    set=(
        ("FP4_A", "".join(FRAGMENTS)),
        ("FP4_LIB_PATH", "a::b:$(touch CANARY):"),
        ("fp4_lower", "trailing backslash \\"),
        ("_FP4_U", "x" * 100_000),
    ),
    unset=("FP4_B", "VLLM_NVFP4_GEMM_BACKEND"),
)


@pytest.mark.parametrize("shell", SHELLS, ids=[s.name for s in SHELLS])
def test_hostile_values_round_trip_in_real_shell(shell: Shell, sandbox: Path) -> None:
    _require(shell)
    canary = sandbox / CANARY

    @settings(
        max_examples=EXAMPLES,
        # replaces the suite's list (tests/conftest.py), so it names too_slow again
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(exports=hostile_exports(canary))
    @example(exports=EVERYTHING)
    def run(exports: Exports) -> None:
        try:
            text = emit(shell.fmt, exports)
        except EmitError as exc:
            # Only pwsh refuses a value without NUL: the empty string (see pwsh.py).
            assert shell.fmt == "pwsh", exc
            assert any(value == "" for _, value in exports.set)
            return
        workdir = _workdir(sandbox)
        apply_in_shell(shell, text, exports, workdir)
        assert not canary.exists()
        TRIED[shell.name] = TRIED.get(shell.name, 0) + len(exports.set)
        shutil.rmtree(workdir)

    run()


@pytest.mark.parametrize("shell", SHELLS, ids=[s.name for s in SHELLS])
def test_nul_is_refused_before_any_shell_sees_it(shell: Shell) -> None:
    with pytest.raises(EmitError, match="FP4_A"):
        emit(shell.fmt, Exports(set=(("FP4_A", "a\0$(touch CANARY)"),)))


@pytest.mark.parametrize("shell", SHELLS, ids=[s.name for s in SHELLS])
def test_worst_case_in_the_c_locale(shell: Shell, sandbox: Path) -> None:
    """Shells that read bytes, not UTF-8, must still keep every byte of a non-ASCII value."""
    _require(shell)
    workdir = _workdir(sandbox)
    apply_in_shell(shell, emit(shell.fmt, EVERYTHING), EVERYTHING, workdir, locale="C")


@pytest.mark.parametrize("shell", SHELLS, ids=[s.name for s in SHELLS])
def test_sourcing_a_saved_file_works_too(shell: Shell, sandbox: Path) -> None:
    """`fp4doctor env > knobs.sh; . ./knobs.sh` reads the same as eval."""
    _require(shell)
    saved = SAVED_FILE.get(shell.fmt, "emitted.sh")
    driver = (
        shell.driver.replace(
            "Get-Content -Raw -Encoding utf8 ./emitted | Invoke-Expression", f". ./{saved}"
        )
        .replace("cat ./emitted | source", f"source ./{saved}")
        .replace('eval "$(cat ./emitted)"', f". ./{saved}")
    )
    assert driver != shell.driver
    workdir = _workdir(sandbox)
    text = emit(shell.fmt, EVERYTHING)
    (workdir / saved).write_text(text, encoding="utf-8")
    apply_in_shell(Shell(shell.name, shell.fmt, shell.argv, driver), text, EVERYTHING, workdir)


def test_fish_output_also_works_through_eval_of_a_command_substitution(sandbox: Path) -> None:
    """`eval (fp4doctor env --shell fish)` splits lines and joins them with spaces."""
    fish = next(s for s in SHELLS if s.name == "fish")
    _require(fish)
    exports = Exports(
        set=(("FP4_A", "line1\nline2\r\n'; touch CANARY; '"), ("FP4_B", "x\\\n")),
        unset=("FP4_LIB_PATH",),
    )
    variant = Shell(
        "fish-eval",
        "fish",
        fish.argv,
        fish.driver.replace("cat ./emitted | source", "eval (cat ./emitted)"),
    )
    workdir = _workdir(sandbox)
    apply_in_shell(variant, emit("fish", exports), exports, workdir)


# --- an engine's flags (a list), run as each shell runs them -----------------------------------

# A program that prints its argv one per line: it stands for `vllm`, on PATH as `vllm`.
ARGV_PRINTER = '#!/bin/sh\nfor a in "$@"; do printf \'%s\\n\' "$a"; done\n'
LIST_SHELLS = ("bash", "zsh", "zsh-rcquotes", "dash", "fish")


def _flags_from_fp4doctor(fmt: str) -> tuple[str, str]:
    """What `fp4doctor env` prints for vLLM 0.24 on a B200 (two flags, one per family), and
    the usage line it gives on stderr for that shell."""
    from click.testing import CliRunner
    from conftest import HOSTS_DIR

    from fp4doctor import cli

    facts = str(HOSTS_DIR / "b200.json")
    # Autotuning off, as stated: FlashInfer 0.6.1's MoE autotuner bugs ruled out (issue 31).
    args = ["env", "--facts", facts, "--engine-version", "0.24.0", "--autotune", "off"]
    args += ["--shell", fmt]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.stderr
    usage = [line for line in result.stderr.splitlines() if line.startswith("fp4doctor: use: ")]
    assert len(usage) == 1, result.stderr
    return result.stdout, usage[0].removeprefix("fp4doctor: use: ").split(" (", 1)[0]


@pytest.mark.parametrize("name", LIST_SHELLS)
def test_the_usage_line_hands_the_engine_one_argument_per_flag(name: str, sandbox: Path) -> None:
    """`vllm serve MODEL $FP4DOCTOR_VLLM_ARGS`, as fp4doctor prints it on stderr for this shell,
    run by the real shell after applying what fp4doctor printed on stdout: every flag arrives as
    its own argument (in zsh and fish an exported string arrived as one)."""
    shell = next(s for s in SHELLS if s.name == name)
    _require(shell)
    text, usage = _flags_from_fp4doctor(shell.fmt)
    # zsh: the array tied to the exported string (zsh cannot export an array, issue 42)
    variable = "$fp4doctor_vllm_args" if shell.fmt == "zsh" else "$FP4DOCTOR_VLLM_ARGS"
    assert usage == f"vllm serve MODEL {variable}"
    workdir = _workdir(sandbox)
    bindir = workdir / "home" / "bin"
    bindir.mkdir()
    (bindir / "vllm").write_text(ARGV_PRINTER)
    (bindir / "vllm").chmod(0o755)
    (workdir / "emitted").write_text(text)
    apply = "cat ./emitted | source" if shell.fmt == "fish" else 'eval "$(cat ./emitted)"'
    script = workdir / "driver"
    script.write_text(f"{apply}\n{usage} > argv\n")
    env = {"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir / "home")}
    proc = subprocess.run(
        [*shell.argv, str(script)], cwd=workdir, env=env, capture_output=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr.decode(errors="replace")
    assert (workdir / "argv").read_text().splitlines() == [
        "serve",
        "MODEL",
        "--linear-backend=flashinfer_cutlass",
        "--moe-backend=flashinfer_cutedsl",
    ]


@pytest.mark.parametrize("name", ("bash", "dash", "fish", "zsh", "zsh-rcquotes"))
def test_a_list_is_exported_as_the_words_joined_by_a_space(name: str, sandbox: Path) -> None:
    """A script the shell starts sees the flags too, as one string (zsh: the exported string
    tied to its array; an array alone was silently missing from every child, issue 42)."""
    shell = next(s for s in SHELLS if s.name == name)
    _require(shell)
    exports = Exports(set=(("FP4_A", "--a=x --b=y"),), lists=("FP4_A",))
    apply_in_shell(shell, emit(shell.fmt, exports), exports, _workdir(sandbox))


def test_a_word_that_an_unquoted_expansion_would_change_is_refused() -> None:
    for word in ("--a=*", "--a=$(x)", "", "--a=[b]", "--a=x\ty"):
        with pytest.raises(EmitError, match="one argument"):
            emit("bash", Exports(set=(("FP4_A", f"--z=1 {word}"),), lists=("FP4_A",)))
