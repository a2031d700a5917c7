"""`fp4doctor diff`: an engine upgrade compared for one host, over real release pairs.

What each pair must show is read from the extracted release data (tools/extract/data/) or the
released wheel it names, not from fp4doctor's own output.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import schema_errors

from fp4doctor.cli import main
from fp4doctor.diff import Upgrade, upgrade
from fp4doctor.doctor import Question

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
DATA = Path(__file__).resolve().parents[1] / "tools" / "extract" / "data"


@cache
def changes(
    target: str, old: str, new: str, host: str = "b200", autotune: bool | None = None
) -> Upgrade:
    question = Question(target=target, facts_file=str(HOSTS / f"{host}.json"), autotune=autotune)
    return upgrade(question, old, new)


@cache
def data(name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    return out


def family(u: Upgrade, name: str) -> Any:
    return next(f for f in u.families if f.family == name)


PAIRS = [
    ("vllm", "0.15.0", "0.24.0"),
    ("vllm", "0.23.0", "0.24.0"),
    ("vllm", "0.33.0", "0.34.0"),
    ("sglang", "0.5.13", "0.5.23"),
]


@pytest.mark.parametrize(("target", "old", "new"), PAIRS)
@pytest.mark.parametrize("host", ["b200", "thor", "h200"])
def test_every_pair_gives_a_document_of_the_schema(
    target: str, old: str, new: str, host: str
) -> None:
    document = changes(target, old, new, host).to_dict()
    assert schema_errors(document) == []
    assert document["exit_code"] == (1 if document["changes_here"] else 0)


def test_vllm_0_33_to_0_34_moves_thor_moe_off_vllm_cutlass() -> None:
    # 0.34.0 experts/cutlass_moe.py: '# SM110 excluded: grouped NVFP4 kernel is sm100-only'.
    u = changes("vllm", "0.33.0", "0.34.0", "thor")
    moe = family(u, "moe")
    assert moe.engine_pick == ("cutlass-moe", "marlin-moe")
    assert "cutlass-moe" in moe.valid_here.gone
    assert moe.changes_here and u.exit_code == 1
    # envs.py removed_environment_variables (0.34.0): setting it stops vLLM.
    assert family(u, "linear").knobs.now_errors == ("VLLM_MARLIN_INPUT_DTYPE",)
    assert "unset -v VLLM_MARLIN_INPUT_DTYPE" in u.env_lines.added


def test_vllm_0_33_to_0_34_on_a_b200_changes_no_family_but_the_install() -> None:
    u = changes("vllm", "0.33.0", "0.34.0", "b200")
    assert not any(f.changes_here for f in u.families)
    # The 0.34.0 wheel pins flashinfer-python==0.7.3, absent from the index (FlashInfer data).
    assert data("vllm.json")["requires_flashinfer"]["0.34.0"] == ["flashinfer-python==0.7.3"]
    assert "0.7.3" not in data("flashinfer.json")["covers"]
    assert [f.id for f in u.findings_introduced] == ["engine.install.vllm"]
    assert u.exit_code == 1


def test_vllm_0_23_to_0_24_drops_the_variables() -> None:
    # 0.24.0 envs.py no longer declares VLLM_NVFP4_GEMM_BACKEND nor the MoE variables.
    declared = set(data("vllm.json")["releases"]["0.24.0"]["envs"]["declared"])
    u = changes("vllm", "0.23.0", "0.24.0")
    linear, moe = family(u, "linear"), family(u, "moe")
    assert "VLLM_NVFP4_GEMM_BACKEND" in linear.knobs.removed
    assert "VLLM_NVFP4_GEMM_BACKEND" not in declared
    assert set(moe.knobs.removed) == {"VLLM_FLASHINFER_MOE_BACKEND", "VLLM_USE_FLASHINFER_MOE_FP4"}
    assert not {"VLLM_FLASHINFER_MOE_BACKEND", "VLLM_USE_FLASHINFER_MOE_FP4"} & declared
    # 0.24.0 puts FlashInfer CuTe-DSL first in _POSSIBLE_NVFP4_KERNELS[CUDA].
    order = data("vllm.json")["releases"]["0.24.0"]["linear"]["auto_order"]["kernels"]
    assert order[0] == "FlashInferCuteDslNvFp4LinearKernel"
    assert linear.engine_pick == ("flashinfer-cutlass", "flashinfer-cutedsl")
    assert u.exit_code == 1


def test_vllm_0_15_to_0_24_says_the_variable_became_the_flag() -> None:
    u = changes("vllm", "0.15.0", "0.24.0", autotune=False)
    assert ("VLLM_NVFP4_GEMM_BACKEND", "--linear-backend") in family(u, "linear").knobs.renamed
    renamed = dict(family(u, "moe").knobs.renamed)
    assert renamed["VLLM_USE_FLASHINFER_MOE_FP4"] == "--moe-backend"
    assert "VLLM_USE_FLASHINFER_MOE_FP4" not in family(u, "moe").knobs.removed
    # The MoE experts run the engine's own valid pick in both (no knob written); the choice
    # that takes a knob moved from the variables to FP4DOCTOR_VLLM_ARGS.
    assert any(line.startswith("export FP4DOCTOR_VLLM_ARGS=") for line in u.env_lines.added)


def test_sglang_0_5_13_to_0_5_23_loses_its_own_cutlass_gemm() -> None:
    # --fp4-gemm-backend choices: 'cutlass' is in 0.5.13's and not in 0.5.23's.
    releases = data("sglang.json")["releases"]

    def choices(v: str) -> list[str]:
        values: list[str] = releases[v]["fp4_gemm_backend_flag"]["choices"]["values"]
        return values

    assert "cutlass" in choices("0.5.13") and "cutlass" not in choices("0.5.23")
    linear = family(changes("sglang", "0.5.13", "0.5.23"), "linear")
    assert "sgl-cutlass" in linear.backends.gone
    assert dict(linear.knobs.values)["--fp4-gemm-backend"].gone == ("sgl-cutlass",)


def test_the_same_release_changes_nothing() -> None:
    u = changes("vllm", "0.34.0", "0.34.0")
    assert not u.changes_here and u.exit_code == 0


def test_a_release_too_old_to_judge_exits_3() -> None:
    assert changes("vllm", "0.1.0", "0.34.0").exit_code == 3


def test_the_command_prints_only_the_comparison_and_exits_with_it() -> None:
    facts_file = str(HOSTS / "thor.json")
    args = ["diff", "--target", "vllm", "--from", "0.33.0", "--to", "0.34.0", "--facts", facts_file]
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 1 and "cutlass-moe -> marlin-moe" in text.stdout
    document = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    assert schema_errors(document) == [] and document["changes_here"] is True
    refused = CliRunner().invoke(main, [*args, "--engine-version", "0.30.0"])
    assert refused.exit_code == 2 and "--engine-version" in refused.stderr


def run_diff(*args: str) -> Any:
    facts = str(HOSTS / "b200-vllm-0.33.json")
    return CliRunner().invoke(main, ["diff", "--facts", facts, "--no-engine", *args])


@pytest.mark.parametrize("to", ["v0.34.0", "0.34.0+cu128", "0.34"])
def test_versions_are_compared_as_versions(to: str) -> None:
    # Once `--to v0.34.0` exited 0 where `--to 0.34.0` exited 1: the pin warning compared text.
    plain = run_diff("--from", "0.33.0", "--to", "0.34.0")
    spelt = run_diff("--from", "0.33.0", "--to", to)
    assert plain.exit_code == 1
    assert spelt.exit_code == plain.exit_code
    assert "pins flashinfer-python" in spelt.stdout


@pytest.mark.parametrize("where", ["--engine-version", "--from", "--to"])
def test_a_version_too_long_to_be_one_is_a_usage_error(where: str) -> None:
    huge = "1" * 5000  # past Python's 4,300-digit limit: once a traceback, exit 1
    if where == "--engine-version":
        facts = str(HOSTS / "b200-vllm-0.33.json")
        result = CliRunner().invoke(main, ["check", "--facts", facts, "--no-engine", where, huge])
    else:
        other = "--to" if where == "--from" else "--from"
        result = run_diff(where, huge, other, "0.33.0")
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert f"{where} '11111111111111111111'... (5000 characters) is not a version" in line


def test_no_backend_is_written_none_not_python_s_none() -> None:
    import dataclasses

    u = changes("vllm", "0.33.0", "0.34.0")
    fam = dataclasses.replace(u.families[0], engine_pick=(None, "marlin"), choice=(None, None))
    text = dataclasses.replace(u, families=(fam,)).text()
    assert "engine's own pick: none -> marlin" in text and "choice: none (unchanged)" in text
    assert "None" not in text
