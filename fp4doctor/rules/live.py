"""Fold live smoke results into the static verdicts, and say where rules and reality disagree.

Pure: takes `SmokeResult`s (from fp4doctor.smoke) and returns new verdicts and findings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fp4doctor.findings import Finding, Kind, Status
from fp4doctor.profile.model import Profile
from fp4doctor.rules.backends import Verdict

if TYPE_CHECKING:
    from fp4doctor.smoke.result import SmokeResult


# Without a GPU, one CPU run per family checks fp4doctor's own NVFP4 pipeline (no engine backend).
CPU_ADAPTERS = {"linear": "emulation", "moe": "emulation-moe"}


def owned(profile: Profile, results: Sequence[SmokeResult]) -> list[SmokeResult]:
    """The results that belong to one family's view: those of its backends' adapters on a GPU,
    and the CPU run of its own pipeline."""
    adapters = {a for b in profile.backends.values() for a in b.smoke}
    family = profile.family or "linear"
    cpu_own = CPU_ADAPTERS.get(family)
    out = []
    for r in results:
        if (r.adapter == cpu_own) if r.gpu is None else (r.adapter in adapters):
            out.append(r)
    return out


def adapters_to_run(profile: Profile, verdicts: Mapping[str, Verdict], force: bool) -> list[str]:
    """Smoke adapters of the backends the rules call valid (all backends with --force)."""
    names: list[str] = []
    for name, verdict in verdicts.items():
        if verdict.valid or force:
            names.extend(a for a in profile.backends[name].smoke if a not in names)
    return names


def smoke_id(backend: str | None, adapter: str, where: str) -> str:
    if backend is None or backend == adapter:
        return f"smoke.{adapter}.{where}"
    return f"smoke.{backend}.{adapter}.{where}"


def merge(
    profile: Profile, verdicts: Mapping[str, Verdict], results: Sequence[SmokeResult]
) -> tuple[dict[str, Verdict], list[Finding]]:
    """Attach each result to the backends that use its adapter (a failed live GEMM makes the
    backend invalid; static/live disagreements get their own findings). Returns the new
    verdicts, and the findings of results that belong to no backend (the CPU run)."""
    static_valid = {name: v.valid for name, v in verdicts.items()}
    added: dict[str, list[Finding]] = {name: [] for name in verdicts}
    unowned: list[Finding] = []
    for result in results:
        where = f"gpu{result.gpu}" if result.gpu is not None else "cpu"
        owners = [name for name, b in profile.backends.items() if result.adapter in b.smoke]
        status = Status(result.status)
        details = {
            k: v
            for k, v in result.to_dict().items()
            if v is not None and k not in ("adapter", "status", "reason", "gpu")
        }
        if not owners or result.gpu is None:
            # The CPU run exercises fp4doctor's own pipeline, not an engine backend.
            unowned.append(
                Finding(
                    smoke_id(None, result.adapter, where),
                    status,
                    f"{result.adapter} on {result.device}: {result.reason}",
                    details=details,
                    kind=Kind.LIVE,
                )
            )
            continue
        for name in owners:
            added[name].append(
                Finding(
                    smoke_id(name, result.adapter, where),
                    status,
                    f"live {result.adapter} GEMM on {result.device}: {result.reason}",
                    gpu=result.gpu,
                    backend=name,
                    details=details,
                    kind=Kind.LIVE,
                )
            )
            agreement = _agreement(name, result, static_valid[name], where)
            if agreement is not None:
                added[name].append(agreement)
    merged = {
        name: replace(v, findings=v.findings + tuple(added[name])) for name, v in verdicts.items()
    }
    return merged, unowned


def _agreement(name: str, result: Any, rules_valid: bool, where: str) -> Finding | None:
    fid = f"agree.{name}.{result.adapter}.{where}"
    if result.status == "skip":
        return None
    if result.status == "error":  # a crash, a timeout, out of memory: no verdict on the kernel
        return Finding(
            fid,
            Status.SKIP,
            f"no live verdict to compare with the rules on {result.device}: {result.reason}",
            gpu=result.gpu,
            backend=name,
            kind=Kind.LIVE,
        )
    live_ok = result.status == "pass"
    if rules_valid and not live_ok:
        return Finding(
            fid,
            Status.WARN,
            f"rules and reality disagree: the rules call {name} valid on {result.device}, but "
            f"its live GEMM failed ({result.reason}); the profile is missing a rule",
            fix="report it with `fp4doctor check --json` output",
            gpu=result.gpu,
            backend=name,
            kind=Kind.LIVE,
        )
    if not rules_valid and live_ok:
        return Finding(
            fid,
            Status.WARN,
            f"rules and reality disagree: the rules reject {name} on {result.device}, but its "
            "live GEMM passed: a rule may be stale (the engine may still refuse it)",
            fix="report it with `fp4doctor check --force --json` output",
            gpu=result.gpu,
            backend=name,
            kind=Kind.LIVE,
        )
    verdict = "both accept it" if live_ok else "both refuse it"
    return Finding(
        fid,
        Status.PASS,
        f"rules and the live result agree on {result.device}: {verdict}",
        gpu=result.gpu,
        backend=name,
        kind=Kind.LIVE,
    )
