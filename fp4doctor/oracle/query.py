"""The parent side of the oracle: which cases to ask, one worker to ask them, and the answers
kept between runs.

No torch, no engine here. `start` builds the cases from the static evaluations (each GPU's
compute capability x the knobs as set and as `fp4doctor env` would set them), and starts one
worker (`oracle.worker`, under the engine's interpreter) in a background thread, so that the
engine's imports (seconds) run while the live GEMMs do. `Asking.answers()` waits for it.

The answers are deterministic in what the worker reads: the engine's installed files, the
cases and the environment. They are kept in fp4doctor's cache directory (fp4doctor/cache.py),
keyed on every package the rules and the adapters read, present or absent, with each present
one's RECORD as a file they depend on: an install or a reinstall of any of them asks again
(`_cache_key`).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from fp4doctor import cache
from fp4doctor.checkpoint.quant import CT_NVFP4A16
from fp4doctor.oracle import sameness
from fp4doctor.oracle.answers import AS_SET, Answer, Case, EngineAnswers
from fp4doctor.profile.model import FAMILY_LINEAR, FAMILY_MOE
from fp4doctor.selection.choice import ResolveError, resolve

if TYPE_CHECKING:
    from fp4doctor.facts import HostFacts
    from fp4doctor.rules import Evaluation
    from fp4doctor.smoke.runner import _Worker

ENGINE_PYTHON_ENV = "FP4DOCTOR_ENGINE_PYTHON"
"""The interpreter of the engine's environment, when it is not the one fp4doctor runs under
(fp4doctor installed with pipx, vLLM in its own venv)."""
TIMEOUT_S = 600.0
"""The worker's whole budget: `import torch` and the engine's selection modules measured
10-150 s on the 2-core CPU host (vLLM 0.34.0's kernel registry pulls in torch._dynamo and
transformers; SGLang's resolution about 10 s), well under a second per case after that."""
ENGINES = {"vllm": "vllm", "sglang": "sglang"}  # target -> the worker's --engine
WEIGHT_ONLY: dict[tuple[str, str], tuple[str, ...] | None] = {
    ("vllm", FAMILY_LINEAR): None,
    ("vllm", FAMILY_MOE): None,
    ("sglang", FAMILY_LINEAR): (CT_NVFP4A16,),
    ("sglang", FAMILY_MOE): (CT_NVFP4A16,),
}
"""Per engine and family, the checkpoint formats whose weight-only (W4A16) layer class the
engine's adapters ask as such (None: every one). vLLM: `init_nvfp4_linear_kernel(use_a16=True)`
for the linear layers, and for the experts `select_nvfp4_moe_backend(config, kNvfp4Static,
None)`, which ModelOpt W4A16_NVFP4 and compressed-tensors NVFP4A16 experts both call (the
`activation_key=None if use_a16` of modelopt.py and compressed_tensors_moe_w4a4_nvfp4.py,
wheels 0.18.0-0.34.0). SGLang chooses only for compressed-tensors W4A16 layers: its linear
scheme follows --fp4-gemm-backend (0.5.22+), its MoE scheme (`CompressedTensorsW4A16Nvfp4MoE`,
0.5.23) runs Marlin; its ModelOpt W4A16 linear method is Marlin whatever is set
(profiles/shapes.yaml `weight_only`)."""


def engine_python(env: Mapping[str, str] | None = None) -> str:
    """The interpreter that runs the worker: $FP4DOCTOR_ENGINE_PYTHON, else fp4doctor's own."""
    return (os.environ if env is None else env).get(ENGINE_PYTHON_ENV) or sys.executable


def installed(package: str) -> bool:
    """Whether the engine can be asked here: found in this interpreter (not imported), or an
    engine interpreter is named."""
    if os.environ.get(ENGINE_PYTHON_ENV):
        return True
    try:
        metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return False
    return True


def cases_for(
    evaluation: Evaluation, weight_only: bool = False, every_weight_only: bool = False
) -> list[Case]:
    """What to ask for one family: for each compute capability of the GPUs judged, the knobs
    as set, and for each backend the rules would let `fp4doctor env --prefer` choose, the
    knobs it would write (its variables set and unset, its arguments). `weight_only`: also
    the knobs as set for the model's weight-only (W4A16) layer class of the family;
    `every_weight_only`: every FP4 layer of the family is weight-only, so every case asks the
    engine's weight-only selection (it is all that runs)."""
    family, era = evaluation.family, evaluation.era
    env = evaluation.context.env
    read = sorted(era.read_variables() | set(era.conflicts))
    as_set = tuple((k, env[k]) for k in read if k in env)
    not_set = tuple(k for k in read if k not in env)
    knob_sets: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...], tuple[str, ...]]] = {}
    for name in evaluation.profile.backends:
        try:
            r = resolve(evaluation, prefer=name)
        except (ResolveError, ValueError):
            continue
        if r.chosen is None or r.knob is None or r.chosen in knob_sets:
            continue
        keep = dict(as_set)
        for variable in r.unset_env:
            keep.pop(variable, None)
        keep.update(dict(r.set_env))
        unset = tuple(sorted({*r.unset_env, *not_set} - set(keep)))
        args = tuple(f"{k}={v}" for k, v in r.cli_args)
        knob_sets[r.chosen] = (tuple(sorted(keep.items())), unset, args)
    ccs = sorted({(g.cc_major, g.cc_minor) for g in evaluation.facts.gpus})
    every = every_weight_only
    out: list[Case] = []
    for cc in ccs:
        out.append(Case(AS_SET, family, cc, as_set, not_set, a16=every))
        out += [Case(b, family, cc, s, u, a, a16=every) for b, (s, u, a) in knob_sets.items()]
        if weight_only and not every:
            out.append(Case(AS_SET, family, cc, as_set, not_set, a16=True))
    return out


def start(
    evaluations: Sequence[Evaluation],
    *,
    stub: bool,
    weight_only: Collection[str] = (),
    every_weight_only: Collection[str] = (),
    model: Mapping[str, object] | None = None,
    model_format: str | None = None,
    facts: HostFacts | None = None,
) -> Asking | None:
    """Ask the engine the evaluations judge, in the background, when it can be asked here: it
    is installed, fp4doctor has an adapter for it, and there are GPUs (this host's, or a facts
    file's) to ask for. `stub`: answer the engine's capability query with each case's compute
    capability (a host without GPUs, or a facts file: another host's GPUs). `weight_only`:
    the families in which the model has weight-only (W4A16) layers, asked as such too where
    the engine chooses for its format (`model_format`, WEIGHT_ONLY); `every_weight_only`: the
    families whose FP4 layers are all weight-only (cases_for). `model`: its config.json, for an
    engine whose resolution reads the model (SGLang's per-model overrides). `facts`: the facts
    file judged; the engine is asked only when it is the facts' engine (oracle/sameness.py)."""
    first = evaluations[0]
    prof = first.profile
    engine = ENGINES.get(prof.target)
    if engine is None or not first.facts.gpus or not installed(prof.engine.package):
        return None
    cases: list[Case] = []
    for e in evaluations:
        formats = WEIGHT_ONLY.get((engine, e.family), ())
        a16 = e.family in weight_only and (formats is None or model_format in formats)
        cases += cases_for(e, a16, a16 and e.family in every_weight_only)
    packages = sorted(prof.packages())
    return Asking(
        engine,
        prof.title,
        first.engine.version,
        cases,
        stub=stub,
        package=prof.engine.package,
        packages=packages,
        env=None,
        model=model,
        expect=sameness.expected(facts, packages) if facts is not None else None,
    )


class Asking:
    """One worker asking the engine in a background thread; `answers()` waits for it."""

    def __init__(
        self,
        engine: str,
        title: str,
        judged: str,
        cases: Sequence[Case],
        *,
        package: str,
        packages: Sequence[str] = (),
        stub: bool,
        env: Mapping[str, str] | None = None,
        model: Mapping[str, object] | None = None,
        timeout_s: float = TIMEOUT_S,
        expect: sameness.Expected | None = None,
    ) -> None:
        """`expect`: what a facts snapshot holds (another host's); the worker asks only when
        this install is its engine, and hides from it what the facts lack."""
        self.engine, self.title, self.judged = engine, title, judged
        self.expect = expect
        self.model = dict(model) if model is not None else None
        self.package = package
        self.packages = tuple(packages)
        self.cases = tuple(cases)
        self.stub = stub
        self.env = dict(os.environ if env is None else env)
        self.timeout_s = timeout_s
        self._result: EngineAnswers | None = None
        self._thread = threading.Thread(target=self._run, name="oracle", daemon=True)
        self._thread.start()

    def answers(self) -> EngineAnswers:
        self._thread.join()
        assert self._result is not None
        return self._result

    def _unasked(self, reason: str, version: str | None = None) -> EngineAnswers:
        return EngineAnswers(self.title, version or self.judged, unasked=reason, cases=self.cases)

    def _run(self) -> None:
        try:
            self._result = self._ask()
        except Exception as exc:  # a bug or an OS failure here must not lose the report
            self._result = self._unasked(f"{type(exc).__name__}: {exc}")

    def _ask(self) -> EngineAnswers:
        entry = _cache_key(self)
        if entry is not None:
            kept = cache.cached(entry[0], entry[1], lambda: (None, []))
            if isinstance(kept, EngineAnswers):
                return kept
        result = self._from_worker()
        if entry is not None and result.unasked is None:
            cache.cached(entry[0], entry[1], lambda: (result, entry[2]))
        return result

    def _from_worker(self) -> EngineAnswers:
        # Here, not at the top: a `check` with no engine to ask never loads the smoke package.
        from fp4doctor.smoke.runner import _Worker, worker_env

        python = engine_python(self.env)
        cmd = [python, "-P", "-m", "fp4doctor.oracle.worker", "--engine", self.engine,
               "--parent-pid", str(os.getpid()), *(["--stub"] if self.stub else [])]  # fmt: skip
        # The smoke workers' environment (this checkout first on the path, FlashInfer's JIT and
        # downloads off); on a host with GPUs the engine sees the first one, as it would.
        visible = self.env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] if not self.stub else ""
        worker = _Worker(cmd, worker_env(self.env, visible, False), job_on_stdin=True)
        job: dict[str, object] = {"cases": [c.to_dict() for c in self.cases], "model": self.model}
        if self.expect is not None:
            job["facts"] = self.expect.to_dict()
        try:  # read by the worker as it starts
            assert worker.proc.stdin is not None
            worker.proc.stdin.write((json.dumps(job) + "\n").encode())
            worker.proc.stdin.close()
        except (OSError, ValueError):
            pass  # it died while starting: _follow says how
        return self._follow(worker)

    def _follow(self, worker: _Worker) -> EngineAnswers:
        """The worker's answers, read under its budget: the deadline and the byte caps hold
        while it writes; a worker that exited is not waited for (a child it left may hold the
        pipe); what it says is checked against the adapter's own vocabulary."""
        from fp4doctor.smoke.runner import _LineReader, _parse

        assert worker.proc.stdout is not None
        _LIVE.add(worker)
        reader = _LineReader(worker.proc.stdout)
        deadline = time.monotonic() + self.timeout_s
        hearing = _Hearing(self.engine, self.judged, {c.key: c for c in self.cases})
        eof = exited = False
        over: str | None = None
        try:
            while not (hearing.done or hearing.unasked is not None or eof) and over is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                lines, eof = reader.read(0.0 if exited else min(0.25, left))
                for line in lines:
                    msg = _parse(line)
                    if msg is not None and hearing.take(msg):
                        break
                if reader.total > MAX_PIPE_BYTES:
                    over = f"its worker wrote over {_size(MAX_PIPE_BYTES)} on its answer pipe"
                elif worker.stderr_bytes > MAX_STDERR_BYTES:
                    over = f"its worker wrote over {_size(MAX_STDERR_BYTES)} to stderr"
                elif exited and reader.last == 0:
                    break  # what it wrote before it exited is read; a child's pipe is not waited on
                exited = exited or worker.exited()
        finally:
            reader.close()
            rc = worker.reap(0.0)  # done, or given up on: its group goes
            _LIVE.discard(worker)
            tail = worker.stderr_tail(400)
            worker.close()
        version = hearing.version
        if over is not None:
            return self._unasked(f"{over}: stopped", version)
        if hearing.unasked is not None:
            return self._unasked(hearing.unasked, version)
        if not hearing.done:
            why = (f"its worker ended (exit {rc}) before answering" if eof or exited
                   else f"no answer within {self.timeout_s:g} s")  # fmt: skip
            last = (tail or "").strip().splitlines()[-1:] or [""]
            return self._unasked(f"{why}{': ' + last[0] if last[0] else ''}", version)
        return EngineAnswers(self.title, version, hearing.adapter, hearing.got, cases=self.cases)


MAX_PIPE_BYTES = 1 << 20
"""What the worker may write on its answer pipe: a hundred cases' answers are a few tens of KiB."""
MAX_STDERR_BYTES = 16 << 20
"""What the worker may write to stderr (the engines' import warnings are a few KiB); past it the
worker is stopped. Only the last 64 KiB are kept (smoke/runner.py `_StderrTail`)."""


def _size(n: int) -> str:
    return f"{n >> 20} MiB"


class _Hearing:
    """The worker's messages as they come, each checked: the release it names must be one the
    adapter it names asks (worker.adapter_for), and each answer's backend must be the one that
    adapter's vocabulary gives its kernel name (a kernel that says Marlin with a backend that
    says flashinfer-cudnn is refused, and with it every answer of that worker)."""

    def __init__(self, engine: str, judged: str, cases: Mapping[str, Case]) -> None:
        self.engine, self.judged, self.cases = engine, judged, cases
        self.version: str | None = None
        self.adapter: str | None = None
        self.names: Callable[[Case, str], str | None] | None = None
        self.got: dict[str, Answer] = {}
        self.unasked: str | None = None
        self.done = False

    def take(self, msg: Mapping[str, object]) -> bool:
        """Take one message; True when nothing more is to be read."""
        event = msg["event"]
        if event == "hello":
            self.version, self.adapter = str(msg.get("version")), str(msg.get("adapter"))
            self.unasked = self._hello()
        elif event == "unasked":
            self.unasked = str(msg.get("reason"))[:_MAX_REASON]
        elif event == "answer" and self.names is not None:
            try:
                answer = Answer.from_dict({k: v for k, v in msg.items() if k != "event"})
            except (KeyError, TypeError):
                return False
            case = self.cases.get(answer.key)
            if case is None:
                return False  # not a question asked
            if answer.engine_name is not None:
                expected = self.names(case, answer.engine_name)
                if answer.backend != expected:
                    self.unasked = (
                        f"its worker's answer does not hold: kernel {answer.engine_name[:80]} is "
                        f"{expected or 'unknown to the rules'}, not {str(answer.backend)[:80]}"
                    )
                    return True
            self.got[answer.key] = answer
        elif event == "done":
            self.done = True
        return self.done or self.unasked is not None

    def _hello(self) -> str | None:
        from fp4doctor.oracle.worker import adapter_for, vocabulary
        from fp4doctor.versions import same_version

        version = str(self.version)
        if not same_version(version, self.judged):
            return f"judging {self.judged}, but {version[:80]} is installed"
        try:
            module = adapter_for(self.engine, version)
        except ValueError:  # packaging's InvalidVersion
            module = None
        if module is None or module.rsplit(".", 1)[1] != self.adapter:
            return (f"its worker names adapter {str(self.adapter)[:80]} for {version}, which no "
                    "adapter of fp4doctor's asks that way")  # fmt: skip
        self.names = vocabulary(self.adapter)
        return None


_MAX_REASON = 2000
_LIVE: set[_Worker] = set()
"""The oracle workers running now: killed with their process groups when fp4doctor exits
(Ctrl-C, SIGTERM taken as Ctrl-C by signals.sigterm_interrupts), so that no child a worker
started survives it (the worker itself dies with its parent, PR_SET_PDEATHSIG)."""


def _kill_live() -> None:
    for worker in list(_LIVE):
        worker.kill()


atexit.register(_kill_live)


def _cache_key(asking: Asking) -> tuple[str, str, list[str]] | None:
    """(kind, source, files read) for fp4doctor.cache, or None when the answers cannot be kept.

    The answers depend on the engine's interpreter and on what it can import: every package the
    rules read (every shipped profile's, `probe.packages.profile_packages`, and the probe's own
    list with the cuDNN wheels and cutlass-dsl's split packages) and the engine and torch the
    adapters import. Each is in the question as its version or None (absent), so installing one
    that was absent when the answers were kept (FlashInfer, flashinfer-cubin, humming-kernels:
    the fixes fp4doctor itself proposes) asks again; the RECORD of each one present is a file
    the entry depends on, so a reinstall of the same version asks again too. With the engine in
    another interpreter ($FP4DOCTOR_ENGINE_PYTHON) its search path is asked of it once
    (`_search_path`, a bare interpreter start) and its packages are read there."""
    if cache.directory() is None:
        return None  # nothing is kept: nothing to key
    python = engine_python(asking.env)
    if python == sys.executable:
        path: list[str] | None = list(sys.path)
    else:
        path = _search_path(python, asking.env)
    if path is None:
        return None
    from fp4doctor.probe.packages import (
        PACKAGES,
        SPLITS,
        dist_info_dirs,
        probe_packages,
        profile_packages,
    )

    names = sorted({*PACKAGES, *profile_packages(), *asking.packages, asking.package, "torch"})
    found = probe_packages(path, names, SPLITS)
    read = sorted({*names, *found.versions})
    infos = dist_info_dirs(path, read)
    from fp4doctor.facts import canonical_name

    engine = infos.get(canonical_name(asking.package))
    if engine is None or not os.path.isfile(os.path.join(engine, "RECORD")):
        return None
    records = sorted(r for d in infos.values() if os.path.isfile(r := os.path.join(d, "RECORD")))
    here = Path(__file__).parent
    question = {
        "python": _interpreter(python),
        "path": path,
        "packages": {canonical_name(n): found.versions.get(canonical_name(n)) for n in read},
        "dist_infos": infos,
        "nvcc": _nvcc(asking.env),
        "stub": asking.stub,
        "cases": [c.key for c in asking.cases],
        "model": asking.model,
        "env": {k: v for k, v in sorted(asking.env.items()) if _engine_relevant(k)},
    }
    # The entry's name is made from its kind: a digest keeps it a short plain name (the question
    # itself is thousands of characters, with slashes). hashlib's import is nothing beside a
    # worker's seconds, and only a run that asks an engine pays it.
    import hashlib

    digest = hashlib.sha256(json.dumps(question, sort_keys=True).encode()).hexdigest()
    kind = f"oracle-{digest[:40]}"
    engine_record = os.path.join(engine, "RECORD")
    others = [r for r in records if r != engine_record]
    return kind, engine_record, others + sorted(str(p) for p in here.glob("*.py"))


PATH_QUERY_TIMEOUT_S = 10.0  # a bare interpreter start: well under a second on the CPU host
_MAX_PATH_BYTES = 1 << 20


def _search_path(python: str, env: Mapping[str, str]) -> list[str] | None:
    """The module search path of the interpreter `python` as the worker runs it (its flags and
    environment), or None when it cannot say (then the answers are not kept)."""
    from fp4doctor.smoke.runner import _LineReader, _Worker, worker_env

    code = "import json, sys; print(json.dumps(sys.path))"
    try:
        worker = _Worker([python, "-P", "-c", code], worker_env(env, "", False))
    except OSError:
        return None
    assert worker.proc.stdout is not None
    reader = _LineReader(worker.proc.stdout)
    deadline = time.monotonic() + PATH_QUERY_TIMEOUT_S
    lines: list[bytes] = []
    eof = False
    try:
        while not eof and not lines and time.monotonic() < deadline:
            got, eof = reader.read(min(0.25, deadline - time.monotonic()))
            lines += got
            if reader.total > _MAX_PATH_BYTES:
                return None
    finally:
        reader.close()
        worker.reap(0.0)
        worker.close()
    try:
        found = json.loads(lines[0]) if lines and len(lines[0]) <= _MAX_PATH_BYTES else None
    except ValueError:
        return None
    if not isinstance(found, list) or not all(isinstance(p, str) for p in found):
        return None
    return found


def _interpreter(python: str) -> tuple[str, int, int] | str:
    """The interpreter as a file: its real path, size and modification time (a venv rebuilt
    with another Python is another interpreter)."""
    real = os.path.realpath(python)
    try:
        st = os.stat(real)
    except OSError:
        return real
    return real, st.st_size, st.st_mtime_ns


def _nvcc(env: Mapping[str, str]) -> list[str | None]:
    """Where nvcc is for the engine: on PATH (vLLM before 0.32 looks only there) and under
    CUDA_HOME (FlashInfer's and later vLLM's order)."""
    import shutil

    home = env.get("CUDA_HOME") or env.get("CUDA_PATH")
    under = os.path.join(home, "bin", "nvcc") if home else None
    return [
        shutil.which("nvcc", path=env.get("PATH", "")),
        under if under is not None and os.path.isfile(under) else None,
    ]


def _engine_relevant(name: str) -> bool:
    return name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES


# Variables that can change what the engine's selection code answers, besides the cases' own:
# the engines' and FlashInfer's own, CUDA's and torch's, and what decides what is imported.
_ENV_PREFIXES = ("VLLM_", "FLASHINFER_", "CUDA_", "SGLANG_", "TORCH_", "TRITON_", "NVIDIA_",
                 "CUDNN_", "NCCL_")  # fmt: skip
_ENV_NAMES = frozenset(
    ("LD_LIBRARY_PATH", "PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONSAFEPATH")
)
