"""The pipeline contract (issue 14): what users paste into shells, files and CI, run for real.

Real processes, real files and real shells: stdout on /dev/full, closed, or a closed pipe;
a locale that cannot carry UTF-8; a facts file whose strings hold terminal escapes; a
pseudo-terminal for colour; a Ctrl-C while the modules load; and every shell snippet of
docs/pipelines.md run in the shell it is written for, on a ready and a not-ready fixture host.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pty
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from fp4doctor import cli, console, facts, render, startup

ROOT = Path(__file__).resolve().parent.parent
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
PIPELINES = ROOT / "docs" / "pipelines.md"
TRACEBACKS = ("Traceback", "Exception ignored")  # an uncaught error, or one at shutdown


def host(name: str) -> str:
    return str(HOSTS / f"{name}.json")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "SGLANG_"))}
    for key in ("NO_COLOR", "TERM", "PYTHONIOENCODING", "LC_ALL", "LANG", "PYTHONUTF8"):
        env.pop(key, None)
    env.update(extra)
    return env


def fp4doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """The real command, bytes in and out: the encoding is part of what is tested."""
    return subprocess.run(
        [sys.executable, "-m", "fp4doctor", *args],
        capture_output=True,
        env=env or clean_env(),
        timeout=120,
    )


def no_traceback(err: bytes | str) -> None:
    text = err.decode("utf-8", "replace") if isinstance(err, bytes) else err
    assert not any(t in text for t in TRACEBACKS), text


# --- 8. write errors ---------------------------------------------------------------------------

WRITERS = [
    ("check", "--facts", host("b200"), "--no-smoke"),
    ("check", "--json", "--facts", host("b200"), "--no-smoke"),
    ("env", "--facts", host("b200")),
    ("probe", "--json"),
    ("--help",),
    ("profiles", "list"),
]


@pytest.mark.parametrize("args", WRITERS, ids=lambda a: " ".join(a[:2]))
def test_a_full_disk_is_exit_4_in_one_line(args: tuple[str, ...]) -> None:
    with open("/dev/full", "wb") as full:
        p = subprocess.run(
            [sys.executable, "-m", "fp4doctor", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            env=clean_env(),
            timeout=120,
        )
    err = p.stderr.decode()
    no_traceback(err)
    assert p.returncode == console.EXIT_WRITE_FAILED == 4, err
    assert err.splitlines()[-1] == (
        "fp4doctor: error: could not write the output: No space left on device"
    )


@pytest.mark.parametrize("args", WRITERS[:3], ids=lambda a: " ".join(a[:2]))
def test_a_closed_stdout_is_exit_4_in_one_line(args: tuple[str, ...]) -> None:
    command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "fp4doctor", *args))
    p = subprocess.run(
        ["bash", "-c", f"{command} >&-"], capture_output=True, text=True, env=clean_env()
    )
    no_traceback(p.stderr)
    assert p.returncode == 4, p.stderr
    assert (
        p.stderr.splitlines()[-1]
        == "fp4doctor: error: could not write the output: stdout is closed"
    )


def test_a_closed_pipe_is_exit_4_not_1() -> None:
    """The reader is gone before the report is written (`| true`): not "not ready"."""
    command = " ".join(
        shlex.quote(a)
        for a in (sys.executable, "-m", "fp4doctor", "check", "-v", "--facts", host("cpu"))
    )
    p = subprocess.run(
        ["bash", "-c", f'{command} --no-smoke | true; echo "rc=${{PIPESTATUS[0]}}"'],
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    no_traceback(p.stderr)
    assert p.stdout.strip() == "rc=4", p.stderr
    assert p.stderr.splitlines()[-1] == "fp4doctor: error: could not write the output: Broken pipe"


def test_exit_code_4_is_documented_everywhere() -> None:
    assert "4  could not write the output" in console.EXIT_CODES_HELP
    assert "4  could not write the output" in (cli.__doc__ or "")
    assert "| 4 | could not write the output" in (ROOT / "README.md").read_text()
    assert "| 4 | could not write the output" in PIPELINES.read_text()
    help_text = fp4doctor("check", "--help").stdout.decode()
    assert "4  could not write the output" in help_text


# --- 7. a locale that cannot carry UTF-8 ------------------------------------------------------

ASCII_LOCALES = {
    "PYTHONIOENCODING=ascii": {"LC_ALL": "C", "PYTHONIOENCODING": "ascii"},
    # No override: the C locale as Python sees it without its UTF-8 coercion.
    "C without coercion": {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},
}
HUMAN = [
    ("--help",),
    ("check", "--help"),
    ("check", "--facts", host("b200"), "--no-smoke"),
    ("check", "-v", "--facts", host("h200"), "--no-smoke"),
    ("check", "--facts", host("nvml-mismatch"), "--no-smoke"),
    ("advisories", "--facts", host("b200")),
    ("env", "--facts", host("h200")),
    ("probe",),
    ("profiles", "show", "vllm"),
]


@pytest.mark.parametrize("locale", ASCII_LOCALES)
@pytest.mark.parametrize("args", HUMAN, ids=lambda a: " ".join(a[:2]))
def test_an_ascii_locale_gets_ascii_and_no_traceback(args: tuple[str, ...], locale: str) -> None:
    p = fp4doctor(*args, env=clean_env(**ASCII_LOCALES[locale]))
    no_traceback(p.stderr)
    assert p.returncode in (0, 1, 3), p.stderr.decode("ascii", "replace")
    assert p.stdout.isascii() and p.stderr.isascii()
    assert b"\\u" not in p.stdout, "fp4doctor's own characters have an ASCII form"


def test_the_ascii_report_reads_the_same() -> None:
    p = fp4doctor(  # -v: the choice section too, with its arrow
        "check",
        "--facts",
        host("h200"),
        "--no-smoke",
        "-v",
        env=clean_env(PYTHONIOENCODING="ascii"),
    )
    out = p.stdout.decode("ascii")
    assert "1x NVIDIA H200 (9.0)" in out  # "1× NVIDIA H200"
    assert "fp4doctor 0.1.0 - vLLM" in out  # the "·" separator
    assert "  -> marlin:" in out  # the choice arrow
    help_text = fp4doctor("check", "--help", env=clean_env(PYTHONIOENCODING="ascii")).stdout
    assert b"ok valid, ! warning, XX not valid" in help_text  # the marks the report uses


def test_a_latin1_locale_keeps_what_it_can_carry() -> None:
    p = fp4doctor(
        "check", "--facts", host("h200"), "--no-smoke", "-v",
        env=clean_env(PYTHONIOENCODING="latin-1"),
    )  # fmt: skip
    no_traceback(p.stderr)
    out = p.stdout.decode("latin-1")
    assert "1× NVIDIA H200" in out and "-> marlin" in out


@pytest.mark.parametrize("locale", ASCII_LOCALES)
@pytest.mark.parametrize(
    "args",
    [
        ("check", "--json", "--facts", host("h200"), "--no-smoke"),
        ("advisories", "--json", "--facts", host("b200")),
        ("env", "--shell", "json", "--facts", host("b200")),
        ("probe", "--json"),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_json_in_an_ascii_locale_is_the_same_document_escaped(
    args: tuple[str, ...], locale: str
) -> None:
    p = fp4doctor(*args, env=clean_env(**ASCII_LOCALES[locale]))
    no_traceback(p.stderr)
    assert p.stdout.isascii()
    utf8 = fp4doctor(*args, env=clean_env(PYTHONIOENCODING="utf-8"))
    mine, theirs = json.loads(p.stdout), json.loads(utf8.stdout)
    if args[0] == "probe":  # taken twice: compare what does not move
        mine.pop("captured_at", None), theirs.pop("captured_at", None)
    assert mine == theirs


# --- 11. control characters from a facts file ------------------------------------------------

HOSTILE = "\x1b]0;owned\x07\x1b[2J\x1b[31m\r\x9b1m\u202e"


@pytest.fixture
def hostile_facts(tmp_path: Path) -> Path:
    doc = json.loads((HOSTS / "b200.json").read_text())
    doc["gpus"][0]["name"] = "NVIDIA B200" + HOSTILE
    doc["synthetic"] = "a note" + HOSTILE
    doc["env"]["VLLM_NVFP4_GEMM_BACKEND"] = "cudnn" + HOSTILE
    doc["packages"]["versions"]["vllm"] = "0.15.1"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(doc))
    return path


def _controls(text: str) -> list[str]:
    """The control characters left, fp4doctor's own colour codes aside."""
    return re.findall(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", re.sub(r"\x1b\[\d+m", "", text))


def test_control_characters_from_a_facts_file_reach_no_terminal(hostile_facts: Path) -> None:
    for args in (
        ("check", "--facts", str(hostile_facts), "--no-smoke"),
        ("check", "-v", "--facts", str(hostile_facts), "--no-smoke"),
        ("env", "--facts", str(hostile_facts)),
        ("advisories", "--facts", str(hostile_facts)),
    ):
        p = fp4doctor(*args)
        out, err = p.stdout.decode(), p.stderr.decode()
        assert _controls(out) == [] and _controls(err) == [], args
    report = fp4doctor("check", "-v", "--facts", str(hostile_facts), "--no-smoke").stdout.decode()
    assert "NVIDIA B200\\e]0;owned\\x07\\e[2J\\e[31m\\r\\x9b1m\\u202e" in report
    assert "synthetic facts: a note\\e]0;owned" in report


def test_colour_codes_stay_and_only_they(hostile_facts: Path) -> None:
    """On a real terminal: fp4doctor's own colours are kept, every other escape is shown."""
    out = run_on_a_terminal("check", "--facts", str(hostile_facts), "--no-smoke")
    assert "\x1b[1m" in out and "\x1b[0m" in out
    assert _controls(out) == []
    assert "\\e]0;owned\\x07" in out


def test_probe_escapes_control_characters_too(hostile_facts: Path) -> None:
    text = render.facts_text(facts.load(hostile_facts))
    assert _controls(text) == [] and "\\e]0;owned" in text


def test_no_verdict_does_not_read_as_no_gpu() -> None:
    p = fp4doctor("check", "--facts", host("nvml-mismatch"), "--no-smoke")
    header = p.stdout.decode().splitlines()[0]
    assert p.returncode == 3
    assert "GPUs unknown (NVML: driver_library_mismatch)" in header and "no GPU" not in header
    cpu = fp4doctor("check", "--facts", host("cpu"), "--no-smoke").stdout.decode()
    assert cpu.splitlines()[0].endswith("no GPU")  # NVML said so: that is a verdict


@pytest.mark.parametrize("verbose", [(), ("-v",)], ids=["plain", "verbose"])
def test_no_verdict_marks_every_backend_unknown_not_invalid(verbose: tuple[str, ...]) -> None:
    """Under NO VERDICT no backend reads "no NVIDIA GPU is visible" or gets a ✗ of its own."""
    from click.testing import CliRunner

    args = ["check", "--facts", host("nvml-mismatch"), "--no-smoke", *verbose]
    p = CliRunner().invoke(cli.main, args)
    assert p.exit_code == 3, p.output
    backends = p.stdout.split("\nBackends")[1].split("\n\n")[0].splitlines()[1:]
    heads = [line for line in backends if line.startswith("  - ")]
    assert len(heads) == 14 and all(render.NO_VERDICT_TEXT in line for line in heads)
    assert not [line for line in backends if line.startswith("  ✗")]
    if not verbose:
        assert "no NVIDIA GPU is visible" not in "\n".join(backends)
    choice = p.stdout.split("\nChoice (dense linear FP4 GEMM)\n")[1]
    assert choice.startswith("  - none: no verdict was reached")
    assert "NO VERDICT" in p.stdout and "NOT READY" not in p.stdout
    document = json.loads(CliRunner().invoke(cli.main, [*args, "--json"]).stdout)
    assert {b["valid"] for b in document["families"]["linear"]["backends"].values()} == {None}


@pytest.mark.parametrize(
    ("facts_name", "target"), [("b200-vllm-0.33", "vllm"), ("b200", "vllm"), ("b200", "trtllm")]
)
def test_config_with_nothing_to_set_is_an_empty_config_in_the_engines_format(
    tmp_path: Path, facts_name: str, target: str
) -> None:
    """Item 4: the engine picks the backend by itself; the file is still the engine's YAML.
    (The dense linear family: these fixtures' MoE family has a knob to set, tests/test_moe.py.)"""
    out = tmp_path / "engine.yaml"
    args = ("--target", target, "--facts", host(facts_name), "--family", "linear")
    p = fp4doctor("config", *args, "-o", str(out))
    err = p.stderr.decode()
    assert p.returncode == 0, err
    assert yaml.safe_load(out.read_text()) == {}
    assert "environment variables" not in err and "dotenv" not in err
    assert "writing an empty config" in err


# --- 12. --ignore -----------------------------------------------------------------------------


def test_an_ignore_pattern_that_names_nothing_is_reported() -> None:
    p = fp4doctor(
        "check", "--facts", host("b200"), "--no-smoke", "--ignore", "nosuch,backend.cutlass",
        "--ignore", "backend.cutlas",
    )  # fmt: skip
    err = p.stderr.decode()
    assert "--ignore nosuch: no finding has this id" in err
    assert "--ignore backend.cutlas: no finding" in err
    assert "--ignore backend.cutlass:" not in err  # it names findings
    assert "check -v" in err  # where the ids are listed


def test_env_says_when_an_ignored_failure_decides_the_outcome() -> None:
    base = ("env", "--facts", host("h200"), "--engine-version", "0.15.1", "--require", "cutlass")
    base = (*base, "--family", "linear")  # the MoE family has a cutlass too, not ignored here
    assert fp4doctor(*base).returncode == 1
    p = fp4doctor(*base, "--ignore", "backend.cutlass")
    err = p.stderr.decode()
    assert p.returncode == 0, err
    assert "--ignore changes the outcome: without it, this fails: GPU 0 (NVIDIA H200)" in err
    assert "[backend.cutlass.compute_capability.gpu0]" in err
    quiet = fp4doctor("env", "--facts", host("h200"), "--ignore", "backend.cutlass")
    assert "changes the outcome" not in quiet.stderr.decode()  # ignored, but not the choice


# --- 14. small things -------------------------------------------------------------------------


def run_on_a_terminal(*args: str, **env: str) -> str:
    """The command with stdout on a pseudo-terminal; what the terminal received."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(
            [sys.executable, "-m", "fp4doctor", *args],
            stdout=slave,
            stderr=subprocess.DEVNULL,
            env=clean_env(PYTHONIOENCODING="utf-8", **env),
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        p.wait(timeout=120)
    finally:
        os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")  # the terminal's own CR LF


@pytest.mark.parametrize(
    ("env", "coloured"),
    [({}, True), ({"NO_COLOR": ""}, True), ({"NO_COLOR": "1"}, False), ({"TERM": "dumb"}, False)],
)
def test_colour_follows_no_color_and_term(env: dict[str, str], coloured: bool) -> None:
    out = run_on_a_terminal("check", "--facts", host("b200"), "--no-smoke", **env)
    assert "READY" in out
    assert ("\x1b[" in out) is coloured


def test_one_warning_is_singular() -> None:
    out = fp4doctor("check", "--facts", host("gb200"), "--no-smoke").stdout.decode()
    assert "1 warning," in out and "1 warnings" not in out


def test_profiles_list_columns_line_up() -> None:
    lines = fp4doctor("profiles", "list").stdout.decode().splitlines()
    assert len(lines) >= 4
    for column in (
        r"^\S+ +",
        r"^.*? +(?=\d+ backends)",
        r"^.* +(?=up to )",
    ):  # title, counts, newest
        assert len({re.search(column, line).end() for line in lines}) == 1, lines  # type: ignore[union-attr]


def value_column(line: str) -> int:
    """Where the value starts on a `probe` row: after the label and at least two spaces."""
    if line.startswith("    "):  # a continuation row, no label
        return len(line) - len(line.lstrip())
    m = re.match(r"^ *\S+(?: \S+)* {2,}", line)
    assert m is not None, line
    return m.end()


def test_probe_columns_line_up_whatever_the_names() -> None:
    from dataclasses import replace

    host_facts = facts.load(HOSTS / "b200.json")
    versions = dict(host_facts.packages.versions)
    versions["a-package-with-a-name-longer-than-the-column"] = "1.0"
    host_facts = replace(host_facts, packages=replace(host_facts.packages, versions=versions))
    lines = render.facts_text(host_facts).splitlines()[1:]
    table = [line for line in lines if not line.startswith(("env ", "probe "))]
    assert any(line.startswith("  GPU 0") for line in table)
    assert len({value_column(line) for line in table}) == 1, table


INTERRUPT_WHILE_LOADING = textwrap.dedent(
    """
    import importlib.abc, os, signal, sys

    class Interrupt(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == {module!r} and self in sys.meta_path:
                sys.meta_path.remove(self)  # one Ctrl-C
                os.kill(os.getpid(), signal.SIGINT)  # while this module loads
            return None

    sys.meta_path.insert(0, Interrupt())
    {start}
    """
)


@pytest.mark.parametrize("module", ["click", "fp4doctor.findings", "fp4doctor.doctor"])
@pytest.mark.parametrize(
    "start",
    [
        "from fp4doctor.cli import main; sys.argv = ['fp4doctor', 'check', '--no-smoke', "
        "'--facts', {facts!r}]; sys.exit(main())",  # what the console script does
        "import runpy; sys.argv = ['fp4doctor', 'check', '--no-smoke', '--facts', {facts!r}]; "
        "runpy.run_module('fp4doctor', run_name='__main__')",  # python -m fp4doctor
    ],
    ids=["console-script", "python-m"],
)
def test_ctrl_c_while_the_modules_load_is_one_line_and_130(module: str, start: str) -> None:
    code = INTERRUPT_WHILE_LOADING.format(module=module, start=start.format(facts=host("b200")))
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=120
    )
    assert p.returncode == 130, p.stderr
    assert p.stderr == "fp4doctor: interrupted\n"
    assert p.stdout == ""


# --- 5 and 13. the documented snippets, run ---------------------------------------------------


def doc_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)\n```", PIPELINES.read_text(), re.S)


RECORD = '#!/bin/sh\n{{ printf "{name}"; printf " [%s]" "$@"; echo; }} >> "$CALLS"\n'


@pytest.fixture
def stubs(tmp_path: Path) -> Path:
    """A PATH directory: `fp4doctor` judging $FP4_FACTS, `python3` whose `-m venv` makes a venv
    holding that `fp4doctor` and a recording `pip`, and recording `vllm`, `scontrol`,
    `hostname`. Every call is appended to $CALLS."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "fp4doctor": f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m fp4doctor "
        '"$@" --facts "$FP4_FACTS"\n',
        "vllm": RECORD.format(name="vllm") + 'printf "vllm"; printf " [%s]" "$@"; echo\n',
        "scontrol": RECORD.format(name="scontrol"),
        "hostname": "#!/bin/sh\necho node-7\n",
        "python3": textwrap.dedent(
            f"""\
            #!/bin/sh
            if [ "$1" = -m ] && [ "$2" = venv ]; then
              for dir; do :; done
              mkdir -p "$dir/bin"
              ln -sf "{bin_dir}/fp4doctor" "$dir/bin/fp4doctor"
              printf '#!/bin/sh\\necho "pip $*" >> "$CALLS"\\n' > "$dir/bin/pip"
              chmod +x "$dir/bin/pip"
              echo "venv $*" >> "$CALLS"
              exit 0
            fi
            exec {shlex.quote(sys.executable)} "$@"
            """
        ),
    }
    for name, text in scripts.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def run_snippet(
    shell: list[str], script: str, stubs: Path, facts_name: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    calls = stubs.parent / "calls"
    calls.write_text("")
    full_env = clean_env(PATH=f"{stubs}:{os.environ['PATH']}")
    full_env.update(FP4_FACTS=host(facts_name), CALLS=str(calls), **env)
    p = subprocess.run(
        [*shell, script],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
        cwd=stubs.parent,
    )
    return p, calls.read_text()


READY, NOT_READY, NO_VERDICT = "b200-vllm-0.33", "cpu", "nvml-mismatch"


def test_pipelines_md_has_the_snippets_these_tests_run() -> None:
    sh = doc_blocks("sh")
    assert len(sh) == 4, "a new shell snippet in docs/pipelines.md needs a test that runs it"
    text = PIPELINES.read_text()
    assert 'eval "$(fp4doctor env' not in text.replace('`eval "$(fp4doctor env)"` alone', "")
    assert not re.search(r"pip install (-\S+ )*fp4doctor\s*$", text, re.M), "not on PyPI"
    assert "pip install ." in text  # as the README installs it
    assert "empty value" not in text or "an empty value is no" in text


@pytest.mark.parametrize("shell", ["sh", "bash", "dash", "zsh"])
def test_the_stop_pattern_stops_and_proceeds(stubs: Path, shell: str) -> None:
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed")
    pattern = doc_blocks("sh")[0]
    assert pattern.startswith("x=$(fp4doctor env")
    script = "set -e\n" + pattern + "\nvllm serve MODEL $FP4DOCTOR_VLLM_ARGS\n"
    for facts_name, code in ((NOT_READY, 1), (NO_VERDICT, 3)):
        p, calls = run_snippet([shell, "-c"], script, stubs, facts_name)
        assert p.returncode == code, p.stderr
        assert "vllm" not in calls
    p, calls = run_snippet([shell, "-c"], script, stubs, READY)
    assert p.returncode == 0, p.stderr
    assert calls == "vllm [serve] [MODEL] [--linear-backend=flashinfer_cudnn]\n"


def test_the_slurm_prolog_drains_with_a_reason_and_the_code(stubs: Path) -> None:
    prolog = doc_blocks("sh")[1]
    assert prolog.startswith("#!/bin/sh")
    for facts_name, code in ((NOT_READY, 1), (NO_VERDICT, 3)):
        p, calls = run_snippet(["sh", "-c"], prolog, stubs, facts_name)
        assert p.returncode == code, p.stderr
        assert calls.startswith(
            "scontrol [update] [nodename=node-7] [state=drain] [reason=fp4doctor: "
        )
        reason = calls.split("[reason=fp4doctor: ", 1)[1]
        assert not reason.startswith(("[", "not ready")), calls  # a sentence, not a list's repr
    p, calls = run_snippet(["sh", "-c"], prolog, stubs, READY)
    assert (p.returncode, calls) == (0, "")


def test_the_slurm_job_script_stops_or_serves(stubs: Path) -> None:
    job = doc_blocks("sh")[2]
    for facts_name, code in ((NOT_READY, 1), (NO_VERDICT, 3)):
        p, calls = run_snippet(["bash", "-c"], job, stubs, facts_name)
        assert p.returncode == code and calls == "", p.stderr
    p, calls = run_snippet(["bash", "-c"], job, stubs, READY)
    assert p.returncode == 0, p.stderr
    assert calls == "vllm [serve] [nvidia/DeepSeek-R1-FP4] [--linear-backend=flashinfer_cudnn]\n"


def test_the_offline_check_snippet_gives_the_hosts_exit_code(stubs: Path) -> None:
    offline = doc_blocks("sh")[3]
    assert offline.startswith("fp4doctor check --facts host.json")
    for facts_name, code in ((READY, 0), (NOT_READY, 1), (NO_VERDICT, 3)):
        p, _ = run_snippet(["bash", "-c"], offline, stubs, facts_name)
        assert p.returncode == code, p.stderr


def _gha_steps() -> dict[str, dict[str, object]]:
    block = next(b for b in doc_blocks("yaml") if "FP4 pre-flight" in b)
    return {step["name"]: step for step in yaml.safe_load(block)}


def test_the_github_actions_steps_install_check_and_fill_github_env(stubs: Path) -> None:
    steps = _gha_steps()
    install, preflight = str(steps["Install fp4doctor"]["run"]), str(steps["FP4 pre-flight"]["run"])
    github = stubs.parent / "github"
    github.mkdir()
    gh_env, gh_path = github / "env", github / "path"
    # The runner's own shell: bash --noprofile --norc -eo pipefail. The install step does not
    # depend on the host (its venv is made once; each host's pre-flight then runs from it).
    shell = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"]
    p, calls = run_snippet(shell, install, stubs, READY, GITHUB_PATH=str(gh_path))
    assert p.returncode == 0 and "pip install ./fp4doctor" in calls, p.stderr
    venv_bin = gh_path.read_text().strip()
    assert Path(venv_bin, "fp4doctor").exists()
    # b200 (vLLM 0.15) is ready: the known bugs of the MoE backend vLLM picks there need an EP
    # size, a model or autotuning that nothing establishes (issue 31), so they warn. Every
    # FlashInfer MoE backend of FlashInfer 0.6.1 has such a risk, so the MoE family is left to
    # vLLM's own pick (flashinfer-trtllm-moe): its variables are unset, not set.
    for facts_name, code in ((NOT_READY, 1), (NO_VERDICT, 3), ("b200", 0), (READY, 0)):
        expected_env = {  # vLLM 0.15 takes both choices as variables, 0.33 the linear as a flag
            "b200": [
                ("VLLM_NVFP4_GEMM_BACKEND", "flashinfer-cudnn"),
            ],
            READY: [("FP4DOCTOR_VLLM_ARGS", "--linear-backend=flashinfer_cudnn")],
        }
        gh_env.write_text("")
        p, _ = run_snippet(
            shell, preflight, stubs, facts_name, GITHUB_ENV=str(gh_env),
            PATH=f"{venv_bin}:{os.environ['PATH']}",
        )  # fmt: skip
        assert p.returncode == code, p.stderr
        report = json.loads((stubs.parent / "fp4doctor-report.json").read_text())
        assert report["exit_code"] == code
        written = gh_env.read_text()
        if code:
            assert written == ""
            continue
        blocks = re.findall(r"^(\w+)<<(\S+)\n(.*?)\n\2$", written, re.M | re.S)
        assert [(name, value) for name, _, value in blocks] == expected_env[facts_name], written
        assert "empty" not in p.stderr and "does not set" in p.stderr  # the unset ones, named


def test_the_kubernetes_init_container_writes_the_config_or_stops(
    stubs: Path, tmp_path: Path
) -> None:
    block = next(b for b in doc_blocks("yaml") if "initContainers" in b)
    init = yaml.safe_load(block)["spec"]["initContainers"][0]
    assert init["command"] == ["sh", "-c"]
    out_dir = tmp_path / "fp4"
    out_dir.mkdir()
    script = init["args"][0].replace("/tmp/fp4", f"{tmp_path}/venv").replace("/fp4/", f"{out_dir}/")
    config = out_dir / "vllm-fp4.yaml"
    for facts_name, code in ((NOT_READY, 1), (NO_VERDICT, 3)):
        p, calls = run_snippet(["sh", "-c"], script, stubs, facts_name)
        assert p.returncode == code, p.stderr
        assert "pip install /src/fp4doctor" in calls and not config.exists()
    p, calls = run_snippet(["sh", "-c"], script, stubs, READY)
    assert p.returncode == 0, p.stderr
    assert yaml.safe_load(config.read_text()) == {"linear-backend": "flashinfer_cudnn"}


def test_signal_module_is_left_as_python_set_it() -> None:
    """Importing the command line (as the tests do) leaves Ctrl-C to Python afterwards."""
    assert signal.getsignal(signal.SIGINT) is not startup._interrupted_while_loading


# --- 14 (item 5 of the rest). no GPU: the CPU emulation GEMM only when asked ---------------------


def _live_on_a_cpu_host(monkeypatch: pytest.MonkeyPatch, smoke: bool | None) -> tuple[Any, ...]:
    """`doctor._live` for this CPU fixture host, as if torch were installed. FAKE: `run_smoke` is
    a recorder standing for the ~5 s CPU run (what it would compute is not the point here)."""
    from fp4doctor import profile
    from fp4doctor import smoke as smoke_package
    from fp4doctor.doctor import Question, _live
    from fp4doctor.rules import evaluate

    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(smoke_package, "torch_available", lambda: True)
    monkeypatch.setattr(smoke_package, "run_smoke", lambda *a, **k: calls.append(a) or [])
    static = evaluate(profile.load("vllm"), facts.load(host("cpu")))
    results, note = _live(Question(target="vllm", smoke=smoke), [static], lambda _m: None)
    return results, note, calls


def test_no_gpu_skips_the_cpu_gemm_by_default_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    results, note, calls = _live_on_a_cpu_host(monkeypatch, None)
    assert calls == [] and results == []
    assert note == (
        "not run: no GPU here; the CPU run checks only fp4doctor's own NVFP4 pipeline and "
        "cannot change the verdict (--smoke runs it)"
    )


def test_no_gpu_with_smoke_asked_still_runs_the_cpu_gemm(monkeypatch: pytest.MonkeyPatch) -> None:
    _, note, calls = _live_on_a_cpu_host(monkeypatch, True)
    assert note is None and len(calls) == 1
    adapters, gpus = calls[0][:2]
    assert gpus == [] and adapters == ["emulation"]


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="the ~5 s this saves needs torch installed"
)
def test_check_on_this_host_without_a_gpu_runs_no_live_gemm_by_default() -> None:
    from click.testing import CliRunner
    from conftest import visible_gpu_count

    if visible_gpu_count():
        pytest.skip("this host has a GPU: the live GEMMs run there by default")
    p = CliRunner().invoke(cli.main, ["check", "--target", "vllm", "--format", "json"])
    document = json.loads(p.stdout)
    assert not [f for f in document["findings"] if f["id"].startswith("smoke.")]
    assert document["smoke_note"].startswith("not run: no GPU here;")


def test_an_advisory_id_as_fp4doctor_advisories_prints_it_is_ignored() -> None:
    """`--ignore` takes the advisory ids `fp4doctor advisories` lists (issue 31), not only the
    finding ids that carry them."""
    # An unconditional, reproduced bug (nvidia-cutlass-dsl 4.5.0 breaks the b12x MoE on SM12x):
    # it blocks wherever it applies (issue 39's policy; the vLLM SM12x CUTLASS entry, read only
    # from its PR's message, now warns).
    advisory = "cutlass-dsl-4.5.0-sm12x-block-scale-mma-ptxas"
    base = ("check", "--facts", host("gb10"), "--target", "vllm", "--json")
    before = json.loads(fp4doctor(*base, "--no-smoke").stdout)
    after_p = fp4doctor(*base, "--no-smoke", "--ignore", advisory)
    after = json.loads(after_p.stdout)

    def statuses(doc: dict[str, Any]) -> set[str]:
        return {f["status"] for f in doc["findings"] if f.get("advisory") == advisory}

    assert statuses(before) == {"fail"} and statuses(after) == {"warn"}
    assert f"--ignore {advisory}: no finding" not in after_p.stderr.decode()
