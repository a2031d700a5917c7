"""The toolchain probe: FlashInfer's CUDA-home order, the nvcc version, ninja.

Fake toolkits are real directory trees and shell scripts written for each test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fp4doctor.probe.toolchain import cuda_home, probe_toolchain

MISSING = "/nonexistent/cuda"


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def fake_nvcc(home: Path, release: str = "12.8") -> Path:
    return script(
        home / "bin" / "nvcc",
        "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        f"echo 'Cuda compilation tools, release {release}, V{release}.93'",
    )


# --- this host, for real -----------------------------------------------------------------------


def test_real_host_follows_flashinfers_order() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    found = probe_toolchain(env)
    nvcc_on_path = shutil.which("nvcc", path=env.get("PATH"))
    if nvcc_on_path:
        assert found.cuda_home_source == "PATH"
        assert found.cuda_home == os.path.dirname(os.path.dirname(nvcc_on_path))
    elif os.path.exists("/usr/local/cuda"):
        assert found.cuda_home_source == "/usr/local/cuda"
    else:
        assert found.cuda_home is None and "nvcc" in found.errors
    if found.nvcc_path:
        said = subprocess.run([found.nvcc_path, "--version"], capture_output=True, text=True).stdout
        match = re.search(r"release (\d+\.\d+)", said)
        assert match is not None and found.nvcc_version == match.group(1)


def test_real_ninja_is_the_one_on_path() -> None:
    found = probe_toolchain(dict(os.environ))
    on_path = shutil.which("ninja")
    if on_path:
        assert found.ninja_path == on_path
        assert "ninja" not in found.errors


# --- fake toolkits -----------------------------------------------------------------------------


def test_nvcc_on_path_gives_home_and_version(tmp_path: Path) -> None:
    fake_nvcc(tmp_path / "cuda", "12.8")
    found = probe_toolchain({"PATH": str(tmp_path / "cuda" / "bin")}, default_cuda_home=MISSING)
    assert found.cuda_home == str(tmp_path / "cuda")
    assert found.cuda_home_source == "PATH"
    assert found.nvcc_path == str(tmp_path / "cuda" / "bin" / "nvcc")
    assert found.nvcc_version == "12.8"
    assert "nvcc" not in found.errors and "nvcc_version" not in found.errors


def test_cuda_home_wins_and_version_json_is_read_before_running_nvcc(tmp_path: Path) -> None:
    home = tmp_path / "cuda-12.9"
    script(home / "bin" / "nvcc", "echo 'must not run' >&2; exit 3")
    (home / "version.json").write_text(
        json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.9.1"}})
    )
    fake_nvcc(tmp_path / "other", "11.8")
    found = probe_toolchain(
        {"CUDA_HOME": str(home), "PATH": str(tmp_path / "other" / "bin")}, default_cuda_home=MISSING
    )
    assert (found.cuda_home, found.cuda_home_source) == (str(home), "CUDA_HOME")
    assert found.nvcc_version == "12.9"
    assert found.errors == {"ninja": found.errors["ninja"]}  # only ninja may be missing here


def test_version_txt_of_older_toolkits(tmp_path: Path) -> None:
    home = tmp_path / "cuda-11.0"
    script(home / "bin" / "nvcc", "exit 3")
    (home / "version.txt").write_text("CUDA Version 11.0.228\n")
    assert probe_toolchain({"CUDA_PATH": str(home)}).nvcc_version == "11.0"


def test_cuda_path_is_second_and_empty_cuda_home_falls_through(tmp_path: Path) -> None:
    fake_nvcc(tmp_path / "cp", "12.6")
    found = probe_toolchain({"CUDA_HOME": "", "CUDA_PATH": str(tmp_path / "cp")})
    assert (found.cuda_home_source, found.nvcc_version) == ("CUDA_PATH", "12.6")


def test_cuda_home_without_nvcc_does_not_look_further(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    fake_nvcc(tmp_path / "elsewhere")
    found = probe_toolchain(
        {"CUDA_HOME": str(tmp_path / "empty"), "PATH": str(tmp_path / "elsewhere" / "bin")}
    )
    assert found.nvcc_path is None
    assert found.nvcc_version is None
    assert str(tmp_path / "empty" / "bin" / "nvcc") in found.errors["nvcc"]
    assert "CUDA_HOME" in found.errors["nvcc"]


def test_default_cuda_home_is_last(tmp_path: Path) -> None:
    fake_nvcc(tmp_path / "usr-local-cuda", "13.0")
    found = probe_toolchain(
        {"PATH": str(tmp_path / "nothing")}, default_cuda_home=str(tmp_path / "usr-local-cuda")
    )
    assert found.cuda_home_source == str(tmp_path / "usr-local-cuda")
    assert found.nvcc_version == "13.0"


def test_no_toolkit_at_all(tmp_path: Path) -> None:
    found = probe_toolchain({"PATH": str(tmp_path)}, default_cuda_home=MISSING)
    assert (found.cuda_home, found.cuda_home_source, found.nvcc_path) == (None, None, None)
    assert "no CUDA toolkit" in found.errors["nvcc"]


def test_nvcc_without_a_release_line_is_an_error(tmp_path: Path) -> None:
    script(tmp_path / "cuda" / "bin" / "nvcc", "echo 'segmentation fault' >&2; exit 139")
    found = probe_toolchain({"CUDA_HOME": str(tmp_path / "cuda")})
    assert found.nvcc_version is None
    assert "exited 139" in found.errors["nvcc_version"]
    assert "segmentation fault" in found.errors["nvcc_version"]


def test_hanging_nvcc_times_out(tmp_path: Path) -> None:
    script(tmp_path / "cuda" / "bin" / "nvcc", "exec sleep 30")
    found = probe_toolchain({"CUDA_HOME": str(tmp_path / "cuda")}, timeout=0.3)
    assert "did not finish within 0.3 s" in found.errors["nvcc_version"]


def test_ninja_on_path(tmp_path: Path) -> None:
    ninja = script(tmp_path / "bin" / "ninja", "echo 1.11.1")
    found = probe_toolchain({"PATH": str(tmp_path / "bin")}, default_cuda_home=MISSING)
    assert found.ninja_path == str(ninja)
    assert "ninja" not in found.errors


def test_ninja_missing_from_path(tmp_path: Path) -> None:
    found = probe_toolchain({"PATH": str(tmp_path)}, default_cuda_home=MISSING)
    if found.ninja_path is None:
        assert found.errors["ninja"] == "ninja is not on PATH (pip install ninja)"
    else:  # the ninja Python package is installed here: found, but flagged as not on PATH
        assert "is not on PATH" in found.errors["ninja"]
        assert found.ninja_path in found.errors["ninja"]


def test_cuda_home_function_reports_its_source(tmp_path: Path) -> None:
    assert cuda_home({"CUDA_HOME": "/opt/cuda"}) == ("/opt/cuda", "CUDA_HOME")
    assert cuda_home({"PATH": str(tmp_path)}, default=MISSING) == (None, None)


@pytest.mark.parametrize("value", ["12.8.1", "13.0.2", "12.9"])
def test_version_json_variants(tmp_path: Path, value: str) -> None:
    script(tmp_path / "bin" / "nvcc", "exit 3")
    (tmp_path / "version.json").write_text(json.dumps({"cuda": {"version": value}}))
    assert probe_toolchain({"CUDA_HOME": str(tmp_path)}).nvcc_version == ".".join(
        value.split(".")[:2]
    )
