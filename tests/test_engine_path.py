"""The engine's whole decision path in the rules (issue 40, classes 3, 5 and 6), from fixture
hosts, each asked of the real releases by tools/engine_agreement.py (tests/test_engine.py):

- the variables that steer the choice beside the knobs (an era's `modifiers`):
  VLLM_DISABLED_KERNELS passes kernels over in vLLM's registry walk (not a forced one), and
  SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16=1 runs SGLang's flashinfer_cutedsl FP4 GEMM weight-only;
  `env --prefer X` writes them only where X's knob needs them and unsets them otherwise;
- vLLM's silent flag substitutions (`pick.as_set`): `--linear-backend=triton` is the automatic
  pick from 0.28 (an error before), `flashinfer_cutedsl` on SM12x W4A4 layers is the CuTe-DSL
  W4A16 kernel;
- vLLM before 0.32 looks for nvcc on PATH only (`nvcc_on_path`), not under CUDA_HOME.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fp4doctor import facts, profile
from fp4doctor.cli import main
from fp4doctor.profile.yamlnode import ProfileError
from fp4doctor.rules import Evaluation, evaluate
from fp4doctor.selection.choice import resolve
from fp4doctor.selection.engine import as_set, engine_as_set, engine_auto, family_pick

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
VLLM, SGLANG = profile.load("vllm"), profile.load("sglang")
CUTEDSL_W4A4 = "FlashInferCuteDslNvFp4LinearKernel"


def judged(
    name: str, version: str, family: str = "linear", target: str = "vllm", **env: str
) -> Evaluation:
    host = dataclasses.replace(facts.load(HOSTS / f"{name}.json"), env=dict(env))
    prof = VLLM if target == "vllm" else SGLANG
    return evaluate(prof, host, override_version=version, family=family)


# --- VLLM_DISABLED_KERNELS ---------------------------------------------------------------------


def test_a_disabled_kernel_is_passed_over_in_vllms_walk() -> None:
    assert engine_as_set(judged("b200-vllm-0.33", "0.33.0")) == "flashinfer-cutedsl"
    ev = judged("b200-vllm-0.33", "0.33.0", VLLM_DISABLED_KERNELS=CUTEDSL_W4A4)
    assert engine_as_set(ev) == "flashinfer-cutlass"
    skipped = family_pick(ev).passed_over[0]
    assert skipped.backend == "flashinfer-cutedsl"
    assert skipped.reason == f"VLLM_DISABLED_KERNELS lists {CUTEDSL_W4A4}: disabled"
    both = "FlashInferCutlassNvFp4LinearKernel, CutlassNvFp4LinearKernel"
    ev = judged("b200-vllm-0.33", "0.33.0", VLLM_DISABLED_KERNELS=f"{CUTEDSL_W4A4},{both}")
    assert engine_as_set(ev) == "flashinfer-cutedsl-w4a16"


def test_vllm_before_0_20_does_not_read_the_disabled_list() -> None:
    """0.18's select_nvfp4_linear_backend() reads no VLLM_DISABLED_KERNELS (the modifier comes
    with init_nvfp4_linear_kernel in 0.20)."""
    ev = judged("b200", "0.18.0", VLLM_DISABLED_KERNELS="FlashInferCutlassNvFp4LinearKernel")
    assert engine_as_set(ev) == "flashinfer-cutlass"


def test_a_forced_weight_only_kernel_is_not_checked_against_the_list() -> None:
    """Under auto, vLLM 0.30+ forces the CuTe-DSL W4A16 kernel for W4A16 layers on SM100
    (init_nvfp4_linear_kernel returns a forced kernel before the walk reads the list)."""
    from fp4doctor.selection.engine import family_pick

    disabled = "FlashInferCuteDslNvFp4W4A16LinearKernel"
    ev = judged("b200-vllm-0.33", "0.33.0", VLLM_DISABLED_KERNELS=disabled)
    ev = dataclasses.replace(ev, weight_only=True, checkpoint_format="ct-nvfp4a16")
    assert family_pick(ev).backend == "flashinfer-cutedsl-w4a16"


# --- SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16 ------------------------------------------------------


@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_sglangs_w4a16_switch_runs_the_cutedsl_gemm_weight_only(value: str) -> None:
    ev = judged("b200", "0.5.23", target="sglang")
    assert engine_as_set(ev) == "flashinfer-cutedsl"
    ev = judged("b200", "0.5.23", target="sglang", SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16=value)
    assert engine_as_set(ev) == "flashinfer-cutedsl-w4a16"


def test_sglangs_w4a16_switch_changes_nothing_but_cutedsl() -> None:
    """On SM120 SGLang's auto FP4 GEMM is flashinfer_cutlass: the switch is not read."""
    ev = judged("rtx5090", "0.5.23", target="sglang", SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16="1")
    assert engine_as_set(ev) == engine_auto(ev) == "flashinfer-cutlass"
    ev = judged("b200", "0.5.16", target="sglang", SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16="1")
    assert engine_as_set(ev) == "flashinfer-cutedsl"  # 0.5.16 does not read it


# --- env unsets the steering variables it does not need ------------------------------------------


def test_env_unsets_the_disabled_list_an_earlier_env_left() -> None:
    w4a16 = resolve(judged("b200-vllm-0.33", "0.33.0"), prefer="flashinfer-cutedsl-w4a16")
    assert dict(w4a16.set_env) == {"VLLM_DISABLED_KERNELS": CUTEDSL_W4A4}
    assert "VLLM_DISABLED_KERNELS" not in w4a16.unset_env
    after = judged("b200-vllm-0.33", "0.33.0", VLLM_DISABLED_KERNELS=CUTEDSL_W4A4)
    again = resolve(after, prefer="flashinfer-cutedsl")
    assert again.chosen == "flashinfer-cutedsl" and "VLLM_DISABLED_KERNELS" in again.unset_env
    assert any("unsets VLLM_DISABLED_KERNELS" in n for n in again.notes)


def test_env_after_env_for_another_backend_unsets_the_disabled_list() -> None:
    """`env --prefer flashinfer-cutedsl-w4a16`, then `env --prefer flashinfer-cutedsl` with what
    the first wrote still set: the second unsets it (the statements `eval` runs)."""
    fixture = str(HOSTS / "b200-vllm-0.33.json")
    common = ["env", "--facts", fixture, "--target", "vllm", "--family", "linear",
              "--no-engine", "--shell", "json"]  # fmt: skip
    first = CliRunner().invoke(main, [*common, "--prefer", "flashinfer-cutedsl-w4a16"])
    assert first.exit_code == 0, first.output
    written = json.loads(first.stdout)["set"]
    assert written["VLLM_DISABLED_KERNELS"] == CUTEDSL_W4A4
    second = CliRunner().invoke(
        main,
        [*common, "--prefer", "flashinfer-cutedsl"],
        env={"VLLM_DISABLED_KERNELS": CUTEDSL_W4A4},
    )
    assert second.exit_code == 0, second.output
    doc = json.loads(second.stdout)
    assert "VLLM_DISABLED_KERNELS" in doc["unset"] and "VLLM_DISABLED_KERNELS" not in doc["set"]


def test_env_for_another_fp4_gemm_unsets_sglangs_w4a16_switch() -> None:
    variable = "SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16"
    left = judged("b200", "0.5.23", target="sglang", **{variable: "1"})
    again = resolve(left, prefer="flashinfer-cutlass")
    assert again.chosen == "flashinfer-cutlass" and variable in again.unset_env
    assert variable not in dict(again.set_env)


# --- flags the engine substitutes silently ------------------------------------------------------


def test_a_linear_backend_with_no_nvfp4_kernel_is_the_automatic_pick_from_0_28() -> None:
    ev = judged("b200-vllm-0.33", "0.33.0")
    assert as_set(ev, ["--linear-backend=triton"]) == engine_auto(ev) == "flashinfer-cutedsl"
    assert as_set(ev, ["--linear-backend", "TRITON"]) == "flashinfer-cutedsl"
    before = judged("b200", "0.24.0")
    assert as_set(before, ["--linear-backend=triton"]) is None  # vLLM raises at start-up


def test_flashinfer_cutedsl_on_sm12x_runs_the_w4a16_kernel() -> None:
    """`--linear-backend flashinfer_cutedsl` names both CuTe-DSL kernels; on SM12x (GB10) the
    W4A4 one is not supported and vLLM 0.30+ walks on to the W4A16 one; on SM100 the W4A4 one
    runs."""
    args = ["--linear-backend=flashinfer_cutedsl"]
    sm120 = judged("gb10", "0.33.0")
    assert as_set(sm120, args) == "flashinfer-cutedsl-w4a16"
    assert as_set(judged("b200-vllm-0.33", "0.33.0"), args) == "flashinfer-cutedsl"
    w4a16 = "FlashInferCuteDslNvFp4W4A16LinearKernel"
    disabled = judged("gb10", "0.33.0", VLLM_DISABLED_KERNELS=w4a16)
    assert as_set(disabled, args) == "flashinfer-cutedsl"  # the engine takes it, and it fails


def test_a_flag_beats_the_variables_and_sglang_swaps_after_it() -> None:
    ev = judged("b200", "0.5.23", target="sglang", SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16="1")
    assert as_set(ev, ["--fp4-gemm-backend", "flashinfer_cutlass"]) == "flashinfer-cutlass"
    assert as_set(ev, ["--fp4-gemm-backend=flashinfer_cutedsl"]) == "flashinfer-cutedsl-w4a16"
    assert as_set(ev, []) == engine_as_set(ev)


# --- nvcc on PATH (vLLM before 0.32) ------------------------------------------------------------


def _home_only(name: str) -> facts.HostFacts:
    """The fixture with its nvcc under CUDA_HOME only, and no FlashInfer cubins."""
    host = facts.load(HOSTS / f"{name}.json")
    versions = {k: v for k, v in host.packages.versions.items()
                if k not in ("flashinfer-cubin", "flashinfer-jit-cache")}  # fmt: skip
    tc = dataclasses.replace(host.toolchain, cuda_home_source="CUDA_HOME", nvcc_on_path=None)
    return dataclasses.replace(
        host, toolchain=tc, packages=dataclasses.replace(host.packages, versions=versions)
    )


@pytest.mark.parametrize(
    ("version", "expected"), [("0.24.0", "cutlass"), ("0.33.0", "flashinfer-cutedsl")]
)
def test_vllm_before_0_32_finds_no_nvcc_under_cuda_home_alone(version: str, expected: str) -> None:
    ev = evaluate(VLLM, _home_only("b200-vllm-0.33"), override_version=version, family="linear")
    assert engine_as_set(ev) == expected


def test_nvcc_on_path_is_what_the_probe_records() -> None:
    host = _home_only("b200-vllm-0.33")
    on_path = dataclasses.replace(host.toolchain, nvcc_on_path="/opt/cuda/bin/nvcc")
    ev = evaluate(VLLM, dataclasses.replace(host, toolchain=on_path),
                  override_version="0.24.0", family="linear")  # fmt: skip
    assert engine_as_set(ev) == "flashinfer-cutedsl"


def test_the_probe_records_the_nvcc_on_path(tmp_path: Path) -> None:
    from fp4doctor.probe.toolchain import probe_toolchain

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nvcc = bin_dir / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n")
    nvcc.chmod(0o755)
    found = probe_toolchain({"PATH": str(bin_dir)}, default_cuda_home=str(tmp_path / "none"))
    assert found.nvcc_on_path == str(nvcc) and found.cuda_home_source == "PATH"
    home_only = probe_toolchain({"PATH": "", "CUDA_HOME": str(tmp_path)})
    assert home_only.nvcc_on_path is None and home_only.nvcc_path == str(nvcc)


# --- the profile schema of these rules ------------------------------------------------------------


def _era_with(tmp_path: Path, extra: str) -> Path:
    text = (
        "schema: 1\ntarget: mine\ntitle: Mine\nengine: {package: mine, newest_known: '1.0'}\n"
        "backends:\n  a: {summary: A, native: true}\n  b: {summary: B, native: true}\n"
        "eras:\n  - versions: '>=1.0'\n    auto: [{backend: a}, {backend: b}]\n" + extra
    )
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("    modifiers: [{env: X, disables: {c: K}}]\n", "names no backend"),
        ("    modifiers: [{env: X, replaces: {a: b}}]\n", "'replaces' needs 'values'"),
        ("    modifiers: [{env: X}]\n", "needs exactly one of: disables, replaces"),
        ("    modifiers: [{env: 1X, disables: {a: K}}]\n", "not a valid environment variable"),
        (
            "    knobs: [{env: V, values: {a: x}, no_kernel: {values: [t], then: auto}}]\n",
            "only a cli knob has values that name no kernel",
        ),
        (
            "    knobs: [{cli: --v, values: {a: x}, no_kernel: {values: [t], then: maybe}}]\n",
            "maybe",
        ),
        ("    knobs: [{env: V, values: {a: x}, walk: true}]\n", "only a cli knob walks"),
    ],
)
def test_a_malformed_rule_is_a_profile_error(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        profile.load_file(_era_with(tmp_path, extra))


def test_a_well_formed_rule_loads_and_is_inherited(tmp_path: Path) -> None:
    extra = (
        "    modifiers: [{env: X, values: ['1'], replaces: {a: b}}]\n"
        "    knobs: [{cli: --v, values: {a: x, b: x}, walk: true,"
        " no_kernel: {values: [t], then: raises}}]\n"
    )
    prof = profile.load_file(_era_with(tmp_path, extra))
    era = prof.eras[0]
    assert era.modifier_variables() == {"X"} and "X" in era.read_variables()
    assert era.replaced("a", {"X": "1"}) == ("b", "X") and era.replaced("a", {}) == ("a", "")
    (knob,) = era.knobs
    assert knob.walk and knob.no_kernel == ("t",) and knob.no_kernel_then == "raises"
    assert knob.backends_for("x") == ["a", "b"] and knob.names_no_kernel("t")
