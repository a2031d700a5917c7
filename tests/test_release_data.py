"""Every extracted release against the shipped profiles: FlashInfer, SGLang and TensorRT-LLM.

tools/extract/data/flashinfer.json and sglang.json are read by program from every released wheel
or sdist (tools/extract/README.md describes the fields). For each release these tests ask the
profiles the same questions and compare: FlashInfer's compute-capability table per mm_fp4 backend,
its backend= choices, default and automatic order, its cuDNN, CUDA and nvcc gates and its
import-time kernel-package check; SGLang's --fp4-gemm-backend choices, its FP4 GEMM variables and
its automatic order (with and without FlashInfer). Where a profile is deliberately coarser than a
release, the expectation is written here with the reason, never skipped.

No network: the JSON files are read once per module.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from profile_tables import (
    FLASHINFER,
    FLASHINFER_ADAPTERS,
    applies,
    contains,
    flashinfer_backends,
    named_conditions,
    table_at,
)

from fp4doctor import profile, versions
from fp4doctor.facts import (
    CudnnFacts,
    CudnnLibrary,
    Gpu,
    HostFacts,
    PackageFacts,
    ToolchainFacts,
    canonical_name,
)
from fp4doctor.profile.kinds.all_of import all_hold
from fp4doctor.profile.kinds.any_of import AnyOf
from fp4doctor.profile.kinds.base import Context, Requirement
from fp4doctor.profile.kinds.cuda_runtime import CudaRuntime
from fp4doctor.profile.kinds.cudnn_backend import CudnnBackend
from fp4doctor.profile.kinds.env import Env
from fp4doctor.profile.kinds.package import Package
from fp4doctor.profile.kinds.same_version import SameVersion
from fp4doctor.profile.kinds.use import Use
from fp4doctor.profile.model import Era, Knob, Profile

DATA = Path(__file__).resolve().parents[1] / "tools" / "extract" / "data"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    assert list(data["releases"]) and set(data["releases"]) == set(data["covers"])
    return data


FI_DATA = _load("flashinfer.json")
SG_DATA = _load("sglang.json")
INDEX = json.loads((DATA.parents[2] / "profiles" / "index.json").read_text(encoding="utf-8"))
FI = profile.load("flashinfer")
SGLANG = profile.load("sglang")
TRTLLM = profile.load("trtllm")

FI_RELEASES: dict[str, Any] = FI_DATA["releases"]
SG_RELEASES: dict[str, Any] = SG_DATA["releases"]
# The profiles whose FlashInfer-backed backends share profiles/common/flashinfer.yaml and are
# owned with it (vLLM's profile has its own tests).
FI_TARGETS = {"flashinfer": FI, "sglang": SGLANG}
# mm_fp4 backend name -> the FlashInfer profile's backend
FI_BACKENDS = {
    name: f"flashinfer-{name.replace('-', '')}" for _k, name in FLASHINFER_ADAPTERS.values()
}
# Names FlashInfer has that no profile models: `auto` is the order, not a backend;
# cutedsl_low_latency (0.7.0+, M <= 8, appended to auto) and the opt-in experimental `cake`
# (0.7.2+) are named in the `>=0.7.0` era's note as not modelled.
FI_UNMODELLED = {"auto", "cutedsl_low_latency", "cake"}
# The first release with a compute-capability table (@supported_compute_capability) that is
# not a release candidate: the profile's list for cuDNN before any table.
FIRST_TABLE = "0.5.0"


def era_or_none(p: Profile, version: str) -> Era | None:
    matches = [era for era in p.eras if contains(era.versions, version)]
    assert len(matches) <= 1, f"{p.target} {version}: in {len(matches)} eras"
    return matches[0] if matches else None


def era_of(p: Profile, version: str) -> Era:
    era = era_or_none(p, version)
    assert era is not None, f"{p.target} {version}: in no era"
    return era


def knob(era: Era, name: str) -> Knob | None:
    found = [k for k in era.knobs if k.name == name]
    assert len(found) <= 1
    return found[0] if found else None


def condition(p: Profile, name: str) -> tuple[Requirement, ...]:
    named = named_conditions(p)
    assert name in named, f"{p.target} uses no condition {name!r}"
    return named[name]


def cc_of_arch(arch: str) -> int:
    """'sm_100a', 'sm_120f', 'compute_103a' -> 100, 120, 103."""
    digits = "".join(c for c in arch.split("_", 1)[1] if c.isdigit())
    return int(digits)


# --- synthetic hosts, judged by the profiles' own requirement kinds ------------------------------


def host_context(
    cc: int,
    packages: dict[str, str],
    *,
    cuda: str | None = "12.8",
    cudnn: int | None = None,
    nvcc: str | None = None,
    ninja: bool = False,
    engine: tuple[str, str] | None = None,
) -> tuple[Context, Gpu]:
    gpu = Gpu(index=0, name=f"SM{cc}", cc_major=cc // 10, cc_minor=cc % 10)
    installed = {canonical_name(k): v for k, v in packages.items()}
    facts = HostFacts(
        gpus=[gpu],
        packages=PackageFacts(versions=installed, torch_cuda=cuda),
        cudnn=CudnnFacts(frontend=CudnnLibrary(version=cudnn)),
        toolchain=ToolchainFacts(
            nvcc_path="/usr/local/cuda/bin/nvcc" if nvcc else None,
            nvcc_version=nvcc,
            ninja_path="/usr/bin/ninja" if ninja else None,
        ),
    )
    judged = None if engine is None else (canonical_name(engine[0]), engine[1])
    return Context(facts=facts, versions=installed, env={}, engine=judged), gpu


def auto_choices(era: Era, ctx: Context, gpu: Gpu) -> list[str]:
    """The backends of the era's automatic order whose conditions hold, first ones first."""
    order: list[str] = []
    for step in era.auto:
        if step.backend not in order and all_hold(step.conditions, ctx, gpu).ok:
            order.append(step.backend)
    return order


# === FlashInfer ===================================================================================


def fi_release_ids() -> list[str]:
    return list(FI_DATA["covers"])


def fi_backend_data(version: str) -> dict[str, Any]:
    mm = FI_RELEASES[version]["mm_fp4"]
    return dict(mm["backends"]) if mm.get("present") else {}


def expected_cc(version: str, name: str) -> set[int] | None:
    """The compute capabilities FlashInfer `version` lets mm_fp4 backend `name` use, from the data.

    From 0.5.0rc1 this is the @supported_compute_capability table. Before it, mm_fp4 checks
    inline and through what it compiles, and the expectation is derived from those fields:
    """
    release = FI_RELEASES[version]
    backends = fi_backend_data(version)
    if not backends:
        return None  # no mm_fp4 in this release: no backend at all
    if "(no backend argument)" in backends:
        # 0.2.9rc1 and 0.2.9rc2: mm_fp4 has no backend= yet (cuDNN only). The profile judges a
        # pre-release as its release (fp4doctor.versions), so they get 0.2.9's answer; telling
        # two superseded release candidates apart would need an era bounded at a 0.2.9rc3 that
        # was never published.
        assert Version(version).is_prerelease and versions.release_of(version) == Version("0.2.9")
        return expected_cc("0.2.9", name)
    if name not in backends:
        return None
    data = backends[name]
    if data["cc"] is not None:
        return set(data["cc"])
    # No table before 0.5.0.
    known = {cc_of_arch(a) for a in release["jit"]["nvcc_flag_archs"]}
    excluded = set(data.get("excluded_cc") or [])
    first = set(FI_RELEASES[FIRST_TABLE]["mm_fp4"]["backends"][name]["cc"])
    if name == "cudnn":
        # No FlashInfer check at all (no inline test, no JIT module): cuDNN itself decides. The
        # profile is deliberately the first table's list rather than "any GPU", so that it never
        # sends a pre-Blackwell GPU to an FP4 cuDNN graph.
        assert not data["inline_cc_checks"] and not excluded and not data["jit"]["builders"]
        return first
    if name == "trtllm":
        # The launcher module is built with sm_100a flags in every release to 0.5.0, whose table
        # still accepts SM100 and SM103: the kernels are per-SM cubins, so the build flags do not
        # bound it. The profile takes the first table's list, limited to the Blackwell archs the
        # release knows at all (0.2.9-0.3.0.post1 know only sm_100a), minus what mm_fp4 refuses.
        return (first & known) - excluded
    # cutlass: the JIT modules are compiled for the listed archs and for every GPU whose major is
    # in supported_major_versions (of the archs the release knows); nothing else is refused.
    jit = data["jit"]
    built = {cc_of_arch(a) for a in jit["archs"]}
    built |= {cc for cc in known if cc // 10 in set(jit["supported_major_versions"])}
    # SM110 (0.3.1-0.4.1): the module builds, but the CUTLASS runner fails to initialise there
    # ("[FP4 gemm Runner] Failed to initialize cutlass FP4 gemm", vLLM issue #24377 with FlashInfer
    # 0.3.1 on Jetson Thor; field case vllm-24377-thor-fi-cutlass), and FlashInfer's own table
    # leaves SM110 out until 0.5.1: the profile refuses it, stricter than the build flags.
    return built - excluded - {110}


def fi_backend(p: Profile, name: str) -> Any:
    for b, _key, fi_name in flashinfer_backends(p):
        if fi_name == name:
            return b
    return None


@pytest.mark.parametrize("version", fi_release_ids())
def test_flashinfer_cc_tables(version: str) -> None:
    """Per mm_fp4 backend, the CCs the profiles accept at this release equal the data's; a
    backend the release does not have is not accepted at all."""
    wrong = []
    for target, p in FI_TARGETS.items():
        for name in FI_BACKENDS:
            b = fi_backend(p, name)
            if b is None:
                continue
            got = table_at(b, version)
            want = expected_cc(version, name)
            if got != want:
                wrong.append(f"{target}:{b.name} profile {got}, data {want}")
    assert not wrong, f"FlashInfer {version}: " + "; ".join(wrong)


@pytest.mark.parametrize("version", fi_release_ids())
def test_flashinfer_choices_default_and_invalid_value(version: str) -> None:
    mm = FI_RELEASES[version]["mm_fp4"]
    era = era_of(FI, version)
    arg = knob(era, "backend")
    if not mm.get("present"):
        assert arg is None and not era.auto, f"{version} has no mm_fp4"
        return
    assert arg is not None
    if not mm["backend_param"]:
        # 0.2.9rc1/rc2 (see expected_cc): judged as 0.2.9, whose backend= they lack.
        assert versions.release_of(version) == Version("0.2.9")
        return
    literal = set(mm["backend_literal"]) - FI_UNMODELLED
    assert set(arg.accepted()) == literal
    assert set(arg.values) == {FI_BACKENDS[name] for name in literal}
    if mm["default_backend"] == "cudnn":
        assert [(s.backend, s.conditions) for s in era.auto] == [("flashinfer-cudnn", ())]
    else:
        assert mm["default_backend"] == "auto"
        assert era.auto and all(s.conditions for s in era.auto)
    text = arg.on_invalid or ""
    unknown = mm["unknown_backend"]
    if unknown["raises"]:
        assert "BackendSupportedError" in unknown["exceptions"]
        assert "raises BackendSupportedError" in text
    else:
        # no else branch: the output buffer is returned unwritten
        assert "raises nothing" in text and "unwritten" in text, text


# --- the automatic order ------------------------------------------------------------------------

CUDA_VERSIONS = ("12.8", "12.9", "13.0")


def heuristic_tests(cudnn: bool, cudnn_915: bool, cuda: str, cute: bool) -> dict[str, bool]:
    """The values of the heuristic's non-CC tests (the data's `if` keys) on such a host."""
    return {
        "CUDNN_AVAILABLE": cudnn,
        "cudnn.backend_version() >= 91500": cudnn_915,
        "get_cuda_version().major >= 13": Version(cuda) >= Version("13.0"),
        "get_cuda_version() >= Version('12.9')": Version(cuda) >= Version("12.9"),
        "CUTE_DSL_AVAILABLE": cute,
    }


def suitable(version: str, name: str, cc: int, cudnn: bool, cuda: str, cute: bool) -> bool:
    """Does FlashInfer's requirement check let `name` run here (what it filters auto with)?"""
    data = fi_backend_data(version).get(name)
    if data is None or cc not in set(data["cc"] or ()):
        return False
    if name == "cudnn" and not cudnn:
        return False
    if data.get("needs_cute_dsl") and not cute:
        return False
    return all(
        Version(cuda) >= Version(c["min_cuda_nvfp4"])
        for c in data.get("cuda_checks", [])
        if c.get("min_cuda_nvfp4")
    )


def fi_auto_releases() -> list[str]:
    return [v for v in FI_DATA["covers"] if (FI_RELEASES[v]["mm_fp4"] or {}).get("auto")]


@pytest.mark.parametrize("version", fi_auto_releases())
def test_flashinfer_auto_order(version: str) -> None:
    """backend='auto': per CC and host, the data's candidate order filtered by FlashInfer's own
    requirement checks equals the backends whose automatic steps hold, in order."""
    auto = FI_RELEASES[version]["mm_fp4"]["auto"]
    assert auto["verified_by"] == "program" and auto["by_cc"], f"{version}: {auto}"
    era = era_of(FI, version)
    wrong = []
    for cc_text, rows in auto["by_cc"].items():
        cc = int(cc_text)
        for cudnn in (False, True):
            for cudnn_915 in (False, True) if cudnn else (False,):
                for cuda in CUDA_VERSIONS:
                    for cute in (False, True):
                        tests = heuristic_tests(cudnn, cudnn_915, cuda, cute)
                        row = next(
                            r for r in rows if all(tests[k] == v for k, v in r["if"].items())
                        )
                        want = [
                            FI_BACKENDS[n]
                            for n in row["order"]
                            if n not in FI_UNMODELLED
                            and suitable(version, n, cc, cudnn, cuda, cute)
                        ]
                        packages = {FLASHINFER: version, "torch": "2.9.0"}
                        if cudnn:
                            packages["nvidia-cudnn-frontend"] = "1.16.0"
                        if cute:
                            packages["nvidia-cutlass-dsl"] = "4.3.0"
                        ctx, gpu = host_context(
                            cc,
                            packages,
                            cuda=cuda,
                            cudnn=(91500 if cudnn_915 else 91002) if cudnn else None,
                            engine=(FLASHINFER, version),
                        )
                        got = auto_choices(era, ctx, gpu)
                        if got != want:
                            host = f"SM{cc} CUDA {cuda} cudnn={cudnn}/9.15={cudnn_915} cute={cute}"
                            wrong.append(f"{host}: profile {got}, FlashInfer {want}")
    assert not wrong, f"FlashInfer {version} auto: " + "; ".join(wrong[:8])


def test_flashinfer_auto_releases_are_the_auto_eras() -> None:
    """Every release whose mm_fp4 defaults to 'auto' has a heuristic the data could evaluate."""
    for version in FI_DATA["covers"]:
        mm = FI_RELEASES[version]["mm_fp4"]
        if mm.get("present") and mm.get("default_backend") == "auto":
            assert mm["auto"] and mm["auto"]["by_cc"], version


# --- cuDNN, CUDA and nvcc gates -----------------------------------------------------------------


def cudnn_text(encoded: int) -> str:
    major, rest = divmod(encoded, 10000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


@pytest.mark.parametrize("version", [v for v in FI_DATA["covers"] if "cudnn" in fi_backend_data(v)])
def test_flashinfer_cudnn_gates(version: str) -> None:
    data = fi_backend_data(version)["cudnn"]["cudnn"]
    rules = condition(FI, "flashinfer_cudnn")
    frontend = [
        r.kind.version
        for r in rules
        if isinstance(r.kind, Package) and r.kind.name == "nvidia-cudnn-frontend"
    ]
    assert frontend == [SpecifierSet(f">={m}") for m in data["frontend_min"]]
    backend = [r.kind.spec for r in rules if isinstance(r.kind, CudnnBackend)]
    cudnn_data = fi_backend_data(version)["cudnn"]
    inline = [*cudnn_data["inline_cc_checks"], *cudnn_data.get("conditional_cc_raises", [])]
    for check in data["backend_version_checks"]:
        op, encoded = check["cmp"].split()
        assert op == "Lt"
        if check["fn"] == "_check_cudnn_fp4_availability":
            assert backend == [SpecifierSet(f">={cudnn_text(int(encoded))}")]
        else:
            # The 9.14 floor of _cudnn_gemm_fp4_requirement is for MXFP4 only (`not use_nvfp4`):
            # not an NVFP4 gate, so no rule.
            assert any("not use_nvfp4" in s and "backend_version()" in s for s in inline), check
    assert any(
        isinstance(r.kind, Use) and r.kind.name == "flashinfer_cudnn"
        for r in FI.backends["flashinfer-cudnn"].requires
    )


def rules_at(reqs: tuple[Requirement, ...], version: str) -> list[Requirement]:
    return [r for r in reqs if applies(r, version)]


@pytest.mark.parametrize("version", [v for v in FI_DATA["covers"] if "b12x" in fi_backend_data(v)])
def test_flashinfer_b12x_cuda_gate(version: str) -> None:
    checks = fi_backend_data(version)["b12x"]["cuda_checks"]
    minimum = {c["min_cuda_nvfp4"] for c in checks if c.get("min_cuda_nvfp4")}
    assert len(minimum) == 1, checks
    rules = rules_at(condition(FI, "b12x_cuda"), version)
    assert [r.kind.spec for r in rules if isinstance(r.kind, CudaRuntime)] == [
        SpecifierSet(f">={minimum.pop()}")
    ]


def jit_kernels_rule() -> Requirement:
    found = [
        r
        for r in FI.backends["flashinfer-cutlass"].requires
        if isinstance(r.kind, Use) and r.kind.name == "flashinfer_jit_kernels"
    ]
    assert len(found) == 1
    return found[0]


NVCC_VERSIONS = ("12.6", "12.8", "12.9", "13.0")
# The profile's floor for building any FP4 GEMM: sm_100a/sm_120a need CUDA 12.8. FlashInfer's own
# check (0.6.7+) lets SM10x/SM11x through from 12.6 (jit.normalize_cuda_arch min_cuda): the
# profile is deliberately stricter there, since no FP4 kernel builds below 12.8.
NVCC_FLOOR = Version("12.8")


@pytest.mark.parametrize("version", [v for v in FI_DATA["covers"] if fi_backend_data(v)])
def test_flashinfer_jit_nvcc_per_gpu(version: str) -> None:
    """Without flashinfer-jit-cache, the nvcc each GPU needs to build FlashInfer's GEMMs."""
    by_arch = FI_RELEASES[version]["jit"]["normalize_cuda_arch"]["by_arch"]
    rule = jit_kernels_rule()
    wrong = []
    for cc in (100, 103, 107, 110, 120, 121):
        # before 0.6.7 FlashInfer has no check of its own: nvcc alone decides
        flashinfer_min = Version(by_arch[f"{cc // 10}.{cc % 10}"]["min_cuda"]) if by_arch else None
        want = max(NVCC_FLOOR, flashinfer_min or NVCC_FLOOR)
        accepted = []
        for nvcc in NVCC_VERSIONS:
            ctx, gpu = host_context(
                cc,
                {FLASHINFER: version, "torch": "2.9.0"},
                nvcc=nvcc,
                ninja=True,
                engine=(FLASHINFER, version),
            )
            if rule.check(ctx, gpu).ok:
                accepted.append(Version(nvcc))
        if not accepted or min(accepted) != want:
            wrong.append(f"SM{cc}: profile from nvcc {accepted[:1]}, expected {want}")
    assert not wrong, f"FlashInfer {version}: " + "; ".join(wrong)


# --- the import-time check of flashinfer-cubin and flashinfer-jit-cache ---------------------------

IMPORT_RULES = {"flashinfer-cubin": "cubin_version", "flashinfer-jit-cache": "jit_cache_version"}


@pytest.mark.parametrize("version", [v for v in FI_DATA["covers"] if fi_backend_data(v)])
def test_flashinfer_import_version_check(version: str) -> None:
    checks = FI_RELEASES[version]["packaging"]["version_checks"]
    rules = {r.id: r for r in rules_at(condition(FI, "flashinfer_import"), version)}
    for package, rule_id in IMPORT_RULES.items():
        # `raises`: the mismatch leaves `import flashinfer` as an exception. From 0.7.2 the check
        # runs inside a try that logs "Ignoring incompatible ..." and goes on without the wheel.
        found = [c for c in checks[package] or () if c["raises"]]
        if not found:
            assert rule_id not in rules, f"{version}: no import check of {package} that raises"
            continue
        assert all(c["import_time"] for c in found)
        # 'exact', 'prefix (startswith)' (0.4.0-0.7.0rc2, jit-cache) or 'exact or exact+local':
        # the profile compares public versions (a +cuXXX suffix is the same version), which is
        # what the prefix test admits in practice; a jit-cache 0.4.0.post1 beside flashinfer
        # 0.4.0 passes the prefix test and fails the profile's (coarser, never seen shipped).
        assert found[0]["kind"] in (
            "exact",
            "prefix (startswith)",
            "exact or exact+local (e.g. +cu129)",
        )
        rule = rules.get(rule_id)
        assert rule is not None and isinstance(rule.kind, AnyOf), f"{version}: {package}"
        alternatives = [r.kind for r in rule.children]
        assert any(isinstance(k, Package) and k.name == package and k.absent for k in alternatives)
        assert any(
            isinstance(k, SameVersion) and (k.follower, k.leader) == (package, FLASHINFER)
            for k in alternatives
        )
        bypass = {k.name for k in alternatives if isinstance(k, Env)}
        assert bypass == {e for c in found for e in c["bypass_env"]}
    # every FlashInfer backend of every profile that includes the module stops with the import
    for target, p in FI_TARGETS.items():
        for b, _key, _name in flashinfer_backends(p):
            uses = {r.kind.name for r in b.requires if isinstance(r.kind, Use)}
            assert "flashinfer_import" in uses, f"{target}:{b.name}"


# === SGLang =======================================================================================

SG_FIRST = versions.bounds(SGLANG.eras[0].versions)[0]
# SGLang's --fp4-gemm-backend spellings -> the profile's backends
SG_BACKENDS = {
    "flashinfer_cudnn": "flashinfer-cudnn",
    "flashinfer_cutlass": "flashinfer-cutlass",
    "flashinfer_trtllm": "flashinfer-trtllm",
    "flashinfer_cutedsl": "flashinfer-cutedsl",
    "cutlass": "sgl-cutlass",
    "marlin": "marlin",
}
# the variables that select the dense FP4 GEMM backend (the others with FP4 in their names are
# MoE, checkpoint or ROCm switches)
SG_BACKEND_VARIABLES = (
    "SGLANG_USE_CUTLASS_BACKEND_FOR_FP4_GEMM",
    "SGLANG_FLASHINFER_FP4_GEMM_BACKEND",
)


def sg_in_scope(version: str) -> bool:
    return SG_FIRST is not None and versions.release_of(version) >= SG_FIRST


@pytest.mark.parametrize("version", list(SG_DATA["covers"]))
def test_sglang_release_has_one_era_or_no_verdict(version: str) -> None:
    era = era_or_none(SGLANG, version)
    if sg_in_scope(version):
        assert era is not None
        assert SG_RELEASES[version]["linear"]["derived"]["uses_flashinfer_mm_fp4"]
        return
    # Older than the profile's first era: the doctor gives no verdict (exit code 3).
    assert era is None, f"{version} is older than the profile and must be in no era"
    # 0.4.5.post1-0.4.9.post4 call only sgl-kernel; 0.4.9.post5/post6 already reach FlashInfer
    # but are post-releases of 0.4.9, which a bound cannot separate from 0.4.9 itself.
    assert versions.release_of(version) < Version("0.4.10")


def sg_in_scope_releases() -> list[str]:
    return [v for v in SG_DATA["covers"] if sg_in_scope(v)]


def sg_variables(version: str) -> set[str]:
    env = SG_RELEASES[version]["env"]
    return {
        n for n in SG_BACKEND_VARIABLES if n in env and (env[n]["declared"] or env[n]["read_in"])
    }


@pytest.mark.parametrize("version", sg_in_scope_releases())
def test_sglang_knobs(version: str) -> None:
    release = SG_RELEASES[version]
    era = era_of(SGLANG, version)
    flag = release["fp4_gemm_backend_flag"]
    cli = knob(era, "--fp4-gemm-backend")
    if flag is None:
        assert cli is None
    else:
        assert cli is not None and cli.case_sensitive
        assert set(cli.accepted()) == set(flag["choices"]["values"]) - {"auto"}
        own = {SG_BACKENDS[v] for v in flag["choices"]["values"] if v != "auto"}
        # A backend beyond one per choice shares a choice's spelling and differs by the
        # variable written with it (flashinfer-cutedsl-w4a16, with
        # SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16).
        shared = set(cli.values) - own
        assert own <= set(cli.values)
        assert all(cli.env_for(b) and cli.values[b][0] in cli.accepted() for b in shared), shared
    declared = sg_variables(version)
    knobs = {k.name for k in era.knobs if k.kind == "env"}
    if (
        versions.release_of(version) == Version("0.5.9")
        and flag is not None
        and flag["default"] == "flashinfer_cutlass"
    ):
        # 0.5.9 still reads SGLANG_FLASHINFER_FP4_GEMM_BACKEND, but only when
        # `--fp4-gemm-backend auto` is passed (its default is flashinfer_cutlass): the profile
        # has no knob for that and tells the user through the variable's note.
        assert declared == {"SGLANG_FLASHINFER_FP4_GEMM_BACKEND"} and not knobs
        assert "0.5.9 ignores it" in (
            SGLANG.variables["SGLANG_FLASHINFER_FP4_GEMM_BACKEND"].note or ""
        )
        return
    assert knobs == declared, f"{version}: profile {knobs}, SGLang {declared}"
    for name in SG_BACKEND_VARIABLES:
        if name not in declared:
            assert name in SGLANG.variables, f"{name} must be noted for the lint"


def sg_predicate(text: str, release: dict[str, Any], cc: int, cuda: str) -> bool:
    """One `when` entry of SGLang's automatic order, on a GPU of `cc` with CUDA `cuda`."""
    if text.startswith("not (") and text.endswith(")"):
        return not sg_predicate(text[5:-1], release, cc, cuda)
    if text == "is_cuda() and (10, 0) > get_device_capability() >= (8, 0)":
        return 80 <= cc < 100
    predicates = release["linear"]["predicates"]
    name = text.removesuffix("()").removeprefix("get_platform().")
    assert name in predicates, f"unknown predicate {text!r}: teach sg_predicate"
    pred = predicates[name]
    return cc // 10 in pred["cc_majors"] and Version(cuda) >= Version(pred["min_cuda"])


def sg_expected_auto(release: dict[str, Any], cc: int, cuda: str) -> str | None:
    """SGLang's own choice with FlashInfer installed, when the data spells it out."""
    flag = release["fp4_gemm_backend_flag"]
    if flag is None:
        return None
    if flag["default"] != "auto":
        return SG_BACKENDS[flag["default"]]
    order = release["linear"]["derived"]["auto_order"]
    if not order or order[0]["backend"] == "auto":
        return None  # 'auto' is handed to FlashInfer: its heuristic (the FlashInfer tests)
    for step in order:
        if all(sg_predicate(w, release, cc, cuda) for w in step["when"]):
            return SG_BACKENDS[step["backend"]]
    raise AssertionError("no step of SGLang's automatic order holds")


SG_CCS = (80, 90, 100, 103, 107, 110, 120, 121)


@pytest.mark.parametrize("version", sg_in_scope_releases())
def test_sglang_auto_order_with_flashinfer(version: str) -> None:
    release = SG_RELEASES[version]
    era = era_of(SGLANG, version)
    wrong = []
    checked = 0
    for cc in SG_CCS:
        for cuda in ("12.6", "12.8", "12.9"):
            want = sg_expected_auto(release, cc, cuda)
            if want is None:
                continue
            checked += 1
            ctx, gpu = host_context(
                cc,
                {"sglang": version, FLASHINFER: "0.6.8", "torch": "2.9.0", "sgl-kernel": "0.3.20"},
                cuda=cuda,
                engine=("sglang", version),
            )
            got = next((s.backend for s in era.auto if all_hold(s.conditions, ctx, gpu).ok), None)
            if got != want:
                wrong.append(f"SM{cc} CUDA {cuda}: profile {got}, SGLang {want}")
    if release["fp4_gemm_backend_flag"] is None or checked == 0:
        # No structured order: 0.4.10-0.5.7 pass no backend (FlashInfer's default) or one chosen
        # by an environment variable, and 0.5.8 hands 'auto' to FlashInfer; the FlashInfer steps
        # must then follow FlashInfer's own default (fi_default_cudnn / fi_default_auto) or an
        # explicit cutlass (0.5.4-0.5.7, whose knob defaults to it).
        for step in era.auto:
            if step.backend.startswith("flashinfer-") and step.conditions:
                names = {r.kind.name for r in step.conditions if isinstance(r.kind, Use)}
                assert names & {"fi_default_cudnn", "fi_default_auto", "has_mm_fp4"}, step
    assert not wrong, f"SGLang {version}: " + "; ".join(wrong)


def sg_falls_back(version: str) -> bool:
    """Does SGLang `version` run its own CUTLASS GEMM when FlashInfer is not importable (data)?"""
    derived = SG_RELEASES[version]["linear"]["derived"]
    without = " ".join(derived["without_flashinfer"])
    if "raises when FlashInfer is absent" in without:
        return False
    assert "cutlass" in without or "fp4_gemm" in without, without
    reaches = derived.get("backend_kwarg_reaches_sgl_kernel") or {}
    if reaches.get("sgl_kernel_accepts_backend") is False:
        env = SG_RELEASES[version]["env"].get("SGLANG_USE_CUTLASS_BACKEND_FOR_FP4_GEMM")
        default_true = bool(env) and any(r.get("default") == "true" for r in env["read_in"])
        for call in reaches.get("calls", []):
            # backend= reaches sgl_kernel.cutlass_scaled_fp4_mm, which has no such argument:
            # TypeError on the default path (always, or under the variable when it defaults true:
            # `when` or the expression itself names it)
            text = json.dumps(call["backend"]) + " ".join(call["when"])
            if "USE_CUTLASS_BACKEND_FOR_FP4_GEMM" not in text or default_true:
                return False
    return True


@pytest.mark.parametrize("version", sg_in_scope_releases())
def test_sglang_auto_order_without_flashinfer(version: str) -> None:
    era = era_of(SGLANG, version)
    ctx, gpu = host_context(
        100,
        {"sglang": version, "torch": "2.9.0", "sgl-kernel": "0.3.20"},
        cuda="12.8",
        nvcc="12.8",
        ninja=True,
        engine=("sglang", version),
    )
    first = next((s.backend for s in era.auto if all_hold(s.conditions, ctx, gpu).ok), None)
    expected = sg_falls_back(version)
    if version == "0.5.5.post3":
        # The first 0.5.5 build that calls sgl-kernel without backend= (the fallback of 0.5.6);
        # 0.5.5-0.5.5.post2 pass backend= to it (TypeError). fp4doctor.versions judges a
        # post-release as its release, so the profile keeps 0.5.5's answer: no fallback.
        assert expected and first != "sgl-cutlass"
        return
    if expected:
        assert first == "sgl-cutlass", f"{version}: profile {first}, SGLang falls back"
    else:
        assert first != "sgl-cutlass", f"{version}: SGLang does not fall back, profile {first}"


@pytest.mark.parametrize(
    ("version", "era_start"),
    [
        ("0.5.3rc0", ">=0.5.1"),  # no FP4 GEMM knob yet (--moe-runner-backend from 0.5.1)
        ("0.5.3rc2", ">=0.5.3rc2"),  # SGLANG_USE_CUTLASS_BACKEND_FOR_FP4_GEMM already read
        ("0.5.3", ">=0.5.3rc2"),
        ("0.5.10rc0", ">=0.5.10rc0"),  # 0.5.10's order, 0.5.8's knobs
        ("0.5.10", ">=0.5.10rc1"),
        ("0.5.10.post1", ">=0.5.10rc1"),
    ],
)
def test_sglang_pre_releases_land_in_their_era(version: str, era_start: str) -> None:
    era = era_of(SGLANG, version)
    assert any(f"{s.operator}{s.version}" == era_start for s in era.versions), era.versions


# === TensorRT-LLM =================================================================================

# The package index lists these releases (https://pypi.org/pypi/tensorrt-llm/json, 2026-12-01);
# from 1.2.1 on they are stub sdists, so no release data exists to read.
TRTLLM_RELEASES = (
    "1.1.0",
    "1.2.0rc0",
    "1.2.0rc1",
    "1.2.0rc2",
    "1.2.0rc2.post2",
    "1.2.0rc3",
    "1.2.0rc4",
    "1.2.0rc5",
    "1.2.0rc6.post3",
    "1.2.0rc8",
    "1.2.0",
    "1.2.1",
    "1.3.0rc0",
    "1.3.0rc12.post1",
    "1.3.0rc13",
    "1.3.0rc29",
    "1.4.0rc0",
    "1.4.0rc1",
)
CONFIG_KNOB = "nvfp4_gemm_config.allowed_backends"


@pytest.mark.parametrize("version", TRTLLM_RELEASES)
def test_trtllm_releases(version: str) -> None:
    era = era_of(TRTLLM, version)
    config = knob(era, CONFIG_KNOB)
    if Version(version) < Version("1.2.0rc5"):
        # 1.2.0rc0-rc4 predate nvfp4_gemm_config and the unified runner
        assert config is None
        return
    assert config is not None
    marlin = "trtllm-marlin" in config.values
    assert marlin == (Version(version) >= Version("1.4.0rc0"))


def test_trtllm_newest_and_unverified_boundaries_are_said() -> None:
    newest = INDEX["packages"]["tensorrt-llm"][-1]
    assert TRTLLM.engine.newest_known == TRTLLM_RELEASES[-1] == newest
    for era in TRTLLM.eras[1:]:
        assert "boundary not verified" in (era.note or ""), era.versions
    assert "boundary not verified" in (TRTLLM.eras[0].note or "")


def test_no_trtllm_release_has_a_wheel_on_the_index() -> None:
    # tools/extract/index.py: every release on the package index is a stub sdist, so the
    # profile's boundaries cannot be read from any release (profiles/trtllm.yaml says so).
    releases = INDEX["packages"]["tensorrt-llm"]
    assert INDEX["without_wheel"]["tensorrt-llm"] == releases
    assert set(TRTLLM_RELEASES) <= set(releases)
    assert "every one of its" in Path(TRTLLM.path).read_text(encoding="utf-8")


# === newest_known =================================================================================


def test_newest_known_is_derived_from_the_release_data() -> None:
    # profiles/releases.yaml is what tools/extract/releases.py writes from the data's `covers`,
    # and no shipped profile types its own newest_known.
    spec = importlib.util.spec_from_file_location("releases", DATA.parent / "releases.py")
    assert spec is not None and spec.loader is not None
    releases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(releases)
    root = DATA.parents[2]
    expected = releases.render(releases.newest(), releases.unavailable_pins())
    assert (root / "profiles" / "releases.yaml").read_text() == expected
    for name in profile.builtin_names():
        assert "newest_known" not in (root / "profiles" / f"{name}.yaml").read_text(), name
        loaded = profile.load(name)
        assert loaded.engine.newest_known == releases.newest()[loaded.engine.package], name
        pins = releases.unavailable_pins().get(loaded.engine.package, {})
        assert dict(loaded.engine.unavailable_pins) == pins, name


def test_sglang_k16_rule_holds_where_the_release_raises() -> None:
    # ModelOptFp4LinearMethod.create_weights `input_size_per_partition % 16 != 0: raise`, read
    # in every SGLang release with NVFP4 (linear.gates).
    from fp4doctor.checkpoint import constraints

    alignment = next(a for a in constraints.load().alignments if a.id == "sglang_modelopt_k16")
    raising = [
        v
        for v in SG_DATA["covers"]
        if any(
            "input_size_per_partition % 16 != 0" in " ".join(g["when"])
            for g in SG_RELEASES[v]["linear"]["gates"]
        )
    ]
    stated = [v for v in SG_DATA["covers"] if alignment.engine.contains(v, prereleases=True)]
    assert stated == raising and raising[0] == SG_DATA["covers"][0]


def test_refresh_names_what_moved_in_a_new_release() -> None:
    # tools/extract/refresh.py's report, on the data as it is and the data without vLLM 0.34.0:
    # the fields 0.34.0 moved against 0.33.0, and nothing for the releases read before.
    spec = importlib.util.spec_from_file_location("refresh", DATA.parent / "refresh.py")
    assert spec is not None and spec.loader is not None
    refresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(refresh)
    after = json.loads((DATA / "vllm.json").read_text(encoding="utf-8"))
    before = {
        **after,
        "covers": [v for v in after["covers"] if v != "0.34.0"],
        "releases": {v: r for v, r in after["releases"].items() if v != "0.34.0"},
    }
    (line,) = refresh.compare("vllm.json", before, after)
    assert line.startswith("vllm.json: 0.34.0 new; against 0.33.0: ")
    assert "envs.removed (new)" in line and "linear.precedence.tested_in_order" in line
    assert "files" not in line.split(": ", 2)[2]  # content hashes are not news
    changed = {**after["releases"], "0.33.0": {**after["releases"]["0.33.0"], "yanked": True}}
    (line,) = refresh.compare("vllm.json", after, {**after, "releases": changed})
    assert "0.33.0 CHANGED" in line and "yanked" in line
