"""Which binary holds each backend's kernel, read for the GPU's architecture (issue 40, item 1).

- Real binaries kept as fixtures (an 85 KB sgl-kernel module, two 50 KB trtllm-gen cubins of
  flashinfer-cubin 0.6.12; tests/fixtures/binaries/README.md).
- vLLM's real extensions where the engine venvs are built (FP4DOCTOR_ENGINE_VENVS): the op each
  profile rule names is in the file the rule reads, and each file the rules read at a release is
  in that release's install.
- FAKE scans (facts, not files) for a module built without the GPU's architecture and for one
  not read at all: the backend fails naming the file, or the finding says "not read" (a skip).
- The `engine_arg` kind SGLang's post-processing rules use.
"""

from __future__ import annotations

import dataclasses
import json
import mmap
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from fp4doctor import facts, profile
from fp4doctor.facts import CompiledArchs
from fp4doctor.findings import Status
from fp4doctor.probe.archs import cubin_arch, probe_compiled_archs, scan
from fp4doctor.profile.kinds import get
from fp4doctor.profile.kinds.base import Context
from fp4doctor.profile.kinds.compiled_arch import CompiledArch, runs_on
from fp4doctor.profile.kinds.engine_arg import EngineArg
from fp4doctor.profile.model import Requirement
from fp4doctor.profile.schema import parse
from fp4doctor.profile.yamlnode import ProfileError
from fp4doctor.rules import evaluate

HERE = Path(__file__).parent
HOSTS = HERE / "fixtures" / "hosts"
BINARIES = HERE / "fixtures" / "binaries"
SPATIAL_OPS = BINARIES / "sglang_kernel-0.4.5-spatial_ops.abi3.so"
BMM_SM100F = BINARIES / "flashinfer_cubin-0.6.12-bmm_sm100f.cubin"
BMM_SM103A = BINARIES / "flashinfer_cubin-0.6.12-bmm_sm103a.cubin"
TRTLLM_MOE_CUBINS = "flashinfer-cubin/cubins/*/batched_gemm-*/*.cubin"
VENVS = os.environ.get("FP4DOCTOR_ENGINE_VENVS")
VLLM = profile.load("vllm")


# --- a real module, kept as a fixture ------------------------------------------------------------


def test_a_real_sgl_kernel_module_is_read() -> None:
    archs = scan(SPATIAL_OPS)
    assert archs.error is None
    assert archs.sass == ["sm_80", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_103a", "sm_120a"]
    assert archs.ptx == []


@pytest.mark.parametrize(
    ("cc", "runs"),
    [
        (80, "sm_80"),
        (86, "sm_80"),  # an older minor of the major
        (90, "sm_90"),
        (100, "sm_100a"),
        (103, "sm_103a"),
        (120, "sm_120a"),
        (110, None),  # Thor: no 11.x image, and none runs across majors
        (121, None),  # GB10: sm_120a runs on 12.0 only
    ],
)
def test_a_real_module_runs_where_its_images_do(cc: int, runs: str | None) -> None:
    assert runs_on(scan(SPATIAL_OPS), cc) == runs


# --- real trtllm-gen cubins: the architecture from the ELF header --------------------------------


def test_real_trtllm_gen_cubins_are_read_from_their_elf_header() -> None:
    """flashinfer-cubin's file names say the target (`_sm100f`, `_sm103a`); the header agrees.
    A family cubin reads as its base architecture, as cuobjdump names it."""
    assert cubin_arch(BMM_SM100F) == "sm_100"
    assert cubin_arch(BMM_SM103A) == "sm_103a"
    assert scan(BMM_SM103A) == CompiledArchs(sass=["sm_103a"])
    assert cubin_arch(SPATIAL_OPS) is None  # a shared library: its fatbin is read instead
    for cc, runs in ((100, "sm_100"), (103, "sm_100"), (107, "sm_100"), (120, None), (121, None)):
        assert runs_on(scan(BMM_SM100F), cc) == runs, cc
    assert [runs_on(scan(BMM_SM103A), cc) for cc in (100, 103, 120)] == [None, "sm_103a", None]


def _fake_cubin(tmp_path: Path, abi: int, flags: int) -> Path:
    """A FAKE 64-byte ELF header of a cubin (EM_CUDA), nothing after it."""
    header = bytearray(64)
    header[:4], header[4], header[5], header[8] = b"\x7fELF", 2, 1, abi
    struct.pack_into("<H", header, 18, 190)
    struct.pack_into("<I", header, 48, flags)
    path = tmp_path / f"fake-{abi}-{flags:x}.cubin"
    path.write_bytes(bytes(header))
    return path


def test_both_cubin_header_layouts_are_read(tmp_path: Path) -> None:
    assert cubin_arch(_fake_cubin(tmp_path, 7, 0x00500050)) == "sm_80"  # before ABI 8: low byte
    assert cubin_arch(_fake_cubin(tmp_path, 8, 0x0600780A)) == "sm_120a"
    assert cubin_arch(_fake_cubin(tmp_path, 8, 0x06007802)) == "sm_120"


def test_a_glob_key_unites_every_cubin_it_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FAKE installed distribution (dist-info, RECORD) holding the two real cubins: the glob
    key reads both; a key that matches nothing says so (not read)."""
    bmm = tmp_path / "flashinfer_cubin" / "cubins" / "c21d" / "batched_gemm-91e0ba0-da44fdf"
    bmm.mkdir(parents=True)
    for cubin in (BMM_SM100F, BMM_SM103A):
        shutil.copy(cubin, bmm / cubin.name)
    info = tmp_path / "flashinfer_cubin-0.6.12.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: flashinfer-cubin\nVersion: 0.6.12\n"
    )
    rows = [f"{p.relative_to(tmp_path).as_posix()},," for p in sorted(bmm.iterdir())]
    (info / "RECORD").write_text("\n".join([*rows, f"{info.name}/METADATA,,"]) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = probe_compiled_archs([TRTLLM_MOE_CUBINS, "flashinfer-cubin/cubins/*/gemm-*/*.cubin"])
    both = found[TRTLLM_MOE_CUBINS]
    assert (both.sass, both.ptx, both.error, both.path) == (
        ["sm_100", "sm_103a"],
        [],
        None,
        str(bmm),
    )
    none = found["flashinfer-cubin/cubins/*/gemm-*/*.cubin"]
    assert none.path is None
    assert (
        none.error == "flashinfer-cubin 0.6.12 installed no file matching cubins/*/gemm-*/*.cubin"
    )


# --- vLLM's real extensions: each kernel is where the profile reads it ---------------------------


def _vllm_venvs() -> list[Path]:
    if not VENVS:
        return []
    return sorted(Path(VENVS).glob("vllm-*/lib/python3*/site-packages/vllm"))


def _holds(path: Path, name: bytes) -> bool:
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(name) >= 0


def _module(package: Path, stem: str) -> Path:
    found = sorted(package.glob(f"{stem}*.abi3.so"), key=lambda p: len(p.name))
    assert found, (package, stem)
    return found[0]


@pytest.mark.real_packages
@pytest.mark.parametrize("package", _vllm_venvs(), ids=lambda p: p.parents[3].name)
def test_vllm_kernels_live_in_the_modules_the_profile_reads(package: Path) -> None:
    """The CUTLASS NVFP4 GEMM and CUTLASS MoE grouped GEMM are ops of `_C*` (vllm/_custom_ops.py:
    torch.ops._C.cutlass_scaled_fp4_mm, torch.ops._C.cutlass_fp4_group_mm), the Marlin MoE GEMM
    an op of `_moe_C*` (torch.ops._moe_C.moe_wna16_marlin_gemm): each name is in that module's
    file and not in the other's."""
    ops, moe = _module(package, "_C"), _module(package, "_moe_C")
    for name in (b"cutlass_scaled_fp4_mm", b"cutlass_fp4_group_mm"):
        assert _holds(ops, name) and not _holds(moe, name), (ops.name, name)
    assert _holds(moe, b"moe_wna16_marlin_gemm") and not _holds(ops, b"moe_wna16_marlin_gemm")
    for module in (ops, moe):
        archs = scan(module)
        assert archs.error is None and archs.sass, module


@pytest.mark.real_packages
@pytest.mark.parametrize("package", _vllm_venvs(), ids=lambda p: p.parents[3].name)
def test_every_vllm_module_the_rules_read_is_in_that_release(package: Path) -> None:
    release = package.parents[3].name.removeprefix("vllm-")
    host = facts.load(HOSTS / "b200.json")
    ev = evaluate(VLLM.view("moe"), host, override_version=release, family="moe")
    read = {
        req.kind.module
        for req in (*VLLM.requirements(), *VLLM.engine.requires)
        if isinstance(req.kind, CompiledArch) and req.applies(ev.context)
    }
    assert any("_moe_C" in m for m in read), read
    for module in read:
        assert (package.parent / module).is_file(), (release, module)


def _probed(release: str) -> facts.HostFacts | None:
    """`fp4doctor probe` run by the interpreter of the real vLLM venv (its own packages)."""
    python = Path(VENVS or "/nonexistent") / f"vllm-{release}" / "bin" / "python"
    if not python.exists():
        return None
    out = subprocess.run(
        [str(python), "-m", "fp4doctor", "probe", "--json"],
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return facts.from_dict(json.loads(out))


@pytest.mark.real_packages
def test_real_flashinfer_cubins_refuse_the_trtllm_moe_on_sm120() -> None:
    """vLLM 0.24.0's venv has flashinfer-cubin 0.6.12: its probe reads the trtllm-gen batched-GEMM
    cubins (sm_100 family and sm_103a), so flashinfer-trtllm-moe fails on an RTX 5090 naming
    their directory, and the same facts on a B200 pass."""
    host = _probed("0.24.0")
    if host is None or "flashinfer-cubin" not in host.packages.versions:
        pytest.skip("no vllm-0.24.0 venv with flashinfer-cubin under FP4DOCTOR_ENGINE_VENVS")
    cubins = host.compiled_archs[TRTLLM_MOE_CUBINS]
    assert cubins.error is None and cubins.sass == ["sm_100", "sm_103a"], cubins
    for fixture, status in (("rtx5090", Status.FAIL), ("b200", Status.PASS)):
        gpus = facts.load(HOSTS / f"{fixture}.json").gpus
        ev = evaluate(VLLM, dataclasses.replace(host, gpus=gpus), family="moe")
        found = [
            f
            for f in ev.verdicts["flashinfer-trtllm-moe"].findings
            if ".trtllm_moe_cubins." in f.id
        ]
        assert found and {f.status for f in found} == {status}, (fixture, found)
        assert all(TRTLLM_MOE_CUBINS in f.reason for f in found)


# --- every vLLM release: the rules read the module that holds the kernel -----------------------

VLLM_DATA = json.loads((HERE.parent / "tools/extract/data/vllm.json").read_text(encoding="utf-8"))
VLLM_FIRST = "0.9.0"  # profiles/vllm.yaml's first era


def _namespace(module: str) -> str:
    """The torch.ops namespace a vLLM extension registers: `vllm/_moe_C_stable_libtorch.abi3.so`
    -> `_moe_C` (the stable-ABI build registers the same namespace)."""
    return module.split("/")[-1].split(".")[0].removesuffix("_stable_libtorch")


def _modules_read(backend: str, release: str, family: str) -> set[str]:
    """The files the backend's compiled_arch rules read at `release` (named conditions
    followed, `when` applied)."""
    host = facts.load(HOSTS / "b200.json")
    ctx = evaluate(VLLM, host, override_version=release, family=family).context
    found: set[str] = set()

    def walk(reqs: tuple[Requirement, ...]) -> None:
        for req in reqs:
            if not req.applies(ctx):
                continue
            if isinstance(req.kind, CompiledArch):
                found.add(req.kind.module)
            walk(req.children)

    walk(VLLM.view(family).backends[backend].requires)
    return found


@pytest.mark.parametrize(
    "release",
    [v for v in VLLM_DATA["covers"] if Version(v) >= Version(VLLM_FIRST)],
)
def test_vllm_rules_read_the_module_each_fp4_op_is_called_through(release: str) -> None:
    """tools/extract/data/vllm.json `extensions`: the wheel's extension modules and the torch.ops
    namespace vllm/_custom_ops.py calls each FP4 op through. The CUTLASS GEMM and MoE grouped
    GEMM (`_C`) are read in `_C*`, the Marlin MoE GEMM (`_moe_C`) in `_moe_C*`, and every file a
    rule reads is in that release's wheel; in 0.19-0.23, which ship two `_C` modules, the one
    whose binary holds the ops (0.20.0-0.23.0: the stable-ABI one; the rule read `_C.abi3.so`
    there before, a module without them)."""
    built = VLLM_DATA["extensions"][release]
    assert built["ops"]["cutlass_scaled_fp4_mm"] == ["_C"]
    assert built["ops"]["cutlass_fp4_group_mm"] == ["_C"]
    assert built["ops"]["moe_wna16_marlin_gemm"] == ["_moe_C"]
    checks = (
        ("cutlass", "linear", "_C"),
        ("cutlass-moe", "moe", "_C"),
        ("marlin-moe", "moe", "_moe_C"),
    )
    for backend, family, namespace in checks:
        read = _modules_read(backend, release, family)
        own = {m for m in read if m.startswith("vllm/")}
        assert own, (release, backend)
        assert {_namespace(m) for m in own} == {namespace}, (release, backend, own)
        assert own <= set(built["modules"]), (release, backend, own)
    # Where two modules register `_C` (0.19-0.23), the one whose binary holds the CUTLASS ops.
    c_modules = [m for m in built["modules"] if _namespace(m) == "_C"]
    if "held_by_stable_libtorch" in built:
        stable = "cutlass_scaled_fp4_mm" in built["held_by_stable_libtorch"]
        c_modules = [m for m in c_modules if m.endswith("_stable_libtorch.abi3.so") == stable]
    for backend, family in (("cutlass", "linear"), ("cutlass-moe", "moe")):
        read = {m for m in _modules_read(backend, release, family) if m.startswith("vllm/")}
        assert read == set(c_modules), (release, backend, read, c_modules)


# --- FAKE scans: a module without the GPU's image fails, an unread one is a skip -----------------


def _rtx5090(release: str, scans: dict[str, CompiledArchs]) -> facts.HostFacts:
    host = facts.load(HOSTS / "rtx5090.json")
    versions = {**host.packages.versions, "vllm": release}
    return dataclasses.replace(
        host,
        compiled_archs=scans,
        packages=dataclasses.replace(host.packages, versions=versions),
    )


def _marlin_moe(host: facts.HostFacts, release: str) -> list[tuple[str, Status, str]]:
    ev = evaluate(VLLM, host, override_version=release, family="moe")
    return [
        (f.id, f.status, f.reason)
        for f in ev.verdicts["marlin-moe"].findings
        if "moe_kernels_built" in f.id
    ]


def test_a_moe_extension_without_the_gpus_image_fails_naming_the_file() -> None:
    module = "vllm/_moe_C_stable_libtorch.abi3.so"
    fake = CompiledArchs(["sm_80", "sm_90", "sm_100"], [], None, "/FAKE/vllm/" + module)
    found = _marlin_moe(_rtx5090("0.34.0", {module: fake}), "0.34.0")
    assert [(s, module in r) for _, s, r in found] == [(Status.FAIL, True)], found
    built = dataclasses.replace(fake, sass=[*fake.sass, "sm_120"])
    assert [s for _, s, _ in _marlin_moe(_rtx5090("0.34.0", {module: built}), "0.34.0")] == [
        Status.PASS
    ]


def test_a_moe_extension_not_read_is_said_not_passed() -> None:
    found = _marlin_moe(_rtx5090("0.22.0", {}), "0.22.0")
    assert [s for _, s, _ in found] == [Status.SKIP], found
    assert "vllm/_moe_C.abi3.so not read: the facts carry no scan" in found[0][2]


# --- engine_arg ----------------------------------------------------------------------------------


def _ctx(args: dict[str, str] | None) -> Context:
    host = facts.load(HOSTS / "rtx5090.json")
    ctx = Context(facts=host, versions=host.packages.versions, env={})
    if args is not None:
        object.__setattr__(ctx, "args", args)  # the command line, as Context.args carries it
    return ctx


def test_engine_arg_holds_only_for_the_value_set_on_the_command_line() -> None:
    kind = EngineArg("--quantization", "modelopt_fp4")
    assert get("engine_arg") is EngineArg
    assert kind.check(_ctx({"--quantization": "modelopt_fp4"}), None).ok
    wrong = kind.check(_ctx({"--quantization": "fp8"}), None)
    assert (wrong.ok, wrong.measured) == (False, "--quantization fp8")
    for args in (None, {}):
        unset = kind.check(_ctx(args), None)
        assert (unset.ok, unset.measured) == (False, "--quantization is not given")
    assert kind.default_id() == "quantization"


ARG_PROFILE = """\
schema: 1
target: argdemo
title: Arg demo
engine:
  package: vllm
  newest_known: "0.22.0"
backends:
  a:
    summary: a
    native: true
    requires:
      - engine_arg: {flag}
        equals: modelopt_fp4
        source: test
eras:
  - versions: ">=0.1"
    source: test
    knobs: []
    auto:
      - backend: a
"""


def test_engine_arg_parses_a_flag_and_refuses_anything_else() -> None:
    parsed = parse(ARG_PROFILE.format(flag="--quantization"), "argdemo.yaml", profile.load_module)
    assert EngineArg("--quantization", "modelopt_fp4") in [r.kind for r in parsed.requirements()]
    with pytest.raises(ProfileError, match="is not a command-line flag"):
        parse(ARG_PROFILE.format(flag="quantization"), "argdemo.yaml", profile.load_module)
