"""Which file `fp4doctor config` writes for an engine release, and what `env` answers when a
format cannot carry the choice (issue 29): vLLM's and SGLang's --config YAML hold flags and never
environment variables, SGLang reads one from 0.5.3rc2, a dotenv value holds one flag, and a JSON
reader gets JSON even when the host is not ready.

The YAML is read back the way both engines read it (vllm/utils/argparse_utils.py
load_config_file, sglang/srt/server_args_config_parser.py ConfigArgumentMerger: each top-level
key becomes `--key value`); the engines themselves are not installed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result
from conftest import HOSTS_DIR

from fp4doctor import cli, schemas

B200 = str(HOSTS_DIR / "b200.json")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli.main, list(args))


def as_argv(text: str) -> list[str]:
    """A --config YAML as vLLM and SGLang turn it into arguments."""
    return [part for key, value in yaml.safe_load(text).items() for part in (f"--{key}", value)]


def test_sglang_with_config_gets_its_own_yaml_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "sglang-fp4.yaml"
    r = run(
        "config", "-t", "sglang", "--facts", B200, "--engine-version", "0.5.23",
        "--autotune", "off", "--prefer", "moe:flashinfer-cutlass-moe", "-o", str(out),
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert as_argv(out.read_text()) == [
        "--fp4-gemm-backend", "flashinfer_cutlass", "--moe-runner-backend", "flashinfer_cutlass",
    ]  # fmt: skip
    assert "writing SGLang's --config YAML, read from 0.5.3rc2 on" in r.stderr
    assert r.stderr.index("writing SGLang") < r.stderr.index(f"wrote {out}")


def test_sglang_before_its_config_file_gets_a_dotenv_and_a_yaml_name_is_refused(
    tmp_path: Path,
) -> None:
    args = ("config", "-t", "sglang", "--facts", B200, "--engine-version", "0.5.2")
    r = run(*args, "-o", str(tmp_path / "x.yaml"))
    assert r.exit_code == 2 and not (tmp_path / "x.yaml").exists()
    assert "SGLang 0.5.2 reads no config file (it reads --config YAML from 0.5.3rc2)" in r.stderr
    assert "-o sglang-fp4.env" in r.stderr
    r = run(*args, "-o", "-")
    assert r.exit_code == 0 and "FP4DOCTOR_SGLANG_ARGS=--moe-runner-backend=" in r.stdout
    assert "reads no config file; it reads --config YAML from 0.5.3rc2" in r.stderr


def test_an_env_only_vllm_refuses_a_yaml_name_and_names_the_dotenv(tmp_path: Path) -> None:
    """vLLM <= 0.23 with an environment variable: a .yaml would be a dotenv file that vLLM's
    --config cannot load (it refuses any other suffix, and holds no variables)."""
    args = ("config", "--facts", B200, "--engine-version", "0.15.0", "--prefer", "cudnn")
    r = run(*args, "-o", str(tmp_path / "vllm-fp4.yaml"))
    assert r.exit_code == 2 and list(tmp_path.iterdir()) == []
    assert "which its --config YAML cannot hold: name the file NAME.env (-o vllm-fp4.env)" in (
        r.stderr
    )
    r = run(*args, "-o", str(tmp_path / "vllm-fp4.env"))
    assert (
        r.exit_code == 0
        and "VLLM_NVFP4_GEMM_BACKEND=flashinfer-cudnn" in (tmp_path / "vllm-fp4.env").read_text()
    )


def test_a_flag_only_vllm_refuses_a_dotenv_name(tmp_path: Path) -> None:
    r = run("config", "--facts", B200, "--engine-version", "0.24.0", "-o", str(tmp_path / "a.env"))
    assert r.exit_code == 2 and "name it NAME.yaml (-o vllm-fp4.yaml)" in r.stderr


def test_flags_and_variables_go_in_two_files_and_nothing_is_dropped(tmp_path: Path) -> None:
    """vLLM 0.18: the linear choice is a variable, the MoE choice a flag. One YAML alone lost the
    variable in silence; now one file is refused with the command that works, and two are
    written."""
    args = (
        "config",
        "--facts",
        B200,
        "--engine-version",
        "0.18.0",
        "--prefer",
        "cudnn,moe:flashinfer-cutedsl-moe",
        "--autotune",
        "off",
    )
    r = run(*args, "-o", str(tmp_path / "vllm-fp4.yaml"))
    assert r.exit_code == 2 and list(tmp_path.iterdir()) == []
    assert "-o vllm-fp4.yaml -o vllm-fp4.env" in r.stderr
    assert "VLLM_NVFP4_GEMM_BACKEND" in r.stderr
    yml, env = tmp_path / "vllm-fp4.yaml", tmp_path / "vllm-fp4.env"
    r = run(*args, "-o", str(yml), "-o", str(env))
    assert r.exit_code == 0, r.stderr
    assert as_argv(yml.read_text()) == ["--moe-backend", "flashinfer_cutedsl"]
    lines = [line for line in env.read_text().splitlines() if not line.startswith("#")]
    assert lines == ["VLLM_NVFP4_GEMM_BACKEND=flashinfer-cudnn"]


@pytest.mark.parametrize(
    ("target", "version", "instead"),
    [
        ("vllm", "0.24.0", "`fp4doctor config --target vllm -o vllm-fp4.yaml`"),
        ("sglang", "0.5.23", "`fp4doctor config --target sglang -o sglang-fp4.yaml`"),
    ],
)
def test_dotenv_of_two_flags_names_a_command_that_works(
    target: str, version: str, instead: str, tmp_path: Path
) -> None:
    # Each family named, so that each gets its own flag (left alone, the engine's own valid
    # MoE pick would take none).
    moe = "moe:flashinfer-cutedsl-moe" if target == "vllm" else "moe:flashinfer-cutlass-moe"
    stated = ("--facts", B200, "--engine-version", version, "--autotune", "off", "--prefer", moe)
    r = run("env", "-t", target, *stated, "--shell", "dotenv")
    # 4, not 2: the user made no usage error; the format cannot hold the answer (issue 42)
    assert r.exit_code == 4 and r.stdout == "" and instead in r.stderr
    # ... and that command does work.
    out = tmp_path / f"{target}-fp4.yaml"
    args = ("config", "-t", target, *stated)
    assert run(*args, "-o", str(out)).exit_code == 0
    assert len(as_argv(out.read_text())) == 4


@pytest.mark.parametrize(
    ("name", "outcome", "code"), [("cpu", "not ready", 1), ("nvml-mismatch", "no verdict", 3)]
)
def test_env_json_answers_with_json_when_there_is_nothing_to_export(
    name: str, outcome: str, code: int
) -> None:
    r = run("env", "--facts", str(HOSTS_DIR / f"{name}.json"), "--shell", "json")
    assert r.exit_code == code
    assert json.loads(r.stdout) == {"outcome": outcome, "set": {}, "unset": []}
    assert schemas.kind_of(json.loads(r.stdout)) == ("env", 1)


def test_env_json_gives_the_flags_as_a_list() -> None:
    r = run(
        "env", "--facts", B200, "--engine-version", "0.24.0", "--shell", "json",
        "--autotune", "off", "--prefer", "moe:flashinfer-cutedsl-moe",
    )  # fmt: skip
    document = json.loads(r.stdout)
    assert r.exit_code == 0 and document["outcome"] == "ready"
    flags = document["lists"]["FP4DOCTOR_VLLM_ARGS"]
    assert flags == ["--linear-backend=flashinfer_cutlass", "--moe-backend=flashinfer_cutedsl"]
    assert document["set"]["FP4DOCTOR_VLLM_ARGS"] == " ".join(flags)


def test_nothing_to_set_takes_the_name_given_and_two_names_must_be_one_of_each(
    tmp_path: Path,
) -> None:
    args = ("config", "-t", "trtllm", "--facts", str(HOSTS_DIR / "b200-vllm-0.33.json"))
    r = run(*args, "-o", str(tmp_path / "t.env"))
    assert r.exit_code == 0 and "writing a dotenv file" in r.stderr
    r = run(*args, "-o", str(tmp_path / "a.yaml"), "-o", str(tmp_path / "b.yaml"))
    assert r.exit_code == 2 and "one NAME.yaml (the engine's) and one NAME.env" in r.stderr
    r = run(*args, "-o", "-", "-o", str(tmp_path / "t2.env"))
    assert r.exit_code == 2 and not (tmp_path / "t2.env").exists()
