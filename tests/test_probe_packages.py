"""The package probe: versions equal importlib.metadata's, torch's build read from its text."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
from pathlib import Path

import pytest
from packaging.version import Version

from fp4doctor.facts import canonical_name
from fp4doctor.probe.packages import (
    PACKAGES,
    SPLITS,
    parse_torch_version_py,
    probe_packages,
    profile_packages,
    torch_dir,
)


def installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


# --- this host, for real -----------------------------------------------------------------------


def test_real_versions_equal_importlib_metadata() -> None:
    found = probe_packages()
    expected = {
        canonical_name(name): version
        for name in PACKAGES
        if (version := installed_version(name)) is not None
    }
    # And every installed part of a split distribution (nvidia-cutlass-dsl-libs-*).
    for dist in importlib.metadata.distributions():
        name = canonical_name(dist.metadata["Name"])
        if name.startswith(SPLITS):
            expected[name] = dist.version
    # torch is reported as torch.__version__ says it (from torch/version.py: 2.11.0+cu130);
    # some wheels' metadata drop the local part (2.11.0). The release must be the same.
    versions = dict(found.versions)
    found_torch, expected_torch = versions.pop("torch", None), expected.pop("torch", None)
    assert (found_torch is None) == (expected_torch is None)
    if found_torch is not None and expected_torch is not None:
        assert Version(found_torch).base_version == Version(expected_torch).base_version
    assert versions == expected
    assert found.errors == {}


def test_real_torch_build_read_from_version_py() -> None:
    if installed_version("torch") is None:
        pytest.skip("torch is not installed here")
    found = probe_packages()
    directory = torch_dir()
    assert directory is not None
    text = Path(directory, "version.py").read_text(encoding="utf-8")
    git = re.search(r"^git_version = '([0-9a-f]+)'", text, re.M)
    assert git is not None and found.torch_git_version == git.group(1)
    cuda = re.search(r"^cuda(?:: Optional\[str\])? = (None|'[^']*')", text, re.M)
    assert cuda is not None
    assert found.torch_cuda == (None if cuda.group(1) == "None" else cuda.group(1).strip("'"))


def test_torch_is_not_imported() -> None:
    import sys

    before = "torch" in sys.modules
    probe_packages()
    assert ("torch" in sys.modules) == before


# --- a site directory written for the test -----------------------------------------------------


def write_dist(site: Path, directory: str, metadata: bytes) -> Path:
    info = site / directory
    info.mkdir(parents=True)
    (info / "METADATA").write_bytes(metadata)
    return info


def metadata(name: str, version: str) -> bytes:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()


def test_versions_from_a_site_dir(tmp_path: Path) -> None:
    write_dist(
        tmp_path, "flashinfer_python-0.6.1.dist-info", metadata("flashinfer-python", "0.6.1")
    )
    write_dist(tmp_path, "Flashinfer_Cubin-0.6.1.dist-info", metadata("Flashinfer_Cubin", "0.6.1"))
    write_dist(tmp_path, "tensorrt_llm-1.2.0.dist-info", metadata("tensorrt_llm", "1.2.0"))
    write_dist(tmp_path, "unrelated-1.0.dist-info", metadata("unrelated", "1.0"))
    found = probe_packages([str(tmp_path)])
    assert found.versions == {
        "flashinfer-python": "0.6.1",
        "flashinfer-cubin": "0.6.1",
        "tensorrt-llm": "1.2.0",
    }
    assert found.version("Flashinfer_Python") == "0.6.1"
    assert found.torch_cuda is None
    assert found.errors == {}


def test_undecodable_metadata_is_an_error_naming_the_dist_info(tmp_path: Path) -> None:
    info = write_dist(
        tmp_path, "vllm-0.15.1.dist-info", b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.\xff\n"
    )
    write_dist(tmp_path, "sglang-0.5.23.dist-info", metadata("sglang", "0.5.23"))
    found = probe_packages([str(tmp_path)])
    assert "vllm" not in found.versions
    assert str(info) in found.errors["vllm"]
    assert "UnicodeDecodeError" in found.errors["vllm"]
    assert found.versions == {"sglang": "0.5.23"}  # the other packages are still read


def test_metadata_without_version_is_an_error(tmp_path: Path) -> None:
    write_dist(tmp_path, "b12x-0.1.dist-info", b"Metadata-Version: 2.1\nName: b12x\n")
    found = probe_packages([str(tmp_path)])
    assert "has no Version" in found.errors["b12x"]


def test_unreadable_metadata_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "b12x-0.2.dist-info" / "METADATA").mkdir(parents=True)
    found = probe_packages([str(tmp_path)])
    assert "b12x" in found.errors
    assert "b12x" not in found.versions


def fake_torch(site: Path, version_py: str, version: str = "2.9.1") -> None:
    write_dist(site, f"torch-{version}.dist-info", metadata("torch", version))
    package = site / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('the probe must not import torch')\n")
    (package / "version.py").write_text(version_py)


TORCH_CU128 = """from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = '2.9.1+cu128'
debug = False
cuda: Optional[str] = '12.8'
git_version = 'd38164a545b4a4e4e0cf73ce67173f70574890b6'
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None
"""


def test_torch_build_from_a_fake_torch(tmp_path: Path) -> None:
    fake_torch(tmp_path, TORCH_CU128)
    found = probe_packages([str(tmp_path)])
    # torch.__version__ from version.py wins over the metadata's version without the local part.
    assert found.versions == {"torch": "2.9.1+cu128"}
    assert found.torch_cuda == "12.8"
    assert found.torch_git_version == "d38164a545b4a4e4e0cf73ce67173f70574890b6"
    assert found.torch_hip is None
    assert found.errors == {}


def test_torch_dist_without_package_dir_is_an_error(tmp_path: Path) -> None:
    write_dist(tmp_path, "torch-2.9.1.dist-info", metadata("torch", "2.9.1"))
    found = probe_packages([str(tmp_path)])
    assert found.versions == {"torch": "2.9.1"}
    assert "torch/version.py" in found.errors


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            TORCH_CU128,
            {
                "__version__": "2.9.1+cu128",
                "cuda": "12.8",
                "git_version": "d38164a545b4a4e4e0cf73ce67173f70574890b6",
                "hip": None,
            },
        ),
        ("cuda = None\nhip = '6.2.41133'\n", {"cuda": None, "hip": "6.2.41133"}),
        ('cuda = "13.0"  # set by the build\n', {"cuda": "13.0"}),
        ("cudart = '12.8'\nxcuda = '1'\n", {}),
    ],
)
def test_parse_torch_version_py(text: str, expected: dict[str, str | None]) -> None:
    assert parse_torch_version_py(text) == expected


def test_real_torch_dir_matches_find_spec() -> None:
    spec = importlib.util.find_spec("torch")
    if spec is None:
        pytest.skip("torch is not installed here")
    assert torch_dir() == next(iter(spec.submodule_search_locations or []))


# --- what a snapshot records -------------------------------------------------------------------


def test_profile_packages_are_every_package_a_shipped_profile_reads() -> None:
    from fp4doctor import profile

    union = {canonical_name(n) for t in profile.builtin_names() for n in profile.load(t).packages()}
    assert set(profile_packages()) == union
    assert {"triton", "humming-kernels", "sglang-kernel"} <= union


def test_a_probe_snapshot_records_what_the_rules_read(tmp_path: Path) -> None:
    """`probe --json` with triton, humming-kernels, sglang-kernel and the
    nvidia-cutlass-dsl-libs-* split installed records each of them, so that replaying the
    snapshot judges what the host would be judged on. The site directory holds fake dist-info
    directories (metadata only, no code): the probe reads metadata and imports nothing."""
    import json
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    fakes = {
        "triton": "3.5.1",
        "humming_kernels": "0.1.19",
        "sglang_kernel": "0.3.21",
        "nvidia_cutlass_dsl": "4.8.0",
        "nvidia_cutlass_dsl_libs_base": "4.8.0",
        "nvidia_cutlass_dsl_libs_cu13": "4.8.0",
    }
    for name, version in fakes.items():
        write_dist(site, f"{name}-{version}.dist-info", metadata(name.replace("_", "-"), version))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    env["FP4DOCTOR_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "-m", "fp4doctor", "probe", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    versions = json.loads(done.stdout)["packages"]["versions"]
    for name, version in fakes.items():
        assert versions[canonical_name(name)] == version, name


def test_the_probe_reads_the_union_without_the_profile_package(tmp_path: Path) -> None:
    """The union is computed once (the first run parses the profiles) and then read from the
    cache: a later `probe --json` imports neither the profile package nor PyYAML."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from fp4doctor import cli\n"
        "try:\n"
        "    cli.main(['probe', '--json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('imported:', 'fp4doctor.profile' in sys.modules, 'yaml' in sys.modules,"
        " file=sys.stderr)\n"
    )
    env = {**os.environ, "FP4DOCTOR_CACHE_DIR": str(tmp_path / "cache")}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
        )

    first, second = run(), run()
    assert "imported: True True" in first.stderr, first.stderr
    assert "imported: False False" in second.stderr, second.stderr
    # The packages read are the same (the rest of the facts, the JIT cache one, may change
    # between two runs on a GPU host where other tests build kernels meanwhile).
    assert json.loads(second.stdout)["packages"] == json.loads(first.stdout)["packages"]
