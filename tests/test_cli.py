"""The command line: exit codes, stdout carrying only what was asked, the `done when` cases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fp4doctor.cli import main

HOSTS = Path(__file__).parent / "fixtures" / "hosts"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command: separate stdout and stderr, its exit code. A command that judges a facts
    file touches nothing of this host, so it runs in-process (click's runner, ten times faster
    than an interpreter per call); any other runs as a real subprocess."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "SGLANG_"))}
    full_env.update(env or {})
    if "--facts" in args:
        cleared: dict[str, str | None] = {k: None for k in os.environ if k not in full_env}
        done = CliRunner().invoke(main, list(args), env={**full_env, **cleared})
        if done.exception is not None and not isinstance(done.exception, SystemExit):
            raise done.exception
        return subprocess.CompletedProcess(
            ["fp4doctor", *args], done.exit_code, done.stdout, done.stderr
        )
    return subprocess.run(
        [sys.executable, "-m", "fp4doctor", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


def fixture(name: str) -> str:
    return str(HOSTS / f"{name}.json")


def bash_eval(exports: str, *names: str) -> dict[str, str | None]:
    script = 'eval "$FP4_EXPORTS"; ' + "; ".join(
        f'if [ -n "${{{n}+x}}" ]; then printf "%s=%s\\0" {n} "${n}"; fi' for n in names
    )
    out = subprocess.run(
        ["bash", "-c", script],
        env={"FP4_EXPORTS": exports, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = dict(item.split("=", 1) for item in out.split("\0") if item)
    return {n: found.get(n) for n in names}


# --- exit codes --------------------------------------------------------------------------------


def test_help_lists_the_exit_codes() -> None:
    result = CliRunner().invoke(main, ["check", "--help"])
    assert result.exit_code == 0
    for line in ("0  ready", "1  not ready", "2  usage or profile error", "3  no verdict"):
        assert line in result.output


def test_exit_0_ready_on_b200() -> None:
    # The dense linear family: this fixture's MoE family is NOT READY as set (vLLM picks
    # FlashInfer 0.6.1's TRT-LLM MoE, which has known crashes: tests/test_moe.py).
    p = run("check", "--facts", fixture("b200"), "--json", "--family", "linear")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["ready"] is True and doc["exit_code"] == 0
    assert doc["families"]["linear"]["backends"]["flashinfer-cudnn"]["valid"] is True


def test_exit_1_not_ready_on_the_cpu_fixture() -> None:
    p = run("check", "--facts", fixture("cpu"), "--json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["ready"] is False
    gpu = next(f for f in doc["findings"] if f["id"] == "host.gpus")
    assert gpu["status"] == "fail" and "no NVIDIA GPU" in gpu["reason"]


def test_exit_2_for_usage_errors_without_traceback() -> None:
    for args, message in [
        (["check", "--facts", fixture("b200"), "--prefer", "cudnnn"], "unknown backend 'cudnnn'"),
        (["env", "--facts", fixture("b200"), "--shell", "tcsh"], "unknown --shell 'tcsh'"),
        (["check", "--facts", fixture("b200"), "--target", "tgi"], "no profile for target 'tgi'"),
        (["check", "--facts", fixture("b200"), "--engine-version", "latest"], "is not a version"),
    ]:
        p = run(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert message in p.stderr and "Traceback" not in p.stderr
        assert p.stdout == ""
    # The valid names are listed.
    p = run("check", "--facts", fixture("b200"), "--prefer", "cudnnn")
    assert "valid: flashinfer-cutedsl, cutedsl, flashinfer-cudnn, cudnn" in p.stderr


def test_exit_3_no_verdict_on_nvml_mismatch_and_bad_facts(tmp_path: Path) -> None:
    p = run("check", "--facts", fixture("nvml-mismatch"))
    assert p.returncode == 3, p.stdout + p.stderr
    assert "cannot tell which GPUs" in p.stdout
    future = tmp_path / "future.json"
    future.write_text(json.dumps({"schema_version": 99}))
    p = run("check", "--facts", str(future))
    assert p.returncode == 3 and "newer than this fp4doctor" in p.stderr


# --- the issue's `done when` cases -----------------------------------------------------------


def test_cpu_host_check_says_no_gpu_for_every_backend() -> None:
    # The captured CPU host, so that the test means the same on a GPU developer box.
    p = run("check", "--no-smoke", "--facts", fixture("cpu"))
    assert p.returncode == 1
    assert "no NVIDIA GPU is visible" in p.stdout
    assert "NOT READY" in p.stdout
    # Without -v the backends no GPU can run are one line; -v says it per backend.
    verbose = run("check", "--no-smoke", "-v", "--facts", fixture("cpu"))
    assert verbose.stdout.count("no NVIDIA GPU is visible; needs compute capability") >= 8


def test_b200_vllm_0_15_prefer_cudnn_emits_the_env_var() -> None:
    p = run("env", "--facts", fixture("b200"), "--prefer", "cudnn")
    assert p.returncode == 0, p.stderr
    values = bash_eval(p.stdout, "VLLM_NVFP4_GEMM_BACKEND", "VLLM_USE_CUDNN_FP4_GEMM")
    assert values == {
        "VLLM_NVFP4_GEMM_BACKEND": "flashinfer-cudnn",
        "VLLM_USE_CUDNN_FP4_GEMM": None,
    }
    assert "using flashinfer-cudnn" in p.stderr


def test_b200_vllm_0_24_prefer_cudnn_emits_the_args_variable() -> None:
    p = run(
        "env", "--facts", fixture("b200"), "--prefer", "cudnn", "--engine-version", "0.24.0",
        "--autotune", "off",  # FlashInfer 0.6.1's MoE autotuner bugs ruled out
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    values = bash_eval(p.stdout, "FP4DOCTOR_VLLM_ARGS", "VLLM_NVFP4_GEMM_BACKEND")
    assert values == {
        # cudnn names a linear backend only; the MoE family gets its own choice
        "FP4DOCTOR_VLLM_ARGS": "--linear-backend=flashinfer_cudnn --moe-backend=flashinfer_cutedsl",
        "VLLM_NVFP4_GEMM_BACKEND": None,
    }
    assert "command-line flag" in p.stderr


def test_fallback_reason_goes_to_stderr_and_stdout_stays_eval_safe() -> None:
    p = run("env", "--facts", fixture("h100"), "--prefer", "trtllm", "--engine-version", "0.16.0")
    assert p.returncode == 0, p.stderr
    assert "flashinfer-trtllm is not usable here" in p.stderr
    assert "compute capability 9.0" in p.stderr
    assert bash_eval(p.stdout, "VLLM_NVFP4_GEMM_BACKEND") == {"VLLM_NVFP4_GEMM_BACKEND": "marlin"}
    assert "not usable" not in p.stdout


def test_require_turns_the_fallback_into_failure_and_prints_nothing() -> None:
    p = run("env", "--facts", fixture("h100"), "--require", "trtllm")
    assert p.returncode == 1
    assert p.stdout == ""
    assert "--require trtllm: flashinfer-trtllm is not usable here" in p.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "sh", "pwsh", "dotenv", "gha", "json"])
def test_every_shell_format_is_accepted(shell: str) -> None:
    p = run("env", "--facts", fixture("b200"), "--prefer", "cudnn", "--shell", shell)
    assert p.returncode == 0, p.stderr
    assert "flashinfer-cudnn" in p.stdout


# --- config --------------------------------------------------------------------------------------


def test_config_writes_vllm_yaml_atomically_and_refuses_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "vllm-fp4.yaml"
    p = run(
        "config",
        "--facts",
        fixture("b200"),
        "--engine-version",
        "0.30.0",
        "--prefer",
        "cudnn",
        "--autotune",
        "off",
        "-o",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    import yaml

    # both families' flags (the MoE family: FlashInfer 0.6.1's TRT-LLM MoE has known crashes;
    # autotuning off rules out the CuTe-DSL MoE's)
    assert yaml.safe_load(out.read_text()) == {
        "linear-backend": "flashinfer_cudnn",
        "moe-backend": "flashinfer_cutedsl",
    }
    assert p.stdout == ""
    before = out.read_text()
    p = run("config", "--facts", fixture("b200"), "--engine-version", "0.30.0", "-o", str(out))
    assert p.returncode == 2 and "pass --force" in p.stderr
    assert out.read_text() == before
    p = run(
        "config",
        "--facts",
        fixture("b200"),
        "--engine-version",
        "0.30.0",
        "--prefer",
        "marlin",
        "-o",
        str(out),
        "--force",
    )
    assert p.returncode == 0
    # marlin names a backend of both families
    assert yaml.safe_load(out.read_text()) == {"linear-backend": "marlin", "moe-backend": "marlin"}
    assert sorted(x.name for x in tmp_path.iterdir()) == ["vllm-fp4.yaml"]  # no temp file left


def test_config_for_an_env_only_vllm_is_a_dotenv_file(tmp_path: Path) -> None:
    out = tmp_path / "fp4.env"
    p = run("config", "--facts", fixture("b200"), "--prefer", "cudnn", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "VLLM_NVFP4_GEMM_BACKEND" in out.read_text()
    assert "dotenv" in p.stderr


def test_config_into_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    p = run("config", "--facts", fixture("b200"), "-o", str(tmp_path / "nope" / "x.env"))
    assert p.returncode == 2 and "cannot write" in p.stderr and "Traceback" not in p.stderr


def test_require_a_valid_backend_chooses_it() -> None:
    p = run("env", "--facts", fixture("b200"), "--require", "cudnn")
    assert p.returncode == 0, p.stderr
    assert bash_eval(p.stdout, "VLLM_NVFP4_GEMM_BACKEND") == {
        "VLLM_NVFP4_GEMM_BACKEND": "flashinfer-cudnn"
    }


def test_env_and_config_exit_3_without_a_verdict_and_say_when_the_engine_is_assumed() -> None:
    p = run("env", "--facts", fixture("nvml-mismatch"))
    assert p.returncode == 3 and p.stdout == ""
    assert "cannot tell which GPUs" in p.stderr
    p = run("env", "--facts", fixture("h100"), "--target", "sglang")
    assert "sglang is not installed: judging for SGLang" in p.stderr


def test_aliases_are_case_insensitive_and_take_engine_spellings() -> None:
    p = run("env", "--facts", fixture("b200"), "--prefer", "CUDNN")
    assert p.returncode == 0 and "flashinfer-cudnn" in p.stdout
    p = run("env", "--facts", fixture("b300"), "--target", "flashinfer", "--prefer", "cute-dsl")
    assert p.returncode == 0, p.stderr


def test_the_prefer_error_names_each_backend_once() -> None:
    p = run("check", "--facts", fixture("b200"), "--prefer", "nosuch")
    assert p.returncode == 2
    names = p.stderr.split("(valid: ", 1)[1].rstrip(")\n").split(", ")
    assert len(names) == len(set(names)) and {"cutlass", "marlin", "flashinfer-trtllm-moe"} <= set(
        names
    )


def test_no_reason_says_the_same_thing_twice() -> None:
    """Two alternatives that both need a GPU both measure "no NVIDIA GPU is visible"."""
    for target in ("vllm", "sglang", "trtllm", "flashinfer"):
        p = run("check", "--target", target, "--facts", fixture("cpu"), "--json")
        for finding in json.loads(p.stdout)["findings"]:
            parts = finding["reason"].split("; ")
            assert len(parts) == len(set(parts)), finding["reason"]


@pytest.mark.parametrize("name", ["vllm-fp4.txt", "vllm-fp4.conf", "vllm-fp4.json", "vllm-fp4"])
def test_config_refuses_a_name_vllm_would_not_load(tmp_path: Path, name: str) -> None:
    # vLLM's --config loader refuses any suffix but .yaml/.yml; once written with exit 0.
    out = tmp_path / name
    p = run("config", "--facts", fixture("b200"), "--engine-version", "0.30.0", "--prefer",
            "cudnn", "-o", str(out))  # fmt: skip
    assert p.returncode == 2
    (refusal,) = [line for line in p.stderr.splitlines() if "error:" in line]
    assert "named .yaml or .yml" in refusal and "-o vllm-fp4.yaml" in refusal
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "meant"),
    [(["chekc"], "'check'"), (["profiles", "lst"], "'list'"), (["envv"], "'env'")],
)
def test_an_unknown_command_is_one_line_with_the_closest_name(args: list[str], meant: str) -> None:
    # Once click's three-line block with no suggestion.
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert f"no command {args[-1]!r}: did you mean {meant}?" in line


def test_an_unknown_backend_names_the_one_meant() -> None:
    # `--prefer cudnnn` once listed 26 names but not the one meant.
    p = run("check", "--facts", fixture("b200"), "--no-engine", "--prefer", "cudnnn")
    assert p.returncode == 2 and p.stdout == ""
    (line,) = p.stderr.strip().splitlines()
    assert "unknown backend 'cudnnn' for --prefer with target vllm: did you mean 'cudnn'?" in line
