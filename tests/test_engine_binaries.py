"""Which binary holds each backend's kernel, read for the GPU's architecture (issue 40, item 1).

- A real sgl-kernel module kept as a fixture (85 KB; tests/fixtures/binaries/README.md).
- vLLM's real extensions where the engine venvs are built (FP4DOCTOR_ENGINE_VENVS): the op each
  profile rule names is in the file the rule reads, and each file the rules read at a release is
  in that release's install.
- FAKE scans (facts, not files) for a module built without the GPU's architecture and for one
  not read at all: the backend fails naming the file, or the finding says "not read" (a skip).
- The `engine_arg` kind SGLang's post-processing rules use.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
from pathlib import Path

import pytest

from fp4doctor import facts, profile
from fp4doctor.facts import CompiledArchs
from fp4doctor.findings import Status
from fp4doctor.probe.archs import scan
from fp4doctor.profile.kinds import get
from fp4doctor.profile.kinds.base import Context
from fp4doctor.profile.kinds.compiled_arch import CompiledArch, runs_on
from fp4doctor.profile.kinds.engine_arg import EngineArg
from fp4doctor.profile.schema import parse
from fp4doctor.profile.yamlnode import ProfileError
from fp4doctor.rules import evaluate

HERE = Path(__file__).parent
HOSTS = HERE / "fixtures" / "hosts"
SPATIAL_OPS = HERE / "fixtures" / "binaries" / "sglang_kernel-0.4.5-spatial_ops.abi3.so"
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
