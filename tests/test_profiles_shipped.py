"""The shipped profiles against the facts they encode.

The version tables in tests/fixtures/reference/ are copies of shared/reference/ (read from the
released wheels): every version listed there falls in exactly one era, the knob choices of each
era are the engine's own, and FlashInfer's compute-capability tables match, version by version.
The real-packages test asks the installed FlashInfer itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version
from profile_tables import (
    FLASHINFER_ADAPTERS,
    contains,
    flashinfer_backends,
    named_conditions,
    table_at,
)

from fp4doctor import profile, versions
from fp4doctor.profile.kinds.base import Requirement
from fp4doctor.profile.kinds.use import Use
from fp4doctor.profile.model import Era, Knob, Profile

REFERENCE = Path(__file__).parent / "fixtures" / "reference"
SHARED_REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"
TARGETS = ("flashinfer", "sglang", "trtllm", "vllm")
# The short names of issue #3, plus the engines' own spellings where they differ
# (`cute-dsl` is mm_fp4's backend= value).
ALIASES = {"cudnn", "trtllm", "cutlass", "cutedsl", "cute-dsl", "b12x", "marlin", "emulation"}
SMOKE_ADAPTERS = {
    "emulation",
    "flashinfer-cudnn",
    "flashinfer-cutlass",
    "flashinfer-trtllm",
    "flashinfer-cute-dsl",
    "flashinfer-b12x",
    "cudnn-graph",
    "vllm-cutlass",
    "vllm-marlin",
    "torch-scaled-mm",
    "emulation-moe",
    "flashinfer-cutlass-moe",
    "flashinfer-trtllm-moe",
    "flashinfer-cutedsl-moe",
}
CCS = (75, 80, 86, 89, 90, 100, 103, 107, 110, 120, 121)
# Releases from PyPI (pip index versions tensorrt-llm, 2026-11); no wheel table exists for them.
TRTLLM_VERSIONS = (
    "0.17.0",
    "0.21.0",
    "1.0.0",
    "1.1.0",
    "1.2.0rc5",
    "1.2.0",
    "1.2.1",
    "1.3.0rc5",
    "1.3.0rc29",
    "1.4.0rc0",
    "1.4.0rc1",
)


def reference(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REFERENCE / name).read_text(encoding="utf-8"))
    return data


def reference_versions(name: str) -> list[str]:
    return list(reference(name)["versions"])


VERSION_TABLES = {
    "vllm": "vllm-knobs-by-version.json",
    "sglang": "sglang-knobs-by-version.json",
    "flashinfer": "flashinfer-mm_fp4-cc-by-version.json",
}


def sample_versions(target: str) -> list[str]:
    if target == "trtllm":
        return list(TRTLLM_VERSIONS)
    return reference_versions(VERSION_TABLES[target])


def eras_of(p: Profile, version: str) -> list[Era]:
    return [era for era in p.eras if contains(era.versions, version)]


def era_of(p: Profile, version: str) -> Era:
    matches = eras_of(p, version)
    assert len(matches) == 1, f"{p.target} {version}: in {len(matches)} eras"
    return matches[0]


def knob(era: Era, name: str) -> Knob | None:
    found = [k for k in era.knobs if k.name == name]
    assert len(found) <= 1
    return found[0] if found else None


# --- loading and vocabulary --------------------------------------------------------------------


def test_every_target_is_shipped() -> None:
    assert set(TARGETS) <= set(profile.builtin_names())


@pytest.mark.parametrize("target", profile.builtin_names())
def test_shipped_profile_loads(target: str) -> None:
    p = profile.load(target)
    assert p.target == target
    assert p.backends and p.eras


@pytest.mark.parametrize("target", profile.builtin_names())
def test_aliases_and_smoke_adapters_are_known_names(target: str) -> None:
    p = profile.load(target)
    for b in p.backends.values():
        assert set(b.aliases) <= ALIASES, f"{target}:{b.name} aliases {b.aliases}"
        assert set(b.smoke) <= SMOKE_ADAPTERS, f"{target}:{b.name} smoke {b.smoke}"


# --- eras partition the versions ---------------------------------------------------------------


def boundaries(p: Profile) -> set[str]:
    return {s.version for era in p.eras for s in era.versions}


@pytest.mark.parametrize("target", TARGETS)
def test_every_known_version_is_in_exactly_one_era(target: str) -> None:
    p = profile.load(target)
    for version in sample_versions(target):
        era_of(p, version)


def just_below(boundary: str) -> str:
    """A release that sorts just before `boundary` and that a `<boundary` specifier admits.

    PEP 440: `<1.2` never admits 1.2's own pre-releases, so below a final version the probe is
    the previous release with a large last part (0.5.3 -> 0.5.2.9999, 0.6 -> 0.5.9999).
    """
    v = Version(boundary)
    if v.is_prerelease:
        return f"{boundary}.dev0"
    release = list(v.release)
    i = max(j for j, part in enumerate(release) if part > 0)
    release[i] -= 1
    return ".".join(str(part) for part in [*release[: i + 1], 9999])


@pytest.mark.parametrize("target", TARGETS)
def test_eras_leave_no_gap_and_do_not_overlap(target: str) -> None:
    p = profile.load(target)
    probes = {"0.0.1", p.engine.newest_known, "999.0"}
    for b in boundaries(p):
        probes |= {b, just_below(b), f"{b}.post1"}
    oldest = versions.bounds(p.eras[0].versions)[0]
    for version in sorted(probes, key=Version):
        if oldest is not None and versions.release_of(version) < oldest:
            # older than the profile covers: in no era (the doctor gives no verdict)
            assert not eras_of(p, version), f"{target} {version} is older than its first era"
            continue
        era_of(p, version)


def test_just_below() -> None:
    assert just_below("0.5.3") == "0.5.2.9999"
    assert just_below("0.6") == "0.5.9999"
    assert just_below("1.2.0rc0") == "1.2.0rc0.dev0"


# --- knob choices equal the engines' own, per version ------------------------------------------


def choices(k: Knob | None) -> set[str] | None:
    return None if k is None else set(k.accepted())


@pytest.mark.parametrize("version", reference_versions("vllm-knobs-by-version.json"))
def test_vllm_knobs_per_version(version: str) -> None:
    row = reference("vllm-knobs-by-version.json")["versions"][version]
    era = era_of(profile.load("vllm"), version)
    env = knob(era, "VLLM_NVFP4_GEMM_BACKEND")
    listed = row["VLLM_NVFP4_GEMM_BACKEND"]
    expected = None if listed is None else set(listed)
    assert choices(env) == expected
    if env is not None:
        assert env.case_sensitive
        assert (env.deprecated is not None) == row["VLLM_NVFP4_GEMM_BACKEND_deprecated"]
    assert (knob(era, "VLLM_USE_TRTLLM_FP4_GEMM") is not None) == row["VLLM_USE_TRTLLM_FP4_GEMM"]
    cli = knob(era, "--linear-backend")
    if row["--linear-backend"] is None:
        assert cli is None
    else:
        assert cli is not None
        assert set(cli.accepted()) <= set(row["--linear-backend"])  # FP4 ones only


@pytest.mark.parametrize("version", reference_versions("sglang-knobs-by-version.json"))
def test_sglang_knobs_per_version(version: str) -> None:
    p = profile.load("sglang")
    row = reference("sglang-knobs-by-version.json")["versions"][version]
    era = era_of(p, version)
    cli = knob(era, "--fp4-gemm-backend")
    if row["--fp4-gemm-backend"] is None:
        assert cli is None
    else:
        # every choice but 'auto' (the engine's own order, not a backend)
        assert cli is not None and cli.case_sensitive
        assert choices(cli) == set(row["--fp4-gemm-backend"]) - {"auto"}
    for name in ("SGLANG_USE_CUTLASS_BACKEND_FOR_FP4_GEMM", "SGLANG_FLASHINFER_FP4_GEMM_BACKEND"):
        declared = row[name]
        if knob(era, name) is not None:
            assert declared, f"{version}: {name} is a knob but SGLang does not declare it"
        elif declared:
            assert name in p.variables, f"{version}: {name} is declared but neither knob nor noted"


@pytest.mark.parametrize("version", reference_versions("flashinfer-mm_fp4-cc-by-version.json"))
def test_flashinfer_default_and_choices_per_version(version: str) -> None:
    row = reference("flashinfer-mm_fp4-cc-by-version.json")["versions"][version]
    era = era_of(profile.load("flashinfer"), version)
    default = row["mm_fp4_default_backend"]
    if default == "cudnn":
        assert [(s.backend, s.conditions) for s in era.auto] == [("flashinfer-cudnn", ())]
    elif default == "auto":
        assert era.auto and all(s.conditions for s in era.auto)
    if row["cc_by_backend"] is not None:
        arg = knob(era, "backend")
        assert arg is not None
        modelled = {key for key, _name in FLASHINFER_ADAPTERS.values()}
        listed = {key for key in row["cc_by_backend"] if key in modelled}
        names = {name for key, name in FLASHINFER_ADAPTERS.values() if key in listed}
        assert choices(arg) == names


# --- every rule says where it comes from -------------------------------------------------------


@pytest.mark.parametrize("target", profile.builtin_names())
def test_every_rule_has_a_source(target: str) -> None:
    p = profile.load(target)
    missing = []
    lists: dict[str, tuple[Requirement, ...]] = {
        f"backends.{b.name}.requires": b.requires for b in p.backends.values()
    }
    lists.update({f"conditions.{n}": reqs for n, reqs in named_conditions(p).items()})
    for where, reqs in lists.items():
        # a `use` points at a condition whose entries carry the sources
        missing += [f"{where}.{r.id}" for r in reqs if not isinstance(r.kind, Use) and not r.source]
    for b in p.backends.values():
        missing += [f"backends.{b.name}.advisories.{a.id}" for a in b.advisories if not a.source]
    for era in p.eras:
        label = f"eras[{era.versions}]"
        if not era.source:
            missing.append(label)
        # a knob without its own source is covered by its era's
        missing += [f"{label}.{k.name}" for k in era.knobs if not (k.source or era.source)]
    assert not missing, "rules without a source: " + ", ".join(missing)


# --- FlashInfer's compute-capability tables, version by version --------------------------------


def table_cases(name: bool = False) -> list[Any]:
    """(target, backend, JSON key or mm_fp4 name) for every FlashInfer-backed backend shipped."""
    cases = []
    for target in profile.builtin_names():
        for b, key, fi_name in flashinfer_backends(profile.load(target)):
            marks: list[Any] = []
            third = fi_name if name else key
            cases.append(pytest.param(target, b.name, third, id=f"{target}-{b.name}", marks=marks))
    return cases


@pytest.mark.parametrize(("target", "backend", "key"), table_cases())
def test_flashinfer_cc_tables_match_every_version(target: str, backend: str, key: str) -> None:
    b = profile.load(target).backends[backend]
    rows = reference("flashinfer-mm_fp4-cc-by-version.json")["versions"]
    wrong = []
    for version, row in rows.items():
        if row["cc_by_backend"] is None:
            continue  # before 0.5.0: inline checks, no table
        listed = row["cc_by_backend"].get(key)
        expected = None if listed is None else set(listed)
        got = table_at(b, version)
        if got != expected:
            wrong.append(f"{version}: profile {sorted(got or [])}, FlashInfer {listed}")
    assert not wrong, f"{target}:{backend} " + "; ".join(wrong)


# --- the copies of the reference tables --------------------------------------------------------


@pytest.mark.parametrize("name", sorted(VERSION_TABLES.values()))
def test_fixture_copies_match_shared_reference(name: str) -> None:
    original = SHARED_REFERENCE / name
    if not original.is_file():
        pytest.skip(f"{original} is not beside this checkout")
    shared = json.loads(original.read_text(encoding="utf-8"))["versions"]
    copy = reference(name)["versions"]
    assert list(copy) == list(shared)
    for version, row in copy.items():
        assert row == {k: shared[version][k] for k in row}, f"{name} {version}"


# --- the installed FlashInfer agrees --------------------------------------------------------------

PROBE = textwrap.dedent(
    """
    import json, sys
    try:
        import flashinfer
        from flashinfer import mm_fp4
    except Exception as exc:  # ImportError, or a broken CUDA/torch install
        print("FP4DOCTOR-RESULT " + json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        sys.exit(0)
    backends, ccs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    table = {b: [cc for cc in ccs if mm_fp4.is_backend_supported(b, cc)] for b in backends}
    print("FP4DOCTOR-RESULT " + json.dumps({"version": flashinfer.__version__, "table": table}))
    """
)


@pytest.fixture(scope="module")
def installed_flashinfer() -> dict[str, Any]:
    names = sorted({name for _key, name in FLASHINFER_ADAPTERS.values()})
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(names), json.dumps(CCS)],
        capture_output=True,
        text=True,
        timeout=240,
        env={"FLASHINFER_DISABLE_JIT": "1", "FLASHINFER_NO_DOWNLOAD": "1", **_base_env()},
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("FP4DOCTOR-RESULT ")]
    assert lines, f"probe failed (rc {proc.returncode}): {proc.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(lines[-1].split(" ", 1)[1])
    if "error" in result:
        pytest.skip(f"flashinfer is not importable here: {result['error']}")
    return result


def _base_env() -> dict[str, str]:
    import os

    return {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "LD_LIBRARY_PATH", "PYTHONPATH")
    }


@pytest.mark.real_packages
@pytest.mark.parametrize(("target", "backend", "name"), table_cases(name=True))
def test_profiles_agree_with_installed_flashinfer(
    installed_flashinfer: dict[str, Any], target: str, backend: str, name: str
) -> None:
    version = installed_flashinfer["version"]
    supported = set(installed_flashinfer["table"][name])
    table = table_at(profile.load(target).backends[backend], version)
    claimed = set() if table is None else table & set(CCS)
    assert claimed == supported, (
        f"{target}:{backend} with FlashInfer {version}: profile allows {sorted(claimed)}, "
        f"mm_fp4.is_backend_supported('{name}', cc) says {sorted(supported)}"
    )
