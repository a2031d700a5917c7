"""The oracle worker: `python -m fp4doctor.oracle.worker --engine vllm|sglang [--stub]`.

Run by the engine's interpreter (`query.engine_python`), in its own process group, by
`oracle.query`. It reads one JSON line from stdin, `{"cases": [...], "model": {...}}` (the
model's config.json, when --model gave one), imports the engine's own selection code (seconds:
torch and the engine), and answers each case on the protocol pipe (its stdout, moved to a
private descriptor as the smoke worker does):

    {"event": "hello", "engine": "vllm", "version": "0.34.0", "adapter": "vllm_0_24"}
    {"event": "unasked", "reason": "..."}          (instead of hello: the engine cannot be asked)
    {"event": "answer", "key": "...", "engine_name": "MARLIN", "backend": "marlin-moe"}
    {"event": "answer", "key": "...", "raised": "ValueError", "message": "..."}
    {"event": "done"}

With `--stub` (a host with no GPU, or a facts file judged: another host's GPUs) the engine is
told the compute capability of each case through its device queries only (vLLM's platform,
`vllm_base.stub_platform`; torch.cuda's for SGLang, `sglang_base.stub_torch_cuda`); nothing
else of the engine is replaced.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from collections.abc import Callable
from typing import Protocol

from fp4doctor.oracle.answers import Answer, Case
from fp4doctor.oracle.engine_side import NotAsked
from fp4doctor.smoke.worker import Channel, _die_with_parent

# Which module asks which releases of which engine: (engine, lowest release, module), newest
# last; its `Session(stub, model)` imports the selection code and answers the cases. A release
# newer than the last is asked by the last module: when its internals moved, the module's own
# import or call says so ("could not ask vLLM X: ...").
ADAPTERS: tuple[tuple[str, str, str], ...] = (
    ("vllm", "0.18.0", "fp4doctor.oracle.vllm_0_18"),
    ("vllm", "0.24.0", "fp4doctor.oracle.vllm_0_24"),
    ("sglang", "0.5.16", "fp4doctor.oracle.sglang_0_5_16"),
    ("sglang", "0.5.19", "fp4doctor.oracle.sglang_0_5_19"),
)
PACKAGES = {"vllm": "vllm", "sglang": "sglang"}  # engine -> the distribution that picks it


class Session(Protocol):
    """An adapter's prepared engine: the selection code imported, ready for cases."""

    def ask(self, case: Case) -> Answer: ...


def adapter_for(engine: str, version: str) -> str | None:
    """The module that asks `version` of `engine`, or None when it is older than every one."""
    from packaging.version import Version

    found = None
    for name, lowest, module in ADAPTERS:
        if name == engine and Version(version) >= Version(lowest):
            found = module
    return found


def vocabulary(adapter: str) -> Callable[[Case, str], str | None] | None:
    """The `backend_of(case, engine_name)` of the adapter module named `adapter` ('vllm_0_24'),
    or None for a name that is no adapter's. Read by the parent, which checks each answer
    against it: the adapter modules import neither torch nor the engine at their top."""
    modules = {module.rsplit(".", 1)[1]: module for _, _, module in ADAPTERS}
    if adapter not in modules:
        return None
    session = importlib.import_module(modules[adapter]).Session
    names: Callable[[Case, str], str | None] = session.backend_of
    return names


def _prepare(
    engine: str, stub: bool, model: dict[str, object] | None
) -> tuple[str, str, Session] | str:
    """(version, adapter, session), or the reason the engine cannot be asked."""
    from importlib import metadata

    try:
        version = metadata.version(PACKAGES[engine])
    except metadata.PackageNotFoundError:
        return f"{engine} is not installed in {sys.executable}"
    module = adapter_for(engine, version)
    if module is None:
        oldest = min((lo for e, lo, _ in ADAPTERS if e == engine), default="?")
        return f"{version}: fp4doctor asks releases from {oldest} on"
    try:
        session: Session = importlib.import_module(module).Session(stub, model)
    except Exception as exc:  # the engine's internals moved, or its extension does not load
        return f"{version}: {_one_line(exc)} ({_where(exc)})"
    return version, module.rsplit(".", 1)[1], session


def _same_engine(facts: dict[str, object]) -> str | None:
    """None when this install is the facts' engine (what this install has and the facts lack
    is then hidden from it: oracle/sameness.py), else why it is not asked."""
    import os

    from fp4doctor.oracle import sameness

    differs, hiding = sameness.compare(sameness.Expected.from_dict(facts), os.environ)
    if differs:
        return f"the installed engine is not the facts' engine (differs: {'; '.join(differs)})"
    sameness.apply(hiding, os.environ)
    return None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:400]}"


def _where(exc: BaseException) -> str:
    """The engine's own frame that raised (file:line), for a reader to open."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "fp4doctor" not in f.filename] or frames
    if not own:
        return "?"
    frame = own[-1]
    marker = "site-packages/"
    path = frame.filename.split(marker, 1)[1] if marker in frame.filename else frame.filename
    return f"{path}:{frame.lineno}"


def answer(session: Session, case: Case) -> Answer | None:
    """The session's answer, or what it raised as an answer (never an exception here); None
    when the adapter cannot ask the case (engine_side.NotAsked)."""
    try:
        return session.ask(case)
    except (KeyboardInterrupt, SystemExit):
        raise
    except NotAsked:
        return None
    except BaseException as exc:  # what the engine raises is the answer
        return Answer(case.key, raised=type(exc).__name__, message=_message(exc))


def _message(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:400]
    return f"{text} ({_where(exc)})"


def case_from_dict(data: dict[str, object]) -> Case:
    cc = data["cc"]
    assert isinstance(cc, list)
    pairs = data.get("set_env") or []
    assert isinstance(pairs, list)
    return Case(
        label=str(data.get("label", "")),
        family=str(data["family"]),
        cc=(int(cc[0]), int(cc[1])),
        set_env=tuple((str(k), str(v)) for k, v in pairs),
        unset_env=tuple(str(v) for v in data.get("unset_env") or []),  # type: ignore[attr-defined]
        args=tuple(str(v) for v in data.get("args") or []),  # type: ignore[attr-defined]
        a16=bool(data.get("a16")),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fp4doctor.oracle.worker")
    parser.add_argument("--engine", required=True, choices=sorted(PACKAGES))
    parser.add_argument("--stub", action="store_true", help="stub the capability query")
    parser.add_argument("--parent-pid", type=int)
    args = parser.parse_args(argv)
    proto = Channel()
    _die_with_parent(args.parent_pid)
    line = sys.stdin.readline()  # written by the parent as it starts the worker
    job = json.loads(line) if line else {}
    model = job.get("model")
    facts = job.get("facts")
    if isinstance(facts, dict):  # another host's snapshot: asked only when it is its engine
        differs = _same_engine(facts)
        if differs:
            proto.send("unasked", reason=differs)
            proto.send("done")
            return 0
    prepared = _prepare(args.engine, args.stub, model if isinstance(model, dict) else None)
    if isinstance(prepared, str):
        proto.send("unasked", reason=prepared)
        proto.send("done")
        return 0
    version, adapter, session = prepared
    proto.send("hello", engine=args.engine, version=version, adapter=adapter)
    for data in job.get("cases", []):
        got = answer(session, case_from_dict(data))
        if got is not None:
            proto.send("answer", **got.to_dict())
    proto.send("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
