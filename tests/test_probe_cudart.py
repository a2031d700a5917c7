"""The libcudart probe (probe/cudart.py) and the `cudart_loader` kind.

The ld.so.cache reader is checked against this host's real /etc/ld.so.cache (and `ldconfig -p`
where it exists) and against a cache the real `ldconfig` builds from a library gcc builds with
the soname `libcudart.so.12`. Directory listings use FAKE files that only carry a runtime's
name (the probe reads names, never contents). The kind is judged from fixture hosts.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from fp4doctor import facts, profile
from fp4doctor.doctor import Question, diagnose
from fp4doctor.facts import CudartFacts, CudartLibrary
from fp4doctor.probe import probe_host
from fp4doctor.probe.cudart import LD_SO_CACHE, ldconfig_cache, probe_cudart
from fp4doctor.profile import kinds
from fp4doctor.profile.kinds.base import Context
from fp4doctor.profile.kinds.cudart_loader import CudartLoader
from fp4doctor.profile.schema import parse
from fp4doctor.profile.yamlnode import ProfileError

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
NO_CACHE = "/nonexistent/ld.so.cache"


def fake_runtime(directory: Path, *names: str) -> Path:
    """FAKE libcudart files: right names, no library inside."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"FAKE")
    return directory


# --- the ld.so.cache reader against real caches ---------------------------------------------------


def test_this_hosts_real_cache_reads_like_ldconfig_p() -> None:
    if not Path(LD_SO_CACHE).is_file():
        pytest.skip(f"no {LD_SO_CACHE} on this host (musl or a scratch image)")
    found = ldconfig_cache()
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    if not Path(ldconfig).exists():
        return  # read without error: nothing to compare with
    listing = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=30)
    expected = set()
    for line in listing.stdout.splitlines():  # "\tlibcudart.so.13 (libc6,x86-64) => /path"
        name, _, path = line.strip().partition(" => ")
        soname = name.split(" ")[0]
        if soname.startswith("libcudart.so.") and soname[len("libcudart.so.") :].isdigit():
            expected.add((int(soname.rsplit(".", 1)[1]), path))
    assert set(found) == expected


def test_a_cache_built_by_the_real_ldconfig(tmp_path: Path) -> None:
    gcc, ldconfig = shutil.which("gcc") or shutil.which("cc"), shutil.which("ldconfig")
    if not gcc or not ldconfig:
        pytest.skip("needs gcc and ldconfig to build a real library and cache")
    libdir = tmp_path / "cuda-12.9" / "lib"
    libdir.mkdir(parents=True)
    source = tmp_path / "stub.c"
    source.write_text("int cudaRuntimeGetVersion(int *v) { *v = 12090; return 0; }\n")
    built = libdir / "libcudart.so.12.9.79"
    run = subprocess.run(
        [gcc, "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", str(built), str(source)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if run.returncode != 0:
        pytest.skip(f"gcc could not build a shared library: {run.stderr[-200:]}")
    conf, cache = tmp_path / "ld.so.conf", tmp_path / "ld.so.cache"
    conf.write_text(f"{libdir}\n")
    run = subprocess.run(
        [ldconfig, "-f", str(conf), "-C", str(cache)], capture_output=True, text=True, timeout=60
    )
    if run.returncode != 0 or not cache.is_file():
        pytest.skip(f"ldconfig could not write a cache here: {run.stderr[-200:]}")
    assert ldconfig_cache(cache) == [(12, str(libdir / "libcudart.so.12"))]
    found = probe_cudart({}, search=[], cache=str(cache), cuda_home=str(tmp_path / "none"))
    assert found == CudartFacts([CudartLibrary(12, str(libdir / "libcudart.so.12"), "ldconfig")])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a glibc ld.so.cache"),
        (b"ld.so-1.7.0" + b"\0" * 40, "not a glibc ld.so.cache"),
        (b"glibc-ld.so.cache1.1" + b"\0" * 4, "truncated ld.so.cache header"),
        (
            b"glibc-ld.so.cache1.1" + struct.pack("<II", 1000, 0) + b"\0" * 20,
            "its entries run past the end",
        ),
    ],
    ids=["empty", "old-format-only", "short-header", "short-entries"],
)
def test_a_malformed_cache_is_a_recorded_reason(tmp_path: Path, data: bytes, message: str) -> None:
    cache = tmp_path / "ld.so.cache"
    cache.write_bytes(data)  # FAKE: broken on purpose
    with pytest.raises(ValueError, match=message):
        ldconfig_cache(cache)
    found = probe_cudart({}, search=[], cache=str(cache), cuda_home=str(tmp_path))
    assert found.libraries == [] and message in (found.error or "")


# --- where the probe looks ----------------------------------------------------------------------


def test_every_place_is_listed_with_its_origin(tmp_path: Path) -> None:
    ld = fake_runtime(tmp_path / "ld", "libcudart.so.13", "libcudart.so.13.0.96", "libcudart.so")
    site = tmp_path / "site"
    fake_runtime(site / "nvidia" / "cuda_runtime" / "lib", "libcudart.so.12")
    fake_runtime(site / "nvidia" / "cu13" / "lib", "libcudart.so.13")
    toolkit = tmp_path / "cuda"
    fake_runtime(toolkit / "lib64", "libcudart.so.12", "libcudart_static.a")
    (toolkit / "lib").symlink_to(toolkit / "lib64")  # listed once
    env = {"LD_LIBRARY_PATH": f":{ld}:{tmp_path / 'missing'}"}
    found = probe_cudart(env, search=[str(site), ""], cache=NO_CACHE, cuda_home=str(toolkit))
    assert found.error is None
    assert [
        (lib.major, lib.origin, Path(lib.path).relative_to(tmp_path).as_posix())
        for lib in found.libraries
    ] == [
        (12, "toolkit", "cuda/lib64/libcudart.so.12"),
        (12, "wheel", "site/nvidia/cuda_runtime/lib/libcudart.so.12"),
        (13, "LD_LIBRARY_PATH", "ld/libcudart.so.13"),
        (13, "wheel", "site/nvidia/cu13/lib/libcudart.so.13"),
    ]
    on_path = [lib.major for lib in found.libraries if lib.on_loader_path]
    assert on_path == [13]


def test_the_probe_runs_in_probe_host_and_round_trips(tmp_path: Path) -> None:
    ld = fake_runtime(tmp_path / "ld", "libcudart.so.12")
    host = probe_host({"LD_LIBRARY_PATH": str(ld), "PATH": "/usr/bin"})
    assert host.cudart is not None and "cudart" not in host.probe_errors
    assert (
        CudartLibrary(12, str(ld / "libcudart.so.12"), "LD_LIBRARY_PATH") in host.cudart.libraries
    )
    assert facts.loads(facts.dumps(host)) == host


def test_old_snapshots_without_the_field_still_load() -> None:
    for path in sorted(HOSTS.glob("*.json")):
        host = facts.load(path)
        assert host.cudart is None
        assert "cudart" not in json.loads(facts.dumps(host)), path.name  # byte for byte
    found = facts.loads(facts.dumps(dataclasses.replace(host, cudart=CudartFacts())))
    assert found.cudart == CudartFacts()  # "probed, found none" is kept apart from "not probed"


# --- the kind ------------------------------------------------------------------------------------


def host_with(
    libraries: list[CudartLibrary] | None, torch_cuda: str | None = "12.9"
) -> facts.HostFacts:
    host = facts.load(HOSTS / "b200.json")
    return dataclasses.replace(
        host,
        cudart=None if libraries is None else CudartFacts(libraries),
        packages=dataclasses.replace(host.packages, torch_cuda=torch_cuda),
    )


def judge(kind: CudartLoader, host: facts.HostFacts) -> tuple[bool, str]:
    check = kind.check(Context(facts=host, versions=host.packages.versions, env={}), None)
    return check.ok, check.measured


SYSTEM_13 = CudartLibrary(13, "/usr/local/cuda-13.0/lib64/libcudart.so.13", "ldconfig")
WHEEL_12 = CudartLibrary(12, "/venv/nvidia/cuda_runtime/lib/libcudart.so.12", "wheel")
WHEEL_13 = CudartLibrary(13, "/venv/nvidia/cu13/lib/libcudart.so.13", "wheel")


def test_two_majors_fail_the_loader_that_refuses_them() -> None:
    # Issue #267's GKE host: torch's CUDA 12 runtime in the process, CUDA 13 in ld.so.cache.
    ok, measured = judge(CudartLoader((12, 13)), host_with([WHEEL_12, SYSTEM_13]))
    assert not ok
    assert measured == (
        "2 majors loadable: libcudart.so.12: torch's CUDA 12.9 runtime, loaded with torch; "
        "libcudart.so.13: /usr/local/cuda-13.0/lib64/libcudart.so.13 (ldconfig)"
    )


def test_one_major_passes_and_unused_copies_are_named() -> None:
    ok, measured = judge(CudartLoader((12, 13)), host_with([WHEEL_12, WHEEL_13]))
    assert ok  # the cu13 wheel is installed, but nothing loads it before cudnn-frontend
    assert "libcudart.so.12: torch's CUDA 12.9" in measured
    assert (
        "also /venv/nvidia/cu13/lib/libcudart.so.13 (wheel, not on the loader's path)" in measured
    )


def test_a_loader_that_tries_only_13_fails_a_cuda12_host() -> None:
    ok, measured = judge(CudartLoader((13,)), host_with([WHEEL_12]))
    assert not ok and measured.startswith("none of libcudart.so.13: libcudart.so.12")
    assert judge(CudartLoader((13,)), host_with([SYSTEM_13], torch_cuda="13.0"))[0]


@pytest.mark.parametrize(
    ("libraries", "torch_cuda", "measured"),
    [
        (None, "12.9", "libcudart not checked: the facts carry no scan of it"),
        ([], None, "no libcudart found to judge"),
    ],
)
def test_what_cannot_be_judged_is_said_not_failed(
    libraries: list[CudartLibrary] | None, torch_cuda: str | None, measured: str
) -> None:
    assert judge(CudartLoader((12, 13)), host_with(libraries, torch_cuda)) == (True, measured)


PROFILE = """\
schema: 1
target: cudartdemo
title: cudart demo
engine: {package: vllm, newest_known: "0.22.0"}
backends:
  cudnn:
    summary: a cuDNN path
    native: true
    requires:
      - cudart_loader: [12, 13]
        source: test
eras:
  - versions: ">=0.1"
    source: test
    knobs: []
    auto: [{backend: cudnn}]
"""


def test_the_kind_is_registered_and_refuses_bad_values() -> None:
    assert kinds.get("cudart_loader") is CudartLoader
    parsed = parse(PROFILE, "demo.yaml", profile.load_module)
    assert parsed.backends["cudnn"].requires[0].kind == CudartLoader((12, 13))
    for bad in ("[]", "[12, 12]", "[0]", "twelve"):
        with pytest.raises(ProfileError, match=r"demo\.yaml:\d+"):
            parse(PROFILE.replace("[12, 13]", bad), "demo.yaml", profile.load_module)


def test_the_shipped_rule_fails_flashinfer_cudnn_with_two_runtimes(tmp_path: Path) -> None:
    host = host_with([WHEEL_12, SYSTEM_13])
    versions = {**host.packages.versions, "nvidia-cudnn-frontend": "1.22.0"}
    host = dataclasses.replace(host, packages=dataclasses.replace(host.packages, versions=versions))
    path = tmp_path / "host.json"
    path.write_text(facts.dumps(host), encoding="utf-8")
    report = diagnose(Question(target="flashinfer", facts_file=str(path)))
    found = [f for f in report.findings() if f.id.endswith("cudnn_frontend_cudart")]
    assert found and all(f.status.value == "fail" for f in found)
    assert "nvidia-cudnn-frontend>=1.25.0" in (found[0].fix or "")
    fixed = dataclasses.replace(
        host,
        packages=dataclasses.replace(
            host.packages, versions={**versions, "nvidia-cudnn-frontend": "1.25.0"}
        ),
    )
    path.write_text(facts.dumps(fixed), encoding="utf-8")
    report = diagnose(Question(target="flashinfer", facts_file=str(path)))
    assert not [f for f in report.findings() if f.id.endswith("cudnn_frontend_cudart")]


def test_redaction_scrubs_the_runtime_paths() -> None:
    lib = CudartLibrary(12, "/home/alice/venv/nvidia/cuda_runtime/lib/libcudart.so.12", "wheel")
    redacted = facts.redact(host_with([lib]), home="/home/alice")
    assert redacted.cudart is not None
    assert redacted.cudart.libraries[0].path == "~/venv/nvidia/cuda_runtime/lib/libcudart.so.12"
