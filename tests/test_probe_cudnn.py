"""The cuDNN probe: cudnn-frontend's search order, cudnnGetVersion, and broken libraries.

Broken and stand-in libraries are real files made for each test: garbage bytes, a truncated copy
of the real libcudnn, and small shared objects compiled with the host's C compiler (a libcudnn
that answers 9.8.0, one without the symbol, one whose constructor crashes).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from fp4doctor.facts import CudnnLibrary, PackageFacts
from fp4doctor.probe.cudnn import Candidate, probe_cudnn, read_library
from fp4doctor.probe.packages import probe_packages

REAL_PURELIB = sysconfig.get_path("purelib")
REAL_WHEEL_DIR = Path(REAL_PURELIB, "nvidia", "cudnn", "lib")
NO_ENV: dict[str, str] = {}


def real_wheel_library() -> Path:
    found = sorted(REAL_WHEEL_DIR.glob("libcudnn.so.*[0-9]"))
    if not found:
        pytest.skip("no nvidia-cudnn wheel installed here")
    return found[0]


def header_version(lib: Path) -> int:
    """The version the wheel's own cudnn_version.h states: an independent check."""
    text = (lib.parent.parent / "include" / "cudnn_version.h").read_text()
    major, minor, patch = (
        int(re.search(rf"#define CUDNN_{key}\s+(\d+)", text).group(1))  # type: ignore[union-attr]
        for key in ("MAJOR", "MINOR", "PATCHLEVEL")
    )
    return major * 10000 + minor * 100 + patch


def compile_library(tmp: Path, source: str, target: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler on this host")
    c_file = tmp / (target.name + ".c")
    c_file.write_text(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(target), str(c_file)], check=True)
    return target


ANSWERS_9_8_0 = "#include <stddef.h>\nsize_t cudnnGetVersion(void) { return 90800; }\n"
NO_SYMBOL = "int cudnnSomethingElse(void) { return 1; }\n"
CRASHES = (
    "#include <signal.h>\n"
    "__attribute__((constructor)) static void crash(void) { raise(SIGSEGV); }\n"
    "unsigned long cudnnGetVersion(void) { return 1; }\n"
)


# --- this host, for real -----------------------------------------------------------------------


def test_real_frontend_library_and_version() -> None:
    lib = real_wheel_library()
    found = probe_cudnn({}, probe_packages())
    assert found.frontend.error is None
    assert found.frontend.path == str(lib)
    assert found.frontend.version == header_version(lib)
    assert found.frontend.origin in ("nvidia-cudnn-cu12 wheel", "nvidia-cudnn-cu13 wheel")


def test_real_version_matches_the_wheel_version() -> None:
    lib = real_wheel_library()
    packages = probe_packages()
    wheel = packages.version("nvidia-cudnn-cu12") or packages.version("nvidia-cudnn-cu13")
    assert wheel is not None
    major, minor, patch = (int(x) for x in wheel.split(".")[:3])
    found = probe_cudnn({}, packages)
    assert found.frontend.version == major * 10000 + minor * 100 + patch
    assert found.frontend.version_text == f"{major}.{minor}.{patch}"
    assert lib.exists()


def test_the_wheel_record_reading_agrees_with_cudnn_get_version() -> None:
    """The probe takes an unchanged wheel file's version from the wheel (no child); the child
    that loads it and asks cudnnGetVersion must say the same."""
    lib = real_wheel_library()
    candidate = Candidate((str(lib),), "nvidia-cudnn-cu12 wheel", str(lib))
    loaded = read_library(candidate, NO_ENV)
    recorded = read_library(candidate, NO_ENV, site_dirs=[REAL_PURELIB])
    assert loaded.error is None and loaded.version == header_version(lib)
    assert recorded == CudnnLibrary(path=str(lib), version=loaded.version, origin=candidate.origin)


def _fake_wheel(purelib: Path, version: str, library: Path, sizes: dict[str, int]) -> None:
    """A dist-info whose RECORD lists `library` (and the graph library) with `sizes`."""
    info = purelib / f"nvidia_cudnn_cu12-{version}.dist-info"
    info.mkdir(parents=True)
    lines = [f"nvidia/cudnn/lib/{name},sha256=x,{size}" for name, size in sizes.items()]
    (info / "RECORD").write_text("\n".join([*lines, f"{info.name}/RECORD,,"]) + "\n")
    assert library.is_relative_to(purelib)


@pytest.mark.parametrize("unchanged", [True, False], ids=["as-recorded", "replaced"])
def test_a_wheel_file_is_read_from_its_record_only_when_unchanged(
    tmp_path: Path, unchanged: bool
) -> None:
    """A stand-in library answering 9.8.0 inside a wheel that says 9.10.2: the RECORD's version
    when the files have the recorded sizes, the library's own answer once one was replaced."""
    lib_dir = tmp_path / "nvidia" / "cudnn" / "lib"
    lib = compile_library(tmp_path, ANSWERS_9_8_0, lib_dir / "libcudnn.so.9")
    graph = lib_dir / "libcudnn_graph.so.9"
    graph.write_bytes(b"graph")
    sizes = {lib.name: lib.stat().st_size, graph.name: 5 if unchanged else 6}
    _fake_wheel(tmp_path, "9.10.2.21", lib, sizes)
    found = probe_cudnn({}, purelib=str(tmp_path), search_path=[])
    assert found.frontend.error is None
    assert found.frontend.version == (91002 if unchanged else 90800)


def test_cpu_torch_has_no_cudnn_of_its_own() -> None:
    packages = probe_packages()
    if packages.version("torch") is None or packages.torch_cuda is not None:
        pytest.skip("needs a CPU build of torch")
    assert probe_cudnn({}, packages).torch is None


def test_ld_library_path_comes_first(tmp_path: Path) -> None:
    lib = real_wheel_library()
    found = probe_cudnn({"LD_LIBRARY_PATH": f"{tmp_path}:{lib.parent}"}, purelib=str(tmp_path))
    assert found.frontend.origin == "LD_LIBRARY_PATH"
    assert found.frontend.path == str(lib.parent / "libcudnn.so.9")
    assert found.frontend.version == header_version(lib)


def test_nothing_found_is_an_error_value(tmp_path: Path) -> None:
    if any(
        Path(d, "libcudnn.so.9").exists()
        for d in ("/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64")
    ):
        pytest.skip("this host has a system libcudnn")
    found = probe_cudnn({}, purelib=str(tmp_path), search_path=[str(tmp_path)])
    assert found.frontend.origin == "system"
    assert found.frontend.version is None
    assert "no libcudnn found" in (found.frontend.error or "")
    assert "libcudnn.so.9" in (found.frontend.error or "")


# --- broken and stand-in libraries -------------------------------------------------------------


def wheel_path(site: Path, name: str = "libcudnn.so.9", folder: str = "cudnn") -> Path:
    path = site / "nvidia" / folder / "lib" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_garbage_file_is_an_error_with_its_path(tmp_path: Path) -> None:
    lib = wheel_path(tmp_path)
    lib.write_bytes(b"this is not a shared object\n" * 10)
    installed = PackageFacts(versions={"nvidia-cudnn-cu12": "9.14.0.64"})
    found = probe_cudnn({}, installed, purelib=str(tmp_path))
    assert found.frontend.path == str(lib)
    assert found.frontend.version is None
    assert found.frontend.origin == "nvidia-cudnn-cu12 wheel"
    assert str(lib) in (found.frontend.error or "")


def test_truncated_copy_of_the_real_library_is_an_error(tmp_path: Path) -> None:
    real = real_wheel_library()
    lib = wheel_path(tmp_path)
    lib.write_bytes(real.read_bytes()[:8192])
    found = probe_cudnn({}, purelib=str(tmp_path))
    assert found.frontend.version is None
    assert found.frontend.error


def test_library_without_the_symbol_is_an_error(tmp_path: Path) -> None:
    lib = compile_library(tmp_path, NO_SYMBOL, wheel_path(tmp_path))
    found = probe_cudnn({}, purelib=str(tmp_path))
    assert found.frontend.error == f"{lib}: loads, but has no cudnnGetVersion symbol"


def test_stand_in_library_reports_its_own_version(tmp_path: Path) -> None:
    lib = compile_library(tmp_path, ANSWERS_9_8_0, wheel_path(tmp_path))
    found = probe_cudnn({}, purelib=str(tmp_path))
    assert found.frontend == CudnnLibrary(
        path=str(lib),
        version=90800,
        origin="a wheel directory, with no nvidia-cudnn-cu12/-cu13 distribution recorded",
    )
    assert found.frontend.version_text == "9.8.0"


def test_cudnn_jit_directory_is_second(tmp_path: Path) -> None:
    lib = compile_library(tmp_path, ANSWERS_9_8_0, wheel_path(tmp_path, folder="cudnn_jit"))
    found = probe_cudnn({}, purelib=str(tmp_path))
    assert found.frontend.path == str(lib)
    assert found.frontend.origin == "nvidia/cudnn_jit wheel directory"
    assert found.frontend.version == 90800


def test_two_wheel_libraries_make_the_frontend_refuse(tmp_path: Path) -> None:
    wheel_path(tmp_path, "libcudnn.so.8").write_bytes(b"x")
    wheel_path(tmp_path, "libcudnn.so.9").write_bytes(b"x")
    found = probe_cudnn({}, purelib=str(tmp_path))
    assert "Found 2 libcudnn.so.x in nvidia-cudnn-cuXX" in (found.frontend.error or "")
    assert found.frontend.version is None


def test_crashing_library_is_an_error_not_a_crash(tmp_path: Path) -> None:
    compile_library(tmp_path, CRASHES, wheel_path(tmp_path))
    found = probe_cudnn({}, purelib=str(tmp_path))
    assert "crashed the reader with SIGSEGV" in (found.frontend.error or "")


def test_hanging_reader_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in interpreter that never answers, as a loader stuck on a dead NFS mount would.
    sleeper = tmp_path / "python"
    sleeper.write_text("#!/bin/sh\nexec sleep 30\n")
    sleeper.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(sleeper))
    result = read_library(
        Candidate(("/x/libcudnn.so.9",), "test", "/x/libcudnn.so.9"), {}, timeout=0.3
    )
    assert result.error == "loading /x/libcudnn.so.9 did not finish within 0.3 s"


# --- torch's cuDNN -----------------------------------------------------------------------------


def fake_torch_package(site: Path) -> Path:
    package = site / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the probe must not import torch')\n")
    return package


CUDA_TORCH = PackageFacts(versions={"torch": "2.9.1"}, torch_cuda="12.8")


def test_torch_bundled_cudnn_differs_from_the_frontend(tmp_path: Path) -> None:
    lib = real_wheel_library()
    site = tmp_path / "site"
    bundled = compile_library(
        tmp_path, ANSWERS_9_8_0, fake_torch_package(site) / "lib" / "libcudnn.so.9"
    )
    found = probe_cudnn({}, CUDA_TORCH, purelib=REAL_PURELIB, search_path=[str(site)])
    assert found.frontend.path == str(lib)
    assert found.torch == CudnnLibrary(
        path=str(bundled), version=90800, origin="torch/lib (bundled with torch)"
    )


def test_torch_sharing_the_frontend_file_is_not_repeated(tmp_path: Path) -> None:
    compile_library(tmp_path, ANSWERS_9_8_0, wheel_path(tmp_path))
    fake_torch_package(tmp_path)
    found = probe_cudnn({}, CUDA_TORCH, purelib=str(tmp_path), search_path=[str(tmp_path)])
    assert found.frontend.version == 90800
    assert found.torch is None


def test_frontend_by_name_gets_the_library_torch_loaded(tmp_path: Path) -> None:
    # cudnn wheel in another sys.path entry (a user site, say): the frontend's purelib glob misses
    # it, but torch has loaded it before the frontend asks for libcudnn.so.9 by name.
    user_site, purelib = tmp_path / "user", tmp_path / "purelib"
    purelib.mkdir()
    lib = compile_library(tmp_path, ANSWERS_9_8_0, wheel_path(user_site))
    fake_torch_package(user_site)
    installed = PackageFacts(
        versions={"torch": "2.9.1", "nvidia-cudnn-cu12": "9.8.0.87"}, torch_cuda="12.8"
    )
    found = probe_cudnn({}, installed, purelib=str(purelib), search_path=[str(user_site)])
    assert found.frontend.path == str(lib)
    assert found.frontend.version == 90800
    assert (
        found.frontend.origin
        == "nvidia-cudnn-cu12 wheel, loaded by torch before cudnn-frontend asks by name"
    )
    assert found.torch is None


def test_torch_cuda13_layout_is_searched(tmp_path: Path) -> None:
    lib = compile_library(
        tmp_path, ANSWERS_9_8_0, tmp_path / "site" / "nvidia" / "cu13" / "lib" / "libcudnn.so.9"
    )
    fake_torch_package(tmp_path / "site")
    torch13 = PackageFacts(versions={"torch": "2.11.0"}, torch_cuda="13.0")
    real = real_wheel_library()
    found = probe_cudnn({}, torch13, purelib=REAL_PURELIB, search_path=[str(tmp_path / "site")])
    assert found.frontend.path == str(real)
    assert found.torch is not None and found.torch.path == str(lib)


def test_the_reader_does_not_load_cudnn_into_the_doctors_process() -> None:
    real_wheel_library()
    code = (
        "from fp4doctor.probe.cudnn import probe_cudnn; "
        "from fp4doctor.probe.packages import probe_packages; "
        "found = probe_cudnn({}, probe_packages()); assert found.frontend.version, found; "
        "print('libcudnn' in open('/proc/self/maps').read())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
