"""The field corpus: real FP4 failures from public trackers, replayed against the doctor.

Each case is `cases/<id>.yaml` (what happened, the command a user in that situation runs, what a
correct doctor answers) and `hosts/<id>.json` (the host reconstructed as a facts snapshot). This
module loads them, runs the command in-process against the snapshot and judges the answer; the
pytest module (`tests/test_field_corpus.py`) and the catch-rate report (`tools/field_corpus.py`)
share it, so both apply one rule.

A case is *caught* when the doctor exits with the expected code and its report mentions every
expected name (case-insensitive). A case is *knowable* when its `needs` list is empty: the host
facts alone say what is wrong, without the model's shapes, MoE internals or a live run. A case
with an `unknowable: <why>` sentence is out of what a pre-flight can know even with the model
(MXFP4 rather than NVFP4, a runtime-only hang with no version boundary, ...): it keeps its
expectations and stays a strict xfail, and the report counts it apart (*in scope*: the others).

Every failure case carries `reported` (the date of the report's opening post) so the corpus can be
split by date: `held_out()` names the newest fifth, the part a rule written from the older cases
has not seen.

The precision corpus (`working/cases/<id>.yaml`, `working/hosts/<id>.json`) is the other side:
setups that public sources report running NVFP4 correctly. Its cases run with `--format json`
and *hold* when the doctor exits 0 (READY) and, per family the source names, the backend the
setup runs as the doctor models it (the engine's own pick, or the backend the command requires
when the source passed its flag) is that backend; a case that does not hold lists the failing
findings that blocked it (`WorkingVerdict.blocking`), and a held case whose recommended choice
differs says so (`WorkingVerdict.advice`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import yaml

FIELD_DIR = Path(__file__).resolve().parent
REPO_ROOT = FIELD_DIR.parent.parent
CASES_DIR = FIELD_DIR / "cases"
HOSTS_DIR = FIELD_DIR / "hosts"
WORKING_DIR = FIELD_DIR / "working" / "cases"
WORKING_HOSTS_DIR = FIELD_DIR / "working" / "hosts"

TARGETS = ("vllm", "sglang", "trtllm", "flashinfer")
CATEGORIES = ("arch", "moe", "bad-release", "packaging", "jit", "cudnn", "shape", "knob", "other")
NEEDS = ("moe", "model", "unknowable")
FAMILIES = ("linear", "moe")
HOLD_OUT_SHARE = 5  # the newest 1/5 of the failure corpus, by report date, is held out

# Variables from the outer environment that could change a verdict: engine knobs, FlashInfer and
# Triton settings, GPU selection and fp4doctor's own switches. They are removed while a case runs.
_ENV_PREFIXES = ("VLLM_", "SGLANG_", "FLASHINFER_", "TRTLLM_", "TLLM_", "TRITON_", "FP4DOCTOR_")
_ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "NO_COLOR", "FORCE_COLOR")


class CaseError(ValueError):
    """A case file that does not follow the corpus format."""


@dataclass(frozen=True)
class Case:
    """One field report, as the corpus records it."""

    id: str
    link: str
    title: str
    summary: str
    target: str
    command: str
    expect_exit: int
    expect_names: tuple[str, ...]
    category: str
    needs: tuple[str, ...]
    synthetic: tuple[str, ...]
    caught_since: str | None
    path: Path = field(compare=False)
    unknowable: str | None = None  # why no pre-flight can know it, even with the model
    reported: str = ""  # ISO date of the report's opening post (or the estimate in reported_source)
    reported_source: str = ""  # where the date was read, or how it was bounded
    kind: str = "failure"  # "working": a setup reported to run correctly (the precision corpus)
    expect_pick: tuple[tuple[str, str], ...] = ()  # (family, backend) the source names

    @property
    def knowable(self) -> bool:
        """True when host facts alone can tell what is wrong."""
        return not self.needs

    @property
    def in_scope(self) -> bool:
        """False when the case is marked `unknowable`: outside what fp4doctor models."""
        return self.unknowable is None

    @property
    def host_path(self) -> Path:
        hosts = WORKING_HOSTS_DIR if self.kind == "working" else HOSTS_DIR
        return hosts / f"{self.id}.json"

    def argv(self) -> list[str]:
        """The full fp4doctor argument list: the case's command against its host snapshot."""
        args = shlex.split(self.command)
        # `--model` names a header-only fixture relative to the repository root
        # (tests/fixtures/checkpoints/, written by tests/checkpoints/make.py).
        for i, arg in enumerate(args[:-1]):
            if arg == "--model" and not Path(args[i + 1]).is_absolute():
                args[i + 1] = str(REPO_ROOT / args[i + 1])
        # fp4doctor's own options go before `--`: what follows is the engine's command line.
        engine = args[args.index("--") :] if "--" in args else []
        args = args[: len(args) - len(engine)]
        args += ["--facts", str(self.host_path)]
        if args[0] == "check":
            args.append("--no-smoke")
        if self.kind == "working":
            args += ["--format", "json"]
        return args + engine


@dataclass(frozen=True)
class Run:
    """What the doctor did with one case."""

    exit_code: int
    output: str  # stdout and stderr together
    stdout: str = ""


@dataclass(frozen=True)
class Verdict:
    """Whether the doctor caught a case, and why not."""

    case: Case
    run: Run
    missing_names: tuple[str, ...]

    @property
    def exit_ok(self) -> bool:
        return self.run.exit_code == self.case.expect_exit

    @property
    def caught(self) -> bool:
        return self.exit_ok and not self.missing_names

    def explain(self) -> str:
        """One line saying what was expected and what came back."""
        if self.caught:
            return "caught"
        parts = []
        if not self.exit_ok:
            parts.append(f"exit {self.run.exit_code}, expected {self.case.expect_exit}")
        if self.missing_names:
            parts.append("report never mentions " + ", ".join(repr(n) for n in self.missing_names))
        return "; ".join(parts)


@dataclass(frozen=True)
class WorkingVerdict:
    """Whether the doctor said READY, with the source's backend, on a setup reported working."""

    case: Case
    run: Run
    chosen: tuple[tuple[str, str], ...]  # (family, backend the doctor settles on)
    blocking: tuple[str, ...]  # failing findings (advisory ids where they are advisories)
    engine: tuple[tuple[str, str], ...] = ()  # (family, backend the engine runs as set)

    @property
    def picked(self) -> dict[str, str]:
        """Per family, what the source's setup runs as the doctor models it: the backend the
        command requires (the source passed its flag), else the engine's own pick."""
        return dict(self.chosen) if "--require" in self.case.command else dict(self.engine)

    @property
    def wrong_picks(self) -> tuple[str, ...]:
        got = self.picked
        return tuple(
            f"{fam}: {want} (doctor: {got.get(fam) or 'none'})"
            for fam, want in self.case.expect_pick
            if got.get(fam) != want
        )

    @property
    def advice(self) -> tuple[str, ...]:
        """Families where the doctor's choice leaves the backend the setup runs."""
        picked = self.picked
        return tuple(
            f"{fam}: advises {mine} over {picked[fam]}"
            for fam, mine in self.chosen
            if picked.get(fam) and mine and mine != picked[fam]
        )

    @property
    def held(self) -> bool:
        return self.run.exit_code == self.case.expect_exit and not self.wrong_picks

    def explain(self) -> str:
        """One line: held, or the exit code, the blocking findings and the wrong picks."""
        if self.held:
            note = f" ({'; '.join(self.advice)})" if self.advice else ""
            return "ready, as reported" + note
        parts = []
        if self.run.exit_code != self.case.expect_exit:
            parts.append(f"exit {self.run.exit_code}")
            if self.blocking:
                parts.append("blocked by " + ", ".join(self.blocking))
        if self.wrong_picks:
            parts.append("picks " + "; ".join(self.wrong_picks))
        return "; ".join(parts)


# --- loading -----------------------------------------------------------------------------------


def _require(data: Mapping[str, Any], key: str, kind: type, where: Path) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise CaseError(f"{where}: '{key}' must be a {kind.__name__}")
    return value


def _strings(data: Mapping[str, Any], key: str, where: Path) -> tuple[str, ...]:
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CaseError(f"{where}: '{key}' must be a list of strings")
    return tuple(value)


def _reported(data: Mapping[str, Any], where: Path) -> tuple[str, str]:
    """The `reported` date (YAML date or ISO text) and where it was read."""
    value = data.get("reported")
    text = value.isoformat() if isinstance(value, date) else value
    if not isinstance(text, str) or not _DATE_RE.fullmatch(text):
        raise CaseError(f"{where}: 'reported' must be a date (YYYY-MM-DD)")
    source = _require(data, "reported_source", str, where)
    return text, source


_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise CaseError(f"{path}: expected a mapping")
    if data.get("id") != path.stem:
        raise CaseError(f"{path}: id '{data.get('id')}' does not match the file name")
    target = data.get("target")
    if target not in TARGETS:
        raise CaseError(f"{path}: target must be one of {', '.join(TARGETS)}")
    command = _require(data, "command", str, path)
    if f"--target {target}" not in command:
        raise CaseError(f"{path}: command must say --target {target}")
    return data


def parse_case(path: Path) -> Case:
    """Read and check one case file."""
    data = _load(path)
    case_id = data["id"]
    target = data["target"]
    link = _require(data, "link", str, path)
    if not link.startswith("https://github.com/") or not ("/issues/" in link or "/pull/" in link):
        raise CaseError(f"{path}: link must be a GitHub issue or pull request")
    reported, reported_source = _reported(data, path)
    category = _require(data, "category", str, path)
    if category not in CATEGORIES:
        raise CaseError(f"{path}: category must be one of {', '.join(CATEGORIES)}")
    needs = _strings(data, "needs", path)
    unknown = [n for n in needs if n not in NEEDS]
    if unknown:
        raise CaseError(f"{path}: needs may only hold {', '.join(NEEDS)} (got {unknown[0]!r})")
    expect = _require(data, "expect", dict, path)
    expect_exit = _require(expect, "exit", int, path)
    command = data["command"]
    caught_since = data.get("caught_since")
    if caught_since is not None and not isinstance(caught_since, str):
        raise CaseError(f"{path}: 'caught_since' must be a string or null")
    unknowable = data.get("unknowable")
    if unknowable is not None and (not isinstance(unknowable, str) or not unknowable.strip()):
        raise CaseError(f"{path}: 'unknowable' must be a sentence saying why, or absent")
    if unknowable is not None and caught_since is not None:
        raise CaseError(f"{path}: a case the doctor catches ('caught_since') is not 'unknowable'")
    case = Case(
        id=case_id,
        link=link,
        title=_require(data, "title", str, path),
        summary=_require(data, "summary", str, path),
        target=target,
        command=command,
        expect_exit=expect_exit,
        expect_names=_strings(expect, "names", path),
        category=category,
        needs=needs,
        synthetic=_strings(data, "synthetic", path),
        caught_since=caught_since,
        path=path,
        unknowable=unknowable,
        reported=reported,
        reported_source=reported_source,
    )
    if not case.host_path.is_file():
        raise CaseError(f"{path}: no host snapshot {case.host_path.name}")
    return case


def parse_working(path: Path) -> Case:
    """Read and check one precision-corpus case (a setup a public source reports working)."""
    data = _load(path)
    link = _require(data, "link", str, path)
    if not link.startswith("https://"):
        raise CaseError(f"{path}: link must be the https address of the source")
    expect = _require(data, "expect", dict, path)
    if expect.get("ready") is not True:
        raise CaseError(f"{path}: a working case expects 'ready: true'")
    pick = expect.get("pick") or {}
    if not isinstance(pick, dict) or not all(
        f in FAMILIES and isinstance(b, str) for f, b in pick.items()
    ):
        raise CaseError(f"{path}: 'expect.pick' maps a family (linear, moe) to a backend name")
    reported, reported_source = _reported(data, path)
    case = Case(
        id=data["id"],
        link=link,
        title=_require(data, "title", str, path),
        summary=_require(data, "summary", str, path),
        target=data["target"],
        command=data["command"],
        expect_exit=0,
        expect_names=(),
        category="other",
        needs=(),
        synthetic=_strings(data, "synthetic", path),
        caught_since=None,
        path=path,
        reported=reported,
        reported_source=reported_source,
        kind="working",
        expect_pick=tuple(sorted(pick.items())),
    )
    if not case.host_path.is_file():
        raise CaseError(f"{path}: no host snapshot {case.host_path.name}")
    return case


def load_cases(directory: Path = CASES_DIR) -> list[Case]:
    """Every case of the corpus, sorted by id."""
    return [parse_case(p) for p in sorted(directory.glob("*.yaml"))]


def load_working(directory: Path = WORKING_DIR) -> list[Case]:
    """Every case of the precision corpus, sorted by id."""
    return [parse_working(p) for p in sorted(directory.glob("*.yaml"))]


def shape_problems(cases: Sequence[Case], hosts_dir: Path) -> list[str]:
    """What is wrong with a corpus's layout: repeated ids, hosts without a case (or the reverse),
    host snapshots that do not load, name no GPU or do not name their case's source."""
    from fp4doctor import facts

    problems = []
    if len({c.id for c in cases}) != len(cases):
        problems.append("an id is repeated")
    hosts = sorted(p.stem for p in hosts_dir.glob("*.json"))
    if hosts != sorted(c.id for c in cases):
        problems.append(f"{hosts_dir}: every host must belong to exactly one case")
    for case in cases:
        loaded = facts.load(case.host_path)
        if not (loaded.synthetic and case.link in loaded.synthetic):
            problems.append(f"{case.id}: the host's `synthetic` does not name {case.link}")
        if not loaded.gpus:
            problems.append(f"{case.id}: the host lists no GPU")
    return problems


def held_out(cases: Iterable[Case]) -> frozenset[str]:
    """The ids of the newest fifth of the cases by report date (ties broken by id, newest last)."""
    ordered = sorted(cases, key=lambda c: (c.reported, c.id))
    n = max(1, round(len(ordered) / HOLD_OUT_SHARE)) if ordered else 0
    return frozenset(c.id for c in ordered[len(ordered) - n :])


# --- running and judging -----------------------------------------------------------------------


def _outer_fp4_variables(environ: Mapping[str, str]) -> list[str]:
    return [k for k in environ if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES]


@contextmanager
def clean_environment() -> Iterator[None]:
    """Remove the outer environment's FP4 variables for the duration of a run."""
    saved = {k: os.environ.pop(k) for k in _outer_fp4_variables(os.environ)}
    try:
        yield
    finally:
        os.environ.update(saved)


def run_case(case: Case) -> Run:
    """Run the case's command in-process (click's runner) against its host snapshot."""
    from click.testing import CliRunner

    from fp4doctor.cli import main

    with clean_environment():
        result = CliRunner().invoke(main, case.argv(), catch_exceptions=True)
    output = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        output += f"\n[field corpus] crashed: {result.exception!r}"
    return Run(exit_code=result.exit_code, output=output, stdout=result.stdout)


def judge_case(case: Case, run: Run | None = None) -> Verdict:
    """Run the case (unless a run is given) and judge the doctor's answer."""
    run = run if run is not None else run_case(case)
    # Whitespace collapsed on both sides: the report wraps at 80 columns, so an expected
    # phrase ("no kernel image") may be split across lines; where it wraps is layout, not content.
    text = " ".join(run.output.lower().split())
    missing = tuple(n for n in case.expect_names if " ".join(n.lower().split()) not in text)
    return Verdict(case=case, run=run, missing_names=missing)


def judge_all(cases: Iterable[Case]) -> list[Verdict]:
    return [judge_case(c) for c in cases]


_GPU_SUFFIX = re.compile(r"\.gpu\d+$")
_SETTINGS = ("env.", "resolve.")


def judge_working(case: Case, run: Run | None = None) -> WorkingVerdict:
    """Run a precision-corpus case (unless a run is given): READY, with the source's backend?"""
    run = run if run is not None else run_case(case)
    try:
        report = json.loads(run.stdout)
    except ValueError:
        report = {}
    families = report.get("families") or {}
    chosen = tuple(
        sorted(
            (fam, ((body.get("resolution") or {}).get("chosen") or ""))
            for fam, body in families.items()
        )
    )
    engine = tuple(sorted((fam, body.get("engine_as_set") or "") for fam, body in families.items()))
    # What blocked READY: the failing findings of the backends the engine picks by itself, of the
    # backends the source names, and of the engine settings (env./resolve. findings).
    findings = [f for f in report.get("findings") or [] if f.get("status") == "fail"]
    in_play = {body.get(k) for body in families.values() for k in ("engine_auto", "engine_as_set")}
    in_play |= {backend for _, backend in case.expect_pick}
    in_play |= {f.get("backend") for f in findings if str(f.get("id", "")).startswith(_SETTINGS)}
    blocking: list[str] = []
    for finding in findings:
        ident = str(finding.get("id", ""))
        if finding.get("backend") not in in_play and not ident.startswith(_SETTINGS):
            continue
        ident = _GPU_SUFFIX.sub("", ident)
        ident = ident.split(".advisory.", 1)[1] if ".advisory." in ident else ident
        if ident not in blocking:
            blocking.append(ident)
    return WorkingVerdict(
        case=case, run=run, chosen=chosen, blocking=tuple(blocking), engine=engine
    )
