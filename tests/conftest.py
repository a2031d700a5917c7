"""Shared test helpers. Keep each addition in its own clearly named function."""

from __future__ import annotations

import atexit
import compileall
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from smoke_fakes import FAULT_RUN, HAS_TORCH, NO_TORCH, FakeRun, fake_env, run_fakes

from fp4doctor import facts

HOSTS_DIR = Path(__file__).parent / "fixtures" / "hosts"


# --- the parsed-profile cache ------------------------------------------------------------------

# One cache for the whole run (pytest-xdist's workers inherit it from the controller, which
# removes it at the end): the suite's own fp4doctor runs use and fill it, and nothing lands in
# the home directory. tests/test_profile_cache.py checks the cache itself, each test in a
# directory of its own.
if "FP4DOCTOR_CACHE_DIR" not in os.environ:
    os.environ["FP4DOCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="fp4doctor-test-cache-")
    atexit.register(shutil.rmtree, os.environ["FP4DOCTOR_CACHE_DIR"], ignore_errors=True)


# --- the checkout's bytecode ------------------------------------------------------------------

# The command lines and smoke workers the tests start import fp4doctor and the tests' helpers
# from this checkout. Where PYTHONDONTWRITEBYTECODE is set (the development and device
# machines set it) each of them compiled every module it imported again: the whole suite took
# 94 s on the 2-core host, and 75 s with the bytecode compiled once here, as a pip install
# leaves it. Once, in the controller, before pytest-xdist starts its workers; a checkout that
# cannot be written is left as it is.
if not os.environ.get("PYTEST_XDIST_WORKER"):
    for tree in ("fp4doctor", "tests"):
        compileall.compile_dir(Path(__file__).parents[1] / tree, quiet=2)


# --- Hypothesis on any host --------------------------------------------------------------------

# Its timing checks judge the host, not the code: on the H200 device machine one draw of
# tests/test_probe_environment.py's strategy stalled 5.8 s and failed the "too slow" health
# check. Property tests here bound their own work; a slow or loaded host only makes them slower.
settings.register_profile("any-host", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("any-host")


# --- fixture hosts -----------------------------------------------------------------------------


def load_fixture_host(name: str) -> facts.HostFacts:
    """The facts of tests/fixtures/hosts/<name>.json."""
    return facts.load(HOSTS_DIR / f"{name}.json")


def fixture_host_names() -> list[str]:
    """Every fixture host, by file stem."""
    return sorted(p.stem for p in HOSTS_DIR.glob("*.json"))


@pytest.fixture
def fixture_host() -> Callable[[str], facts.HostFacts]:
    """`fixture_host("b200")` loads a fixture host's facts."""
    return load_fixture_host


# --- the `gpu` marker --------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def visible_gpu_count() -> int:
    """How many GPUs NVML shows this process (0 when NVML is absent or fails)."""
    from fp4doctor.probe.gpus import probe_gpus

    try:
        return len(probe_gpus().gpus)
    except Exception:
        return 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked `gpu` when no GPU is visible."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu_items and visible_gpu_count() == 0:
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU (NVML sees none)")
        for item in gpu_items:
            item.add_marker(skip)


# --- smoke runs through the fakes (tests/smoke_fakes.py) ----------------------------------------


def _run_the_faults(pid_dir: Path) -> FakeRun:
    from fp4doctor.smoke.worker import EXTRA_ADAPTERS_ENV

    env = fake_env(pid_dir)
    env[EXTRA_ADAPTERS_ENV] = "smoke_fakes:FAKES,smoke_fakes:OOM_FAKES"
    return run_fakes(list(FAULT_RUN), pid_dir, timeout_s=60, env=env)


@pytest.fixture(scope="session")
def fault_run(prefetched: Callable[..., FakeRun]) -> FakeRun:
    """One run through smoke_fakes.FAULT_RUN (wrong answers, crashes, out of memory, then
    `emulation`), shared by tests/test_smoke_faults.py and tests/test_faults_smoke.py: a
    worker costs `import torch`, so one run of 4 workers replaces three runs of 6. Started in
    the background (below)."""
    if not HAS_TORCH:
        pytest.skip(NO_TORCH)
    return prefetched(__name__, "fault_run", _run_the_faults)


# --- slow fixtures started early, in the background --------------------------------------------
#
# A few fixtures only wait on workers or subprocesses that import torch or FlashInfer (seconds
# each) and share nothing with the tests before them. A test module lists them in a module-level
# `PREFETCH = {"fixture_name": compute}` (compute takes an empty directory of its own; this
# file's own `PREFETCH` holds `fault_run`); when a collected test uses one, it is started in one
# background thread as soon as collection ends, so its waiting overlaps the tests before it
# (a lone pytest keeps only one core busy; under pytest-xdist, see below, nothing is started
# early). The fixture then calls
# `prefetched(__name__, "fixture_name", compute)`, which waits for that result (an exception is
# re-raised there), or computes it in place when nothing was started (the module run alone
# with -k, say). Only jobs that print nothing to our stdout and whose timing is measured inside
# themselves belong here; a test that changes state they read (fp4doctor.smoke.runner's
# timeouts) asks for `no_background_runs` first.

# A child started with vfork() from the prefetch thread shares the parent's memory until it
# execs; with tests running in the main thread meanwhile, one such exec failed here with EFAULT
# ("Bad address"). Plain fork() copies the memory first. (CPython's documented switch, 3.11+.)
if hasattr(subprocess, "_USE_VFORK"):
    subprocess._USE_VFORK = False

T = TypeVar("T")
_PREFETCHED: dict[tuple[str, str], Future[Any]] = {}
_PREFETCH_STATE: dict[str, Any] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or os.environ.get("FP4DOCTOR_NO_PREFETCH"):
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Under pytest-xdist every worker collects every test but runs only some: a prefetch
        # here would run each job once per worker. The workers' own parallelism does its work.
        return
    jobs: dict[tuple[str, str], Callable[[Path], Any]] = {}
    for item in session.items:
        module = getattr(item, "module", None)
        tables = [(__name__, PREFETCH), (getattr(module, "__name__", ""), {})]
        if module is not None:
            tables[1] = (module.__name__, getattr(module, "PREFETCH", {}))
        for name in getattr(item, "fixturenames", ()):
            for owner, table in tables:
                if name in table:
                    jobs.setdefault((owner, name), table[name])
    if not jobs:
        return
    root = Path(tempfile.mkdtemp(prefix="fp4doctor-prefetch-"))
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fp4doctor-prefetch")
    _PREFETCH_STATE.update(root=root, executor=executor)
    for number, (key, compute) in enumerate(jobs.items()):
        workdir = root / f"{number}-{key[1]}"
        workdir.mkdir()
        _PREFETCHED[key] = executor.submit(compute, workdir)


def pytest_sessionfinish(session: pytest.Session) -> None:
    executor = _PREFETCH_STATE.pop("executor", None)
    if executor is not None:
        executor.shutdown(wait=True, cancel_futures=True)
    root = _PREFETCH_STATE.pop("root", None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


# This file's own: the shared fault run (above).
PREFETCH: dict[str, Callable[[Path], Any]] = {"fault_run": _run_the_faults} if HAS_TORCH else {}


@pytest.fixture
def no_background_runs() -> None:
    """Waits until every job started early has finished: for a test that changes module state
    the runs in the background read (a monkeypatched timeout of fp4doctor.smoke.runner)."""
    for future in list(_PREFETCHED.values()):
        future.exception()  # waits; an error is reported by the fixture that takes it


@pytest.fixture(scope="session")
def prefetched(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str, str, Callable[[Path], T]], T]:
    """`prefetched(__name__, "name", compute)`: the result started early, or computed now."""

    def take(module: str, name: str, compute: Callable[[Path], T]) -> T:
        future = _PREFETCHED.pop((module, name), None)
        if future is None:
            return compute(tmp_path_factory.mktemp(name))
        result: T = future.result()
        return result

    return take


# --- every JSON document fp4doctor writes in a test matches its schema (fp4doctor/schemas) -----

# The commands whose JSON output has a published schema, and which schema. A command that writes
# JSON and is not listed here has no schema yet: the hook below cannot check it.
COMMAND_SCHEMAS = {
    "probe": "facts",
    "check": "report",
    "advisories": "advisories",
    "env": "env",
    "fleet": "fleet",
    "explain": "explain",
}


@functools.cache
def _schema_validator(kind: str, version: int) -> Any:
    import jsonschema

    from fp4doctor import schemas

    return jsonschema.Draft202012Validator(
        schemas.load(kind, version), format_checker=jsonschema.FormatChecker()
    )


def schema_errors(document: Any, kind: str | None = None) -> list[str]:
    """Why `document` does not match its schema (`kind`'s, else the one it names by its shape,
    `schemas.kind_of`), at the version its `schema_version` names; empty when it matches."""
    from fp4doctor import schemas

    try:
        if kind is None:
            kind, version = schemas.kind_of(document)
        else:
            version = document.get("schema_version", 1) if isinstance(document, dict) else 1
            version = version if isinstance(version, int) else 1  # the schema says what is wrong
        validator = _schema_validator(kind, version)
    except schemas.UnknownDocument as exc:
        return [str(exc)]
    return [
        f"{kind}-v{version} at {e.json_path}: {e.message[:300]}"
        for e in validator.iter_errors(document)
    ]


def _json_command(argv: Any) -> str | None:
    """The schema of what an fp4doctor command line writes, when it asks for JSON on stdout."""
    if not isinstance(argv, (list, tuple)) or not all(isinstance(a, str) for a in argv):
        return None
    args = list(argv)
    at = [i for i, a in enumerate(args) if a == "fp4doctor" or a.endswith("/fp4doctor")]
    wants = "--json" in args or any(
        args[i] in ("--shell", "--format") and args[i + 1] == "json" for i in range(len(args) - 1)
    )
    if not at or not wants or "--help" in args or "-h" in args or at[0] + 1 >= len(args):
        return None
    return COMMAND_SCHEMAS.get(args[at[0] + 1])


@pytest.fixture(autouse=True)
def json_output_matches_its_schema(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Validates every JSON document a test has fp4doctor write with a command of
    COMMAND_SCHEMAS: in process (`console.write` with kind "json", under click's context: CliRunner
    and direct calls) and from `subprocess.run` of an fp4doctor command line with `--json`,
    `--format json` or `--shell json`. A mismatch fails the test at teardown, not inside the
    command (where it would read as an exit code the test may expect)."""
    import importlib

    import click

    from fp4doctor import console
    from fp4doctor.cli import app

    found: list[str] = []

    def check(text: Any, kind: str, where: str) -> None:
        import json

        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if not isinstance(text, str) or not text.strip():
            return
        try:
            document = json.loads(text)
        except ValueError as exc:
            found.append(f"{where}: not JSON: {exc}")
            return
        found.extend(f"{where}: {e}" for e in schema_errors(document, kind))

    write = console.write

    def checked_write(text: str, *, kind: str = "text") -> None:
        ctx = click.get_current_context(silent=True)
        schema = COMMAND_SCHEMAS.get(ctx.info_name or "") if ctx is not None else None
        if kind == "json" and schema is not None:
            check(text, schema, f"fp4doctor {ctx.info_name if ctx else ''} (in process)")
        write(text, kind=kind)

    run = subprocess.run

    def checked_run(*args: Any, **kwargs: Any) -> Any:
        done = run(*args, **kwargs)
        argv = args[0] if args else kwargs.get("args")
        schema = _json_command(argv)
        if schema is not None:
            check(done.stdout, schema, " ".join(argv))
        return done

    checked_write.__wrapped__ = write  # type: ignore[attr-defined]
    checked_run.__wrapped__ = run  # type: ignore[attr-defined]
    # Every command module, loaded now, writes through the checked `write` it imported.
    commands = {importlib.import_module(module) for module, _ in app.COMMANDS.values()}
    for module in (console, *commands):
        if getattr(module, "write", None) is write:
            monkeypatch.setattr(module, "write", checked_write)
    monkeypatch.setattr(subprocess, "run", checked_run)
    yield
    if found:
        pytest.fail("JSON output that does not match its schema:\n" + "\n".join(found[:10]))
