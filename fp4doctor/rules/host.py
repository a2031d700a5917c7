"""What the host itself says, whatever the engine and backend: one small check per concern,
run in the order of `CHECKS` (the registry; adding a host check is adding a function there).

Each check takes the facts and returns its findings, all of kind HOST: they stand whatever
backend is chosen, and an ERROR on `host.gpus` means no verdict can be reached.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

from packaging.version import InvalidVersion, Version

from fp4doctor import facts as F
from fp4doctor.findings import Finding, Kind, Status

FIX_GPU_UNREADABLE = (
    "run `nvidia-smi` and check `dmesg` for an Xid error (79: fallen off the bus); a lost GPU "
    "needs a reset (nvidia-smi -r -i N) or a reboot, or leave it out with CUDA_VISIBLE_DEVICES"
)
GPUS_ID = "host.gpus"  # its ERROR is "no verdict": nobody can tell which GPUs exist

HostCheck = Callable[[F.HostFacts], list[Finding]]


def _finding(
    fid: str,
    status: Status,
    reason: str,
    fix: str | None = None,
    details: Mapping[str, object] | None = None,
) -> Finding:
    return Finding(fid, status, reason, fix=fix, details=dict(details or {}), kind=Kind.HOST)


def gpus(host: F.HostFacts) -> list[Finding]:
    """The GPUs seen (honouring CUDA_VISIBLE_DEVICES), or why none is."""
    nvml = host.nvml
    cvd = host.cuda_visible_devices
    scope = f" (CUDA_VISIBLE_DEVICES={cvd})" if cvd is not None else ""
    if host.gpus:
        names = Counter(f"{g.name} (compute capability {g.cc_text})" for g in host.gpus)
        listed = ", ".join(f"{n}× {name}" for name, n in names.items())
        details = {"driver": nvml.driver_version, "cuda_driver": nvml.cuda_driver_version}
        reason = f"{len(host.gpus)} GPU(s) visible{scope}: {listed}"
        return [_finding(GPUS_ID, Status.PASS, reason, details=details)]
    if nvml.status in (F.NVML_OK, F.NVML_NO_GPU):
        why = (
            "NVML answered but lists no GPU"
            if nvml.status == F.NVML_OK or not nvml.error
            else nvml.error
        )
        if cvd is not None and nvml.status == F.NVML_OK:
            why = f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU"
        reason = f"no NVIDIA GPU is visible{scope}: {why}; no FP4 backend can run"
        return [_finding(GPUS_ID, Status.FAIL, reason, fix=nvml.fix)]
    if nvml.status == F.NVML_LIBRARY_NOT_FOUND:
        reason = (
            "no NVIDIA GPU is visible: the NVIDIA driver's NVML library (libnvidia-ml) is not "
            "installed, so this is not a GPU host; every FP4 backend needs an NVIDIA GPU "
            "(native FP4 needs compute capability 10.0 or newer)"
        )
        details = {"nvml_error": nvml.error}
        return [_finding(GPUS_ID, Status.FAIL, reason, fix=nvml.fix, details=details)]
    reason = f"cannot tell which GPUs this host has: NVML says {nvml.error or nvml.status}"
    details = {"nvml_status": nvml.status}
    return [_finding(GPUS_ID, Status.ERROR, reason, fix=nvml.fix, details=details)]


def mixed(host: F.HostFacts) -> list[Finding]:
    """GPUs of more than one compute capability: a backend must be valid on all of them."""
    ccs = sorted({g.cc_text for g in host.gpus})
    if len(ccs) < 2:
        return []
    reason = (
        f"mixed host: the GPUs differ in compute capability ({', '.join(ccs)}); a backend "
        "counts as valid only when it is valid on every GPU the engine will use"
    )
    fix = "restrict the engine to one kind of GPU with CUDA_VISIBLE_DEVICES"
    return [_finding("host.gpus.mixed", Status.WARN, reason, fix=fix)]


def package_versions(host: F.HostFacts) -> list[Finding]:
    """Installed packages whose version is not PEP 440 (rules judge them as a fresh install)."""
    out = []
    for name, version in sorted(host.packages.versions.items()):
        try:
            Version(version)
        except InvalidVersion:
            reason = (
                f"{name} reports the version {version!r}, which is not a PEP 440 version: "
                "rules that depend on it are judged as for a fresh install"
            )
            fix = f"pip install --force-reinstall {name}"
            out.append(_finding(f"host.package.{name}.version", Status.WARN, reason, fix=fix))
    return out


def probe_errors(host: F.HostFacts) -> list[Finding]:
    """A probe that failed: the rules judge without what it would have said."""
    out = []
    for name, reason in sorted(host.probe_errors.items()):
        # `gpu.nvmlN`: NVML lists a GPU it cannot open or describe (lost, fallen off the bus).
        fix = FIX_GPU_UNREADABLE if name.startswith("gpu.nvml") else None
        why = f"the {name} probe failed: {reason}"
        out.append(_finding(f"host.probe.{name}", Status.WARN, why, fix=fix))
    return out


def package_errors(host: F.HostFacts) -> list[Finding]:
    """Unreadable package metadata (or torch/version.py)."""
    out = []
    for name, reason in sorted(host.packages.errors.items()):
        package = name.split("/")[0]
        what = name if "/" in name else f"the installed {name}'s metadata"
        why = f"cannot read {what}, so the rules judge without it: {reason}"
        fix = (
            f"reinstall {package} at the version you use "
            f"(pip install --force-reinstall --no-deps '{package}==VERSION')"
        )
        out.append(_finding(f"host.package.{package}", Status.WARN, why, fix=fix))
    return out


def synthetic(host: F.HostFacts) -> list[Finding]:
    """Facts made by hand (a fixture, a what-if), said so."""
    if not host.synthetic:
        return []
    return [_finding("host.synthetic", Status.WARN, f"synthetic facts: {host.synthetic}")]


CHECKS: tuple[HostCheck, ...] = (gpus, mixed, package_versions, probe_errors, package_errors,
                                 synthetic)  # fmt: skip


def host_findings(host: F.HostFacts) -> list[Finding]:
    """Every host check's findings, in the registry's order."""
    return [f for check in CHECKS for f in check(host)]


def says_no_verdict(findings: tuple[Finding, ...] | list[Finding]) -> bool:
    """Whether the host findings say nobody can tell which GPUs exist (exit code 3)."""
    return any(f.id == GPUS_ID and f.status is Status.ERROR and not f.ignored for f in findings)
