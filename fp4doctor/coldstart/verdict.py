"""The cold start of one family: for the backend it resolved to, on this GPU and engine release,
will the first start-up compile (JIT) and tune (autotune)?

    cold = judge(host, target="vllm", engine_version="0.26.0", family="linear",
                 backend="flashinfer-cutlass")
    cold.jit.state        # "ready" / "will-build" / "cannot-build" / "unknown"
    cold.autotune.state   # "off" / "skipped" / "cached" / "will-tune" / "unknown"

The rules are data (profiles/coldstart.yaml, `rules.py`); the host's caches are facts
(`probe.py`, `facts.ColdStartFacts`). Nothing here imports FlashInfer or torch. An estimate is
given only where a reported figure matches the case (its conditions and source travel with it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fp4doctor.facts import ColdStartFacts, HostFacts, PrebuiltKernels
from fp4doctor.versions import contains

if TYPE_CHECKING:  # the rules (and the profile package) load when a judgement is asked
    from fp4doctor.coldstart import rules as _rules

JIT_STATES = ("ready", "will-build", "cannot-build", "unknown")
AUTOTUNE_STATES = ("off", "skipped", "cached", "will-tune", "unknown")
FLASHINFER = "flashinfer-python"


@dataclass(frozen=True)
class Estimate:
    """A reported cost that matches this case: total seconds, or seconds per unit."""

    source: str
    seconds: float | None = None
    seconds_each: float | None = None
    each: str | None = None
    conditions: str | None = None

    def text(self) -> str:
        how = (
            f"~{self.seconds:.0f} s"
            if self.seconds
            else f"~{self.seconds_each:.0f} s per {self.each}"
        )
        return how + (f" ({self.conditions})" if self.conditions else "") + f" [{self.source}]"

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "seconds_each": self.seconds_each, "each": self.each,
                "conditions": self.conditions, "source": self.source}  # fmt: skip


@dataclass(frozen=True)
class Jit:
    """Whether the first call compiles: the state, the modules, why, and the rule's source."""

    state: str
    reason: str
    modules: tuple[str, ...] = ()  # built at first use (will-build, cannot-build) or found
    source: str | None = None
    estimate: Estimate | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "modules": list(self.modules), "reason": self.reason,
                "source": self.source,
                "estimate": self.estimate.to_dict() if self.estimate else None}  # fmt: skip


@dataclass(frozen=True)
class Autotune:
    """Whether the engine tunes this family's kernel at start-up, and its cache."""

    state: str
    reason: str
    cache: str | None = None  # the matching cache file, when one is found
    knobs: tuple[str, ...] = ()  # how this release skips or persists it
    source: str | None = None
    estimate: Estimate | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "reason": self.reason, "cache": self.cache,
                "knobs": list(self.knobs), "source": self.source,
                "estimate": self.estimate.to_dict() if self.estimate else None}  # fmt: skip


@dataclass(frozen=True)
class ColdStart:
    """One family's cold start, for the backend it resolved to."""

    family: str
    backend: str | None
    jit: Jit
    autotune: Autotune

    @property
    def slow(self) -> bool:
        """The first start compiles or tunes (or cannot: it fails)."""
        return (
            self.jit.state in ("will-build", "cannot-build") or self.autotune.state == "will-tune"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "jit": self.jit.to_dict(),
                "autotune": self.autotune.to_dict()}  # fmt: skip


def judge(
    host: HostFacts,
    *,
    target: str,
    engine_version: str | None,
    family: str,
    backend: str | None,
    ranks: int = 1,
    rules: _rules.Rules | None = None,
    switched_off: str | None = None,
) -> ColdStart:
    """The cold start of `family` running `backend` on `host` with `target` at `engine_version`
    (`ranks`: the engine's world size, which some releases' caches depend on). `switched_off`:
    where the settled deployment turns the release's autotune off (its switch on the command
    line, `env --cold-start fast`), so that this section and the triggers agree."""
    from fp4doctor.coldstart import rules as _rules

    r = rules or _rules.load()
    tune = _autotune(host, r, target, engine_version, family, backend, ranks)
    if switched_off is not None and tune.state in ("will-tune", "cached"):
        tune = Autotune("off", f"switched off: {switched_off}", source=tune.source)
    return ColdStart(family, backend, _jit(host, r, family, backend), tune)


# --- JIT --------------------------------------------------------------------------------------


def _disabled(env: Mapping[str, str], name: str) -> bool:
    # FlashInfer tests the variable's truth as a string: any non-empty value, "0" too, disables.
    return bool(env.get(name))


def _jit(host: HostFacts, r: _rules.Rules, family: str, backend: str | None) -> Jit:
    fi = host.packages.version(FLASHINFER)
    if backend is None:
        return Jit("unknown", "no backend was chosen")
    kernels = r.kernels_for(family, backend, fi)
    if kernels is None:
        where = f"FlashInfer {fi}" if fi else "no FlashInfer installed"
        return Jit("unknown", f"no cold-start rule for {backend} with {where}")
    if kernels.build == "none":
        return Jit("ready", "nothing is compiled at first use", source=kernels.source)
    if kernels.build == "cute-dsl":
        return Jit(
            "will-build",
            "CuTe-DSL kernels are compiled in-process at their first call (no nvcc needed; "
            "FlashInfer's JIT cache does not hold them)",
            ("cute-dsl kernels",),
            kernels.source,
        )
    ccs = sorted({g.cc for g in host.gpus})
    if not ccs:
        return Jit("unknown", "no GPU is listed: the modules depend on its architecture")
    needed: dict[str, list[int]] = {}
    for cc in ccs:
        module = kernels.module_for(cc)
        if module is None:
            return Jit(
                "unknown", f"no module rule for SM {cc} ({kernels.id})", source=kernels.source
            )
        needed.setdefault(module, []).append(cc)
    cold = host.cold_start
    if cold is None:
        return Jit(
            "unknown",
            "the snapshot has no cold-start facts (taken before fp4doctor probed the caches)",
            tuple(needed),
            kernels.source,
        )
    found: list[str] = []
    missing: list[str] = []
    notes: list[str] = []
    for name, module_ccs in needed.items():
        found_at, hint = _find(host, cold, r, fi, name, module_ccs)
        if hint:
            notes.append(hint)
        (found if found_at else missing).append(f"{name} ({found_at})" if found_at else name)
    if not missing:
        return Jit("ready", "every module is prebuilt or built", tuple(found), kernels.source)
    unknown = [n for n in notes if n.startswith("unknown:")]
    if unknown:
        return Jit("unknown", unknown[0].removeprefix("unknown: "), tuple(missing), kernels.source)
    source = kernels.source
    if _disabled(host.env, r.jit.disable_variable):
        why = (f"{r.jit.disable_variable} is set ({host.env[r.jit.disable_variable]!r}) and "
               "these modules are neither prebuilt nor built: FlashInfer raises "
               "MissingJITCacheError at the first call")  # fmt: skip
        return Jit("cannot-build", _join(why, notes), tuple(missing), r.jit.disable_source)
    tc = host.toolchain
    if tc.nvcc_path is None or tc.ninja_path is None:
        lack = " and ".join(
            n for n, p in (("nvcc", tc.nvcc_path), ("ninja", tc.ninja_path)) if not p
        )
        why = f"these modules are neither prebuilt nor built, and there is no {lack} to build them"
        return Jit("cannot-build", _join(why, notes), tuple(missing), source)
    why = f"built with nvcc {tc.nvcc_version or '(version unknown)'} and ninja at the first call"
    estimate = _estimate(r, "jit", fi, ccs, [m for m in missing])
    return Jit("will-build", _join(why, notes), tuple(missing), source, estimate)


def _join(reason: str, notes: Sequence[str]) -> str:
    return "; ".join([reason, *notes])


def _find(
    host: HostFacts,
    cold: ColdStartFacts,
    r: _rules.Rules,
    fi: str | None,
    module: str,
    ccs: list[int],
) -> tuple[str | None, str | None]:
    """Where `module` is found for `ccs` ("prebuilt", "built"), or None; and a note."""
    note = None
    for package in cold.prebuilt:
        found, note = _prebuilt(host, package, r, fi, module, ccs)
        if found:
            return f"prebuilt in {package.dist} {package.version}", None
    if fi is not None and contains(r.jit.workspace, fi) is True:
        for key, modules in cold.built.items():
            version, _, archs = key.partition("/")
            if version == fi and module in modules and _archs_cover(archs, ccs):
                return f"built in {cold.flashinfer_cache_dir}/{key}", None
    return None, note


def _prebuilt(
    host: HostFacts,
    package: PrebuiltKernels,
    r: _rules.Rules,
    fi: str | None,
    module: str,
    ccs: list[int],
) -> tuple[bool, str | None]:
    """Whether the package serves `module` on `ccs`; else why not (a note)."""
    if fi is not None and package.version.split("+")[0] != fi:
        return False, f"{package.dist} {package.version} is not at FlashInfer's version {fi}"
    local = package.version.partition("+")[2]  # "cu130": the CUDA it was built for
    torch_cuda = host.packages.torch_cuda
    if local.startswith("cu") and torch_cuda and local[2:4] != torch_cuda.split(".")[0].zfill(2):
        return False, (f"{package.dist} {package.version} is built for another CUDA than "
                       f"torch's {torch_cuda}: its modules may fail to load (FlashInfer then "
                       "builds them)")  # fmt: skip
    if module not in package.modules:
        if fi is not None and contains(_since(r.jit.providers_from), fi) is True:
            return False, (f"unknown: {module} is not in {package.dist}'s own files; from "
                           f"FlashInfer {r.jit.providers_from} prebuilt modules come from "
                           "provider packages, which fp4doctor does not read")  # fmt: skip
        return False, f"{package.dist} {package.version} ships no {module}"
    archs = package.archs.get(module)
    if archs is None or archs.error:
        return True, None  # shipped; its GPU code could not be read: trusted as shipped
    if all(any(_sass_runs(s, cc) for s in archs.sass) for cc in ccs):
        return True, None
    return False, (f"{package.dist}'s {module} carries no GPU code for SM "
                   f"{', '.join(map(str, ccs))} ({', '.join(archs.sass) or 'none'})")  # fmt: skip


def _since(version: str) -> Any:
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(f">={version}")


def _sass_runs(sass: str, cc: int) -> bool:
    """An `sm_XY[a|f]` cubin runs on `cc`: the same architecture, or (`f`) its family."""
    digits = sass.removeprefix("sm_").rstrip("af")
    if not digits.isdigit():
        return False
    arch = int(digits)
    if sass.endswith("f"):
        return arch // 10 == cc // 10 and arch <= cc
    return arch == cc


def _archs_cover(key: str, ccs: list[int]) -> bool:
    """The workspace's arch key (`100a`, `90a_100a`, `120f`) names every GPU: FlashInfer builds
    SM 12.x for its family (`120f`), so 120 stands for 121 there."""
    archs = {int(d) for part in key.split("_") if (d := part.rstrip("af")).isdigit()}
    return all(cc in archs or (cc // 10 == 12 and 120 in archs) for cc in ccs)


def _estimate(
    r: _rules.Rules, what: str, fi: str | None, ccs: list[int], modules: Sequence[str | None]
) -> Estimate | None:
    for e in r.estimates:
        if all(e.applies(what, fi, cc, m) for cc in ccs for m in modules):
            return Estimate(e.source, e.seconds, e.seconds_each, e.each, e.conditions)
    return None


# --- autotune ---------------------------------------------------------------------------------


def _autotune(
    host: HostFacts,
    r: _rules.Rules,
    target: str,
    version: str | None,
    family: str,
    backend: str | None,
    ranks: int,
) -> Autotune:
    rule = r.autotune_for(target, version)
    if rule is None:
        return Autotune("unknown", f"no autotune rule for {target} {version or '(no version)'}")
    knobs = tuple(k for k in (rule.disable_arg, rule.skip_variable, rule.cache_dir_variable) if k)
    if not rule.tunes:
        return Autotune("off", rule.reason, source=rule.source)
    if backend is None or not backend.startswith("flashinfer-"):
        return Autotune(
            "off", f"{backend or 'no backend'} is not a FlashInfer kernel: FlashInfer's autotuner "
            "does not tune it", source=rule.source)  # fmt: skip
    gated = [g for g in host.gpus if rule.compute_capability is not None
             and contains(rule.compute_capability, g.cc_text) is not True]  # fmt: skip
    if host.gpus and len(gated) == len(host.gpus):
        return Autotune("off", f"{rule.reason}: not on SM {gated[0].cc_text}", source=rule.source)
    skip = _skipped(host.env, rule, family, backend)
    if skip:
        return Autotune("skipped", skip, knobs=knobs, source=rule.source)
    fi = host.packages.version(FLASHINFER)
    ccs = sorted({g.cc for g in host.gpus})
    estimate = _estimate(r, "autotune", fi, ccs, [None]) if family == "linear" else None
    if rule.cache == "none":
        return Autotune("will-tune", rule.reason, None, knobs, rule.source, estimate)
    managed = rule.managed_store is not None and fi is not None and ranks == 1
    if managed and rule.managed_store is not None and contains(rule.managed_store, fi) is True:
        return _managed(host, rule, fi, knobs, estimate)
    if rule.cache == "single-rank" and ranks > 1:
        why = f"{rule.reason}; with {ranks} ranks nothing is kept: every start tunes"
        return Autotune("will-tune", why, None, knobs, rule.source, estimate)
    found = _cache_file(host, rule, fi)
    if found is None:
        why = f"{rule.reason}; no cache file for FlashInfer {fi} on this GPU yet"
        return Autotune("will-tune", why, None, knobs, rule.source, estimate)
    why = (f"{rule.reason}; a file for FlashInfer {fi} on this GPU is here (for some "
           "configuration: its directory is a hash of the engine's, not told offline)")  # fmt: skip
    return Autotune("cached", why, found, knobs, rule.source)


def _managed(
    host: HostFacts,
    rule: _rules.Autotune,
    fi: str | None,
    knobs: tuple[str, ...],
    estimate: Estimate | None,
) -> Autotune:
    """One rank with a FlashInfer that has autotune_v2: the engine tunes into FlashInfer's
    managed store, keyed by the environment (FlashInfer, CUDA, cuDNN, GPU) and the op."""
    cold = host.cold_start
    how = ("on one rank vLLM uses FlashInfer's managed autotune store (autotune_v2), which keeps "
           "each tuned op under a hash of the environment")  # fmt: skip
    names = {g.name for g in host.gpus}
    for store in cold.managed_stores if cold else ():
        meta = store.metadata
        if store.error or not store.entries:
            continue
        if (
            meta.get("flashinfer_version", fi) != fi
            or meta.get("gpu", next(iter(names), "")) not in names
        ):
            continue
        why = (f"{how}; a store for FlashInfer {fi} on this GPU holds {store.entries} tuned ops: "
               "ops found there are not profiled again")  # fmt: skip
        assert cold is not None
        return Autotune("cached", why, f"{cold.managed_root}/{store.path}", knobs, rule.source)
    why = f"{how}; none for FlashInfer {fi} on this GPU yet"
    return Autotune("will-tune", why, None, knobs, rule.source, estimate)


def _skipped(
    env: Mapping[str, str], rule: _rules.Autotune, family: str, backend: str
) -> str | None:
    """Why the engine's skip list leaves this family untuned, or None."""
    op = "fp4_gemm"  # mm_fp4's op name in FlashInfer's autotuner, every backend
    if rule.skip_variable and rule.skip_variable in env:
        ops = [v.strip() for v in env[rule.skip_variable].split(",") if v.strip()]
        if family == "linear" and op in ops:
            return f"{rule.skip_variable}={env[rule.skip_variable]} skips {op}: default tactics"
        return None  # set: it replaces the default skip list (empty skips nothing)
    if family == "linear" and backend in rule.skip_backends and op in rule.skip_ops:
        return (f"{rule.skip_variable} unset: the engine skips {op} when {backend} is chosen "
                "(its fallback is FlashInfer's heuristic)")  # fmt: skip
    return None


def _cache_file(host: HostFacts, rule: _rules.Autotune, fi: str | None) -> str | None:
    """A cache file keyed for this FlashInfer release and GPU, or None."""
    cold = host.cold_start
    if cold is None or fi is None:
        return None
    override = bool(rule.cache_dir_variable and host.env.get(rule.cache_dir_variable))
    names = {g.name for g in host.gpus}
    ccs = sorted({g.cc for g in host.gpus})
    for f in cold.autotune_files:
        if f.error or not f.entries:
            continue
        parts = f.path.split("/")
        if rule.cache == "per-rank" and "_rank" not in parts[-1]:
            continue
        if not override and (len(parts) < 4 or parts[0] != fi or not _archs_cover(parts[1], ccs)):
            continue
        meta = f.metadata
        if (
            meta.get("flashinfer_version", fi) != fi
            or meta.get("gpu", next(iter(names), "")) not in names
        ):
            continue
        return f"{cold.autotune_root}/{f.path}"
    return None


__all__ = ["AUTOTUNE_STATES", "JIT_STATES", "Autotune", "ColdStart", "Estimate", "Jit", "judge"]
