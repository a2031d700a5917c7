"""`check --facts OTHER_HOST` asks the installed engine only when it is the facts' engine
(fp4doctor/oracle/sameness.py): the distributions the rules read, nvcc (on PATH or under
CUDA_HOME), ninja and the FP4 variables. What this install has and the facts lack is hidden from
the engine; anything else that differs is said, and the engine is not asked. Real
distributions of this interpreter (packaging, click) and a real nvcc script stand in for the
engine's; the real engines: tests/test_engine.py."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from fp4doctor import facts
from fp4doctor.oracle import query, sameness
from fp4doctor.rules import evaluate

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
ROOT = Path(__file__).resolve().parents[1]
PACKAGING = metadata.version("packaging")


def _nvcc(tmp_path: Path, version: str = "12.8") -> Path:
    """A CUDA home whose bin/nvcc reports `version` (a real script, not a CUDA toolkit)."""
    home = tmp_path / f"cuda-{version}"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {version}, V{version}.1'\n")
    nvcc.chmod(0o755)
    return home


def test_expected_reads_the_facts_packages_toolchain_and_fp4_variables() -> None:
    host = facts.load(HOSTS / "b200-vllm-0.33.json")
    host = dataclasses.replace(host, env={**host.env, "VLLM_DISABLED_KERNELS": "X"})
    want = sameness.expected(host, ["vllm", "flashinfer-python", "b12x"])
    assert want.packages == {"vllm": "0.33.0", "flashinfer-python": "0.7.2.post1", "b12x": None}
    assert want.nvcc == "13.0" and want.nvcc_on_path is True and want.ninja
    assert want.env == {
        "VLLM_USAGE_SOURCE": "production-docker-image",
        "VLLM_DISABLED_KERNELS": "X",
    }
    assert sameness.Expected.from_dict(want.to_dict()) == want


def test_the_same_install_differs_in_nothing(tmp_path: Path) -> None:
    home = _nvcc(tmp_path)
    want = sameness.Expected({"packaging": PACKAGING}, nvcc="12.8", nvcc_on_path=False)
    differs, hiding = sameness.compare(want, {"PATH": "", "CUDA_HOME": str(home)})
    assert differs == [] and hiding.distributions == () and not hiding.nvcc


def test_what_the_facts_have_otherwise_is_said(tmp_path: Path) -> None:
    home = _nvcc(tmp_path, "13.0")
    want = sameness.Expected(
        {"packaging": "0.1", "fp4doctor-no-such-dist": "1.0"}, nvcc="12.8", ninja=True
    )
    differs, _hiding = sameness.compare(want, {"PATH": str(tmp_path), "CUDA_HOME": str(home)})
    assert f"packaging 0.1 there, {PACKAGING} here" in differs
    assert "fp4doctor-no-such-dist 1.0 there, not installed here" in differs
    assert "nvcc 12.8 there, 13.0 here" in differs
    assert "ninja on PATH there, not here" in differs


def test_what_the_facts_lack_is_hidden(tmp_path: Path) -> None:
    home = _nvcc(tmp_path)
    # ninja beside nvcc (a script, as the facts' ninja): found on PATH on any host, not only
    # where /usr/bin has one (the H100 device image has none there).
    ninja = home / "bin" / "ninja"
    ninja.write_text("#!/bin/sh\necho 1.11.1\n")
    ninja.chmod(0o755)
    env = {
        "PATH": f"{home / 'bin'}{os.pathsep}/usr/bin",
        "VLLM_X": "1",
        "FLASHINFER_NO_DOWNLOAD": "1",
    }
    want = sameness.Expected({"click": None}, nvcc=None, ninja=True, env={"VLLM_Y": "2"})
    differs, hiding = sameness.compare(want, env)
    assert differs == [] and hiding.distributions == ("click",) and hiding.nvcc
    sameness.apply(dataclasses.replace(hiding, distributions=()), env)  # not in this process
    assert env["PATH"] == "/usr/bin" and env["CUDA_HOME"] == sameness.NO_TOOLKIT
    assert "VLLM_X" not in env and env["VLLM_Y"] == "2" and env["FLASHINFER_NO_DOWNLOAD"] == "1"


def test_nvcc_under_cuda_home_only_there_is_taken_off_path_here(tmp_path: Path) -> None:
    """vLLM before 0.32 looks on PATH only: the facts' nvcc is under CUDA_HOME alone, so this
    install's is taken off PATH, its CUDA home kept."""
    home = _nvcc(tmp_path)
    env = {"PATH": str(home / "bin")}
    want = sameness.Expected({}, nvcc="12.8", nvcc_on_path=False)
    differs, hiding = sameness.compare(want, env)
    assert differs == [] and hiding.nvcc_off_path and not hiding.nvcc
    sameness.apply(hiding, env)
    assert env["PATH"] == "" and env["CUDA_HOME"] == str(home)


def test_a_hidden_distribution_is_not_found_by_import_or_metadata() -> None:
    """In a fresh interpreter (the hiding is process-wide, as in the worker)."""
    code = (
        "import importlib.metadata as m, importlib.util as u\n"
        "from fp4doctor.oracle import sameness\n"
        "sameness.hide_distributions(['click'])\n"
        "try:\n    m.version('click'); print('metadata found')\n"
        "except m.PackageNotFoundError: print('metadata hidden')\n"
        "print('import found' if u.find_spec('click') else 'import hidden')\n"
        "print('packaging', m.version('packaging'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=True,
    )
    assert done.stdout.split("\n")[:3] == ["metadata hidden", "import hidden",
                                           f"packaging {PACKAGING}"]  # fmt: skip


def test_the_worker_does_not_ask_an_engine_that_is_not_the_facts() -> None:
    """The real worker, before it imports any engine: the facts' engine differs, so it says
    why and answers nothing."""
    host = facts.load(HOSTS / "b200-vllm-0.33.json")
    from fp4doctor import profile

    ev = evaluate(profile.load("vllm"), host, override_version="0.33.0", family="linear")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FP4DOCTOR_CACHE_DIR": ""}
    want = sameness.Expected({"packaging": "0.1"})
    asking = query.Asking("vllm", "vLLM", "0.33.0", query.cases_for(ev), stub=True,
                          package="vllm", env=env, expect=want)  # fmt: skip
    got = asking.answers()
    assert got.unasked is not None and not got.answers
    assert got.unasked.startswith("the installed engine is not the facts' engine (differs: ")
    assert f"packaging 0.1 there, {PACKAGING} here" in got.unasked


def test_check_facts_passes_what_the_facts_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """`query.start` for a facts file hands the worker the facts' packages (the ones the rules
    read), toolchain and variables; for this host, nothing (its own engine is asked)."""
    from fp4doctor import profile

    started: list[query.Asking] = []
    monkeypatch.setattr(query, "installed", lambda package: True)
    monkeypatch.setattr(query.Asking, "_run", lambda self: started.append(self))
    host = facts.load(HOSTS / "b200-vllm-0.33.json")
    ev = evaluate(profile.load("vllm"), host, override_version="0.33.0", family="linear")
    asking = query.start([ev], stub=True, facts=host)
    assert asking is not None and asking.expect is not None
    asking._thread.join()
    assert asking.expect.packages["flashinfer-python"] == "0.7.2.post1"
    assert set(asking.expect.packages) == set(profile.load("vllm").packages())
    local = query.start([ev], stub=True)
    assert local is not None and local.expect is None
    local._thread.join()
