"""The compiled-arch scan (probe/archs.py) and the `compiled_arch` kind.

Real CUDA libraries installed here (the nvidia-cudnn wheel), compared with cuobjdump where it
exists; FAKE ELF/fatbin bytes built below for every malformed input; the kind judged from fixture
hosts; and, on a GPU host with nvcc, tiny modules built for known targets.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import pytest

import fp4doctor.probe as probe
from fp4doctor import facts, profile
from fp4doctor.doctor import Question, diagnose
from fp4doctor.facts import CompiledArchs
from fp4doctor.probe import archs, probe_host, with_compiled_archs
from fp4doctor.probe.archs import (
    FLAG_ARCH_SPECIFIC,
    FLAG_COMPRESS2,
    FLAG_FAMILY,
    FLAG_ZSTD,
    KIND_ELF,
    KIND_PTX,
    entries,
    locate,
    probe_compiled_archs,
    scan,
)
from fp4doctor.profile import kinds
from fp4doctor.profile.kinds.base import Context
from fp4doctor.profile.kinds.compiled_arch import CompiledArch, modules_read, runs_on
from fp4doctor.profile.schema import parse
from fp4doctor.profile.yamlnode import ProfileError

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
LINUX_64 = 0x11  # FATBIN_FLAG_64BIT | FATBIN_FLAG_LINUX, on every real entry
VLLM_C = "vllm/_C.abi3.so"

# --- FAKE ELF and fatbin bytes (the layout of the real ones; nothing here came from nvcc) --------


def fake_entry(
    kind: int, arch: int, flags: int = LINUX_64, payload: bytes = b"FAKE", header_size: int = 64
) -> bytes:
    """A FAKE fatbin entry: header (64 bytes, or longer like sm_100+ ones), payload, padding."""
    padded = payload + b"\0" * (-len(payload) % 8)
    head = struct.pack(
        "<HHIQIIHHIIIQQQ",
        kind, 0x0101, header_size, len(padded), len(payload), 0, 7, 1, arch, 0, 0, flags, 0,
        len(payload),
    )  # fmt: skip
    return head + b"\0" * (header_size - len(head)) + padded


def fake_container(*entries_: bytes) -> bytes:
    body = b"".join(entries_)
    return struct.pack("<IHHQ", archs.FATBIN_MAGIC, 1, 16, len(body)) + body


def fake_elf(sections: dict[str, bytes], elf_class: int = 2, endian: int = 1) -> bytes:
    """A FAKE ELF64 shared object holding only `sections` (and the name table)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    blobs = [*sections.values(), names]
    offset, layout, body = 64, [], b""
    for blob in blobs:
        layout.append((offset, len(blob)))
        body += blob + b"\0" * (-len(blob) % 8)
        offset += len(blob) + (-len(blob) % 8)
    headers = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    name_at = 1
    for name, (at, size) in zip([*sections, ".shstrtab"], layout, strict=True):
        kind = 3 if name == ".shstrtab" else 1
        headers.append(struct.pack("<IIQQQQIIQQ", name_at, kind, 2, 0, at, size, 0, 0, 8, 0))
        name_at += len(name) + 1
    ident = b"\x7fELF" + bytes([elf_class, endian, 1]) + b"\0" * 9
    ehdr = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, offset, 0, 64, 0, 0, 64, len(headers), len(headers) - 1
    )
    return ehdr + body + b"".join(headers)


def write(tmp_path: Path, data: bytes, name: str = "libfake.so") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


MIXED = fake_container(
    fake_entry(KIND_ELF, 80, LINUX_64 | FLAG_COMPRESS2),
    fake_entry(KIND_ELF, 90, LINUX_64 | FLAG_COMPRESS2 | FLAG_ARCH_SPECIFIC),
    fake_entry(KIND_ELF, 100, 0x0100_0000 | LINUX_64 | FLAG_ZSTD | FLAG_FAMILY, header_size=96),
    fake_entry(KIND_PTX, 120, LINUX_64, payload=b".version 8.8\n.target sm_120\n", header_size=80),
)


# --- real CUDA libraries installed on this host ------------------------------------------------


def cudnn_library() -> tuple[str, Path]:
    """(module key, path) of the largest libcudnn this host's nvidia-cudnn wheel installed."""
    for dist_name in ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12"):
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            continue
        libs = [f for f in dist.files or () if re.search(r"/libcudnn\w*\.so", f.as_posix())]
        paths = {f: Path(str(dist.locate_file(f))) for f in libs}
        existing = [f for f in libs if paths[f].is_file()]
        if existing:
            best = max(existing, key=lambda f: paths[f].stat().st_size)
            return f"{dist_name}/{best.name}", paths[best]
    pytest.skip("no nvidia-cudnn-cu12/-cu13 wheel installed: no real fatbin to read")


def find_cuobjdump() -> str | None:
    """A cuobjdump to compare with: on PATH, in the CUDA toolkit, or in Triton's wheel."""
    candidates = [shutil.which("cuobjdump")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates.append(os.path.join(home, "bin", "cuobjdump"))
    try:
        triton = metadata.distribution("triton")
        candidates.append(str(triton.locate_file("triton/backends/nvidia/bin/cuobjdump")))
    except metadata.PackageNotFoundError:
        pass
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def cuobjdump() -> str:
    found = find_cuobjdump()
    if found is None:
        pytest.skip("no cuobjdump on this host (CUDA toolkit or Triton's wheel) to compare with")
    return found


def cuobjdump_archs(tool: str, path: Path) -> tuple[list[str], list[str]]:
    """What cuobjdump --list-elf / --list-ptx say `path` carries, in this module's spelling.
    (cuobjdump names a family cubin by its base architecture: compare with `base_sass`.)"""
    found: list[list[str]] = []
    for flag, kind in (("--list-elf", "cubin"), ("--list-ptx", "ptx")):
        try:
            run = subprocess.run(
                [tool, flag, str(path)], capture_output=True, text=True, timeout=60
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"cuobjdump {flag} took over 60 s on {path.name}")
        if run.returncode != 0:
            pytest.skip(f"cuobjdump {flag} failed on {path.name}: {run.stderr.strip()[-200:]}")
        # "ELF file    1: name.1.sm_90a.cubin", "PTX file    1: name.1.sm_120f.ptx"
        names = set(re.findall(rf"\.((?:sm|compute)_\d+[af]?)\.{kind}\b", run.stdout))
        if kind == "ptx":
            names = {n.replace("sm_", "compute_") for n in names}
        else:
            names = {n.replace("compute_", "sm_") for n in names}
        found.append(sorted(names, key=archs.arch_order))
    return found[0], found[1]


def test_a_real_cudnn_library_is_read_plausibly() -> None:
    """What the scan reads, not how fast: a first read from a cold page cache took 9 s on the
    2-core host (benchmarks/startup_timeline.py times `probe_compiled_archs` in a real run)."""
    module, path = cudnn_library()
    result = scan(path)
    assert result.error is None
    for family in ("sm_80", "sm_90", "sm_100"):  # any variant: sm_90a, sm_100f
        assert any(re.fullmatch(family + "[af]?", a) for a in result.sass), result.sass
    assert all(re.fullmatch(r"sm_\d{2,3}[af]?", a) for a in result.sass)
    assert all(re.fullmatch(r"compute_\d{2,3}[af]?", a) for a in result.ptx)
    # The same through the probe, by module key, from the wheel's own file list.
    assert locate(module) == path
    by_key = probe_compiled_archs([module])[module]
    assert (by_key.sass, by_key.ptx, by_key.error) == (result.sass, result.ptx, None)
    assert by_key.path == str(path)


def base_sass(names: list[str]) -> list[str]:
    """SASS names as cuobjdump lists them: a family cubin (`sm_100f`) by its base (`sm_100`)."""
    return sorted({n.removesuffix("f") for n in names}, key=archs.arch_order)


def test_a_real_cudnn_library_matches_cuobjdump() -> None:
    _, path = cudnn_library()
    tool = cuobjdump()
    sass, ptx = cuobjdump_archs(tool, path)
    result = scan(path)
    assert (base_sass(result.sass), result.ptx) == (sass, ptx)


def test_the_scan_reads_headers_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = b"FAKE" * (1 << 18)  # a 1 MiB payload the scan must skip
    path = write(tmp_path, fake_elf({".nv_fatbin": fake_container(fake_entry(2, 90, payload=big))}))
    read = 0
    real_pread = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        nonlocal read
        data = real_pread(fd, n, offset)
        read += len(data)
        return data

    monkeypatch.setattr(archs.os, "pread", counting)
    assert scan(path).sass == ["sm_90"]
    assert read < 4096 < path.stat().st_size // 256


# --- FAKE modules: variants, compression, PTX only, several containers -------------------------


def test_variants_compression_and_longer_headers(tmp_path: Path) -> None:
    path = write(tmp_path, fake_elf({".nv_fatbin": MIXED}))
    result = scan(path)
    assert result == CompiledArchs(sass=["sm_80", "sm_90a", "sm_100f"], ptx=["compute_120"])
    found = list(entries(path))
    assert [e.compressed for e in found] == [True, True, True, False]
    assert [e.name for e in found] == ["sm_80", "sm_90a", "sm_100f", "compute_120"]


def test_a_ptx_only_module(tmp_path: Path) -> None:
    fatbin = fake_container(fake_entry(KIND_PTX, 90), fake_entry(KIND_PTX, 80))
    result = scan(write(tmp_path, fake_elf({".nv_fatbin": fatbin})))
    assert result == CompiledArchs(sass=[], ptx=["compute_80", "compute_90"])


def test_containers_padding_and_the_relocatable_section(tmp_path: Path) -> None:
    first = fake_container(fake_entry(KIND_ELF, 86))
    second = fake_container(fake_entry(KIND_ELF, 89), fake_entry(KIND_ELF, 86))
    relocatable = fake_container(fake_entry(KIND_PTX, 120), fake_entry(KIND_ELF, 120))
    sections = {".nv_fatbin": first + b"\0" * 24 + second, "__nv_relfatbin": relocatable}
    path = write(tmp_path, fake_elf(sections))
    # Device-link input is read, but it is not code the runtime loads: it does not count.
    assert [(e.name, e.section) for e in entries(path)][-2:] == [
        ("compute_120", "__nv_relfatbin"),
        ("sm_120", "__nv_relfatbin"),
    ]
    assert scan(path) == CompiledArchs(sass=["sm_86", "sm_89"])


def test_a_library_without_device_code_carries_nothing(tmp_path: Path) -> None:
    result = scan(write(tmp_path, fake_elf({".text": b"\x90" * 64})))
    assert result == CompiledArchs()


# --- FAKE malformed input: a value, never an exception -------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not an ELF file"),
        (b"#!/bin/sh\necho not a library\n", "not an ELF file"),
        (b"\x7fELF\x02\x01", "truncated ELF header"),
        (fake_elf({".nv_fatbin": MIXED}, elf_class=1), "a 32-bit ELF file"),
        (fake_elf({".nv_fatbin": MIXED}, endian=2), "big-endian"),
        (fake_elf({".nv_fatbin": b"FAKE, not a fatbin container"}), "not a fatbin container"),
    ],
    ids=["empty", "text", "short-header", "32-bit", "big-endian", "garbage-section"],
)
def test_malformed_input_becomes_an_error(tmp_path: Path, data: bytes, message: str) -> None:
    result = scan(write(tmp_path, data))
    assert result.sass == [] and result.ptx == []
    assert message in (result.error or "")


def test_an_entry_past_its_container_is_truncation(tmp_path: Path) -> None:
    good = fake_entry(KIND_ELF, 80)
    bad = bytearray(fake_entry(KIND_ELF, 90))
    struct.pack_into("<Q", bad, 8, 1 << 40)  # a payload size far past the container
    fatbin = fake_container(good, bytes(bad))
    result = scan(write(tmp_path, fake_elf({".nv_fatbin": fatbin})))
    assert result.sass == ["sm_80"]  # what was read before the bad entry is kept
    assert "runs past its container" in (result.error or "")


def test_every_truncation_of_a_module_is_a_value(tmp_path: Path) -> None:
    data = fake_elf({".nv_fatbin": MIXED + MIXED})
    path = tmp_path / "libcut.so"
    errors = set()
    for length in range(len(data)):
        path.write_bytes(data[:length])
        result = scan(path)  # never raises
        if result.error:
            errors.add(result.error.split(":")[0])
    assert scan(write(tmp_path, data)).error is None
    assert "not an ELF file" in errors and any(e.startswith("truncated") for e in errors)


def test_unreadable_paths(tmp_path: Path) -> None:
    assert "cannot read" in (scan(tmp_path / "missing.so").error or "")
    assert "cannot read" in (scan(tmp_path).error or "")


def test_module_keys_that_name_nothing() -> None:
    found = probe_compiled_archs(["no-such-dist-fp4doctor/x.so", "pytest/no_such_file.so", "x"])
    assert found["no-such-dist-fp4doctor/x.so"].error == "no-such-dist-fp4doctor is not installed"
    assert "installed no file no_such_file.so" in (found["pytest/no_such_file.so"].error or "")
    assert "is not DIST/PATH" in (found["x"].error or "")


# --- facts: the new mapping round-trips, and old snapshots still load ---------------------------


def with_archs(name: str, modules: dict[str, CompiledArchs]) -> facts.HostFacts:
    """A fixture host with `compiled_archs` added, as the probe would have filled it."""
    return dataclasses.replace(facts.load(HOSTS / f"{name}.json"), compiled_archs=modules)


def test_facts_round_trip_and_old_snapshots_load() -> None:
    old = facts.load(HOSTS / "rtx5090.json")
    assert old.compiled_archs == {}
    assert "compiled_archs" not in json.loads(facts.dumps(old))  # old snapshots: byte for byte
    host = with_archs("rtx5090", {VLLM_C: CompiledArchs(["sm_90"], [], None, "/x/_C.so")})
    text = facts.dumps(host)
    assert json.loads(text)["compiled_archs"] == {
        VLLM_C: {"sass": ["sm_90"], "ptx": [], "error": None, "path": "/x/_C.so"}
    }
    assert facts.loads(text) == host
    bad = json.loads(text)
    bad["compiled_archs"][VLLM_C]["sass"] = "sm_90"
    with pytest.raises(facts.FactsError, match=r"compiled_archs\.vllm/_C\.abi3\.so\.sass"):
        facts.from_dict(bad)


def test_redaction_scrubs_the_scanned_path() -> None:
    home = "/home/alice"
    archs_ = CompiledArchs(["sm_90"], [], None, f"{home}/venv/vllm/_C.abi3.so")
    redacted = facts.redact(with_archs("h200", {VLLM_C: archs_}), home=home)
    assert redacted.compiled_archs[VLLM_C].path == "~/venv/vllm/_C.abi3.so"


# --- the probe scans only what a rule names ------------------------------------------------------


def test_the_probe_scans_only_the_modules_asked_for() -> None:
    module, _ = cudnn_library()
    assert probe_host().compiled_archs == {}
    host = probe_host(modules=[module])
    assert module in host.compiled_archs and host.compiled_archs[module].error is None
    assert "compiled_archs" not in host.probe_errors
    again = with_compiled_archs(probe_host(), [module])
    assert again.compiled_archs[module] == host.compiled_archs[module]
    assert with_compiled_archs(again, [module]) is again  # nothing left to scan


def test_a_failing_scan_is_a_recorded_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(modules: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(probe, "probe_compiled_archs", broken)
    host = probe_host(modules=["vllm/_C.abi3.so"])
    assert host.probe_errors["compiled_archs"] == "OSError: disk on fire"
    assert host.compiled_archs == {}
    later = with_compiled_archs(probe_host(), ["vllm/_C.abi3.so"])
    assert later.probe_errors["compiled_archs"] == "OSError: disk on fire"


# --- the kind: which code runs on which GPU ---------------------------------------------------


@pytest.mark.parametrize(
    ("sass", "ptx", "cc", "runs"),
    [
        (["sm_80", "sm_90", "sm_100"], [], 120, None),  # sm_100 SASS never runs on sm_120
        (["sm_80", "sm_90", "sm_100"], ["compute_90"], 120, "compute_90"),  # PTX JITs forward
        (["sm_80"], [], 86, "sm_80"),  # an older minor of the same major
        (["sm_86"], [], 80, None),  # never a newer minor
        (["sm_100"], [], 103, "sm_100"),
        (["sm_100f"], [], 103, "sm_100f"),  # family: 10.x, x >= 0
        (["sm_100a"], [], 103, None),  # arch-specific: 10.0 only
        (["sm_100a"], [], 100, "sm_100a"),
        (["sm_90a", "sm_100"], [], 90, "sm_90a"),
        (["sm_100", "sm_100f"], [], 110, None),  # Thor is 11.0, another major
        (["sm_120"], [], 121, "sm_120"),  # GB10
        (["sm_120a"], [], 121, None),
        ([], ["compute_90a"], 100, None),  # arch-specific PTX: only for 9.0
        ([], ["compute_100f"], 103, "compute_100f"),
        ([], ["compute_100f"], 120, None),
        ([], ["compute_120"], 100, None),  # PTX never runs backwards
        (["sm_90"], ["compute_80"], 90, "sm_90"),  # SASS before PTX
    ],
)
def test_which_code_runs_on_which_gpu(
    sass: list[str], ptx: list[str], cc: int, runs: str | None
) -> None:
    assert runs_on(CompiledArchs(sass, ptx), cc) == runs


def context(host: facts.HostFacts) -> Context:
    return Context(facts=host, versions=host.packages.versions, env={})


def test_the_kind_fails_an_sm120_gpu_for_a_module_built_without_it() -> None:
    host = with_archs("rtx5090", {VLLM_C: CompiledArchs(["sm_80", "sm_90", "sm_100"], [])})
    kind, ctx = CompiledArch(VLLM_C), context(host)
    check = kind.check(ctx, host.gpus[0])
    assert not check.ok
    assert check.measured == (
        "vllm/_C.abi3.so has SASS for sm_80, sm_90 and sm_100 and no PTX; GPU 0 is sm_120"
    )
    assert check.required == "vllm/_C.abi3.so with SASS or PTX for sm_120"
    assert (
        kind.default_fix(ctx) == "install a build of vllm for sm_120 (e.g. the cu128/cu129 wheel)"
    )
    assert kind.per_gpu and kind.packages() == ("vllm",)


def test_the_kind_passes_where_the_module_was_built_for_the_gpu() -> None:
    built = CompiledArchs(["sm_80", "sm_90", "sm_100", "sm_120"], ["compute_90"])
    for name in ("rtx5090", "b200", "h200", "a100", "gb10", "b300"):
        host = with_archs(name, {VLLM_C: built})
        host = dataclasses.replace(
            host,
            packages=dataclasses.replace(host.packages, versions={"vllm": "0.22.0"}),
        )
        for gpu in host.gpus:
            check = CompiledArch(VLLM_C).check(context(host), gpu)
            assert check.ok, (name, check.measured)
            assert check.measured.endswith(f"GPU {gpu.index} is sm_{gpu.cc}")


@pytest.mark.parametrize(
    ("archs_", "versions", "ok", "measured"),
    [
        # What could not be looked at is said ("not read": a skip, not a pass; issue 40): an old
        # snapshot, a file the install does not list (an editable build, a renamed module), a
        # distribution not installed.
        (None, {"vllm": "0.22.0"}, True, "vllm/_C.abi3.so not read: the facts carry no scan"),
        (
            CompiledArchs(error="vllm 0.22.0 installed no file _C.abi3.so"),
            {"vllm": "0.22.0"},
            True,
            "not read: vllm 0.22.0 installed no file _C.abi3.so",
        ),
        (CompiledArchs(["sm_120"]), {}, True, "not read: vllm is not installed"),
        # A module that is there and wrong fails.
        (
            CompiledArchs(error="not an ELF file", path="/x/_C.abi3.so"),
            {"vllm": "0.22.0"},
            False,
            "could not be read: not an",
        ),
        (CompiledArchs(path="/x/_C.abi3.so"), {"vllm": "0.22.0"}, False, "carries no CUDA kernels"),
    ],
)
def test_the_kind_fails_only_what_it_read(
    archs_: CompiledArchs | None, versions: dict[str, str], ok: bool, measured: str
) -> None:
    host = facts.load(HOSTS / "rtx5090.json")
    host = dataclasses.replace(
        host,
        compiled_archs={} if archs_ is None else {VLLM_C: archs_},
        packages=dataclasses.replace(host.packages, versions=versions),
    )
    check = CompiledArch(VLLM_C).check(context(host), host.gpus[0])
    assert check.ok is ok and measured in check.measured
    assert check.read is ("not read" not in measured)


@pytest.mark.parametrize(
    ("sass", "ptx", "cc", "runs"),
    [
        (["sm_120"], ["compute_120"], 120, None),  # '12.0+PTX': no FP4 instructions anywhere
        (["sm_120", "sm_120a"], [], 120, "sm_120a"),
        (["sm_120f"], [], 121, "sm_120f"),  # the family covers GB10
        (["sm_120a"], [], 121, None),  # arch-specific: 12.0 only
        (["sm_100a"], [], 103, None),  # vLLM issue #56548's build on a B300
        (["sm_100f"], ["compute_100f"], 103, "sm_100f"),
        ([], ["compute_120a"], 120, "compute_120a"),
    ],
)
def test_variant_specific_counts_only_arch_and_family_code(
    sass: list[str], ptx: list[str], cc: int, runs: str | None
) -> None:
    assert runs_on(CompiledArchs(sass, ptx), cc, specific=True) == runs


def test_a_ptx_plus_build_fails_variant_specific_and_says_how_to_rebuild() -> None:
    host = with_archs("rtx5090", {VLLM_C: CompiledArchs(["sm_120"], ["compute_120"], None, "/x")})
    host = dataclasses.replace(
        host, packages=dataclasses.replace(host.packages, versions={"vllm": "0.20.1"})
    )
    plain, specific = CompiledArch(VLLM_C), CompiledArch(VLLM_C, specific=True)
    assert plain.check(context(host), host.gpus[0]).ok  # sm_120 runs the other kernels
    check = specific.check(context(host), host.gpus[0])
    assert not check.ok
    assert check.required == "vllm/_C.abi3.so with sm_120a or family (f) code for sm_120"
    assert "TORCH_CUDA_ARCH_LIST='12.0a'" in (specific.default_fix(context(host)) or "")


def test_the_kind_without_a_gpu_says_it_did_not_check() -> None:
    """No GPU is the host's own finding (and the compute-capability rules'): the scan has
    nothing to compare with, and says so instead of failing a second time."""
    host = facts.load(HOSTS / "cpu.json")
    installed = replace(host, packages=replace(host.packages, versions={"vllm": "0.22.0"}))
    check = CompiledArch(VLLM_C).check(context(installed), None)
    assert (check.ok, check.read) == (True, False)
    assert check.measured == f"{VLLM_C} not read: no GPU to check it for"


# --- the kind in a profile: parsed, registered, its modules scanned, judged --------------------

PROFILE = textwrap.dedent(
    """\
    schema: 1
    target: archdemo
    title: Arch demo
    engine:
      package: vllm
      newest_known: "0.22.0"
    conditions:
      built:
        - compiled_arch: vllm/_C.abi3.so
          source: test
    backends:
      cutlass:
        summary: CUTLASS kernels of vllm/_C
        native: true
        requires:
          - use: built
      marlin:
        summary: weight-only
        native: false
        requires:
          - any_of:
              - compiled_arch: vllm/_moe_C.abi3.so
              - compute_capability: ">=8.0"
            id: either
    eras:
      - versions: ">=0.1"
        source: test
        knobs: []
        auto:
          - backend: cutlass
          - backend: marlin
    """
)


def test_the_kind_is_registered_parsed_and_its_modules_found(tmp_path: Path) -> None:
    assert kinds.get("compiled_arch") is CompiledArch
    prof = parse(PROFILE, "archdemo.yaml", profile.load_module)
    specific = PROFILE.replace(
        "- compiled_arch: vllm/_C.abi3.so\n",
        "- compiled_arch: vllm/_C.abi3.so\n      variant: specific\n",
    )
    found = parse(specific, "archdemo.yaml", profile.load_module).requirements()
    kinds_ = [c.kind for r in found for c in (r, *r.children)]
    assert CompiledArch(VLLM_C, specific=True) in kinds_
    with pytest.raises(
        ProfileError, match=r"archdemo\.yaml:10: .*variant.* not one of: any, specific"
    ):
        parse(
            specific.replace("variant: specific", "variant: sm_120a"),
            "archdemo.yaml",
            profile.load_module,
        )
    assert modules_read(prof) == ["vllm/_C.abi3.so", "vllm/_moe_C.abi3.so"]
    assert "vllm" in prof.packages()
    for bad in ("vllm", "vllm/", "/_C.so", "vllm/../x.so"):
        with pytest.raises(ProfileError, match="should be DIST/PATH"):
            parse(PROFILE.replace("vllm/_C.abi3.so", bad), "archdemo.yaml", profile.load_module)


def test_diagnose_refuses_the_backend_before_load(tmp_path: Path) -> None:
    prof_path = tmp_path / "archdemo.yaml"
    prof_path.write_text(PROFILE, encoding="utf-8")
    host = with_archs("rtx5090", {VLLM_C: CompiledArchs(["sm_80", "sm_90", "sm_100"], [])})
    facts_path = tmp_path / "host.json"
    facts_path.write_text(facts.dumps(host), encoding="utf-8")
    question = Question(target="archdemo", profiles=(str(prof_path),), facts_file=str(facts_path))
    report = diagnose(question)
    assert not report.families[0].evaluation.valid("cutlass")
    by_id = {f.id: f for f in report.findings()}
    failed = by_id["backend.cutlass.compiled_arch.gpu0"]
    assert failed.reason.startswith(
        "vllm/_C.abi3.so has SASS for sm_80, sm_90 and sm_100 and no PTX; GPU 0 is sm_120"
    )
    assert failed.fix == "install a build of vllm for sm_120 (e.g. the cu128/cu129 wheel)"
    assert by_id["backend.marlin.either.gpu0"].status.value == "pass"
    # Left alone the engine would pick cutlass: said before any kernel loads.
    assert "picks cutlass by itself, which cannot run here" in by_id["resolve.engine_auto"].reason


# --- a GPU host with nvcc: tiny modules built for known targets --------------------------------


def nvcc() -> str:
    from fp4doctor.probe.toolchain import probe_toolchain

    found = probe_toolchain(os.environ).nvcc_path
    if not found:
        pytest.skip("no nvcc on this host")
    return found


TINY = "__global__ void tiny(float *x) { x[threadIdx.x] += 1.0f; }\n"
# The same kernel and a host function that launches it and returns the CUDA error (0: ran;
# 209: cudaErrorNoKernelImageForDevice). nvcc links the runtime statically: only the driver needed.
LAUNCHER = TINY + textwrap.dedent(
    """\
    extern "C" int launch_tiny(void) {
        float *x = 0;
        cudaError_t e = cudaMalloc(&x, 32 * sizeof(float));
        if (e != cudaSuccess) return (int)e;
        tiny<<<1, 32>>>(x);
        e = cudaGetLastError();
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        cudaFree(x);
        return (int)e;
    }
    """
)
NO_KERNEL_IMAGE = 209


def build(tmp_path: Path, *gencode: str, source_text: str = TINY) -> Path:
    source = tmp_path / f"tiny_{abs(hash((gencode, source_text)))}.cu"
    source.write_text(source_text)
    out = tmp_path / f"libtiny_{abs(hash((gencode, source_text)))}.so"
    command = [nvcc(), *gencode, "-shared", "-Xcompiler", "-fPIC", "-o", str(out), str(source)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        pytest.skip(f"this nvcc cannot build {' '.join(gencode)}: {run.stderr.strip()[-300:]}")
    return out


@pytest.mark.gpu
def test_a_module_built_for_sm90_only(tmp_path: Path) -> None:
    path = build(tmp_path, "-gencode", "arch=compute_90,code=sm_90")
    assert scan(path) == CompiledArchs(sass=["sm_90"], ptx=[])


def launch(path: Path) -> int:
    """The CUDA error of launching the module's kernel on GPU 0, in a child process (a CUDA fault
    must not take the test run with it)."""
    code = f"import ctypes; print(ctypes.CDLL({str(path)!r}).launch_tiny())"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0")}
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert run.returncode == 0, run.stderr[-500:]
    return int(run.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
def test_the_scan_predicts_which_module_the_gpu_runs(tmp_path: Path) -> None:
    """Static and live agree: a module built for this GPU runs, one built for another major
    fails with 'no kernel image', and `runs_on` said so from the fatbin alone."""
    from fp4doctor.probe.gpus import probe_gpus

    gpus = probe_gpus(os.environ).gpus
    if not gpus:
        pytest.skip("NVML lists no GPU")
    cc = gpus[0].cc
    other = 80 if cc // 10 != 8 else 90  # SASS of another major never runs
    own = build(tmp_path, "-gencode", f"arch=compute_{cc},code=sm_{cc}", source_text=LAUNCHER)
    foreign = build(
        tmp_path, "-gencode", f"arch=compute_{other},code=sm_{other}", source_text=LAUNCHER
    )
    assert runs_on(scan(own), cc) == f"sm_{cc}"
    assert runs_on(scan(foreign), cc) is None
    assert launch(own) == 0
    assert launch(foreign) == NO_KERNEL_IMAGE


# Building needs nvcc only, no GPU: these run wherever a CUDA toolkit is found (CUDA_HOME, PATH).
@pytest.mark.parametrize(
    ("gencode", "sass", "ptx"),
    [
        ("arch=compute_90a,code=sm_90a", ["sm_90a"], []),
        ("arch=compute_100a,code=[sm_100a,compute_100a]", ["sm_100a"], ["compute_100a"]),
        ("arch=compute_100f,code=[sm_100f,compute_100f]", ["sm_100f"], ["compute_100f"]),
        ("arch=compute_120f,code=sm_120f", ["sm_120f"], []),
        ("arch=compute_90,code=compute_90", [], ["compute_90"]),
    ],
)
def test_variants_built_by_nvcc_match_cuobjdump(
    tmp_path: Path, gencode: str, sass: list[str], ptx: list[str]
) -> None:
    path = build(tmp_path, "-gencode", gencode)
    found = [(e.name, hex(e.flags)) for e in entries(path)]
    assert (scan(path).sass, scan(path).ptx) == (sass, ptx), found
    tool = shutil.which("cuobjdump", path=os.path.dirname(nvcc())) or find_cuobjdump()
    if tool:  # the toolkit's own reader agrees, where it is installed
        assert cuobjdump_archs(tool, path) == (base_sass(sass), ptx), found


def fake_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, module: str, record: str, sm: int
) -> Path:
    """A FAKE distribution `name` 0.1 on sys.path: its package holds a CUDA module at `module`
    (a fatbin with one sm_`sm` cubin), and its RECORD says `record`."""
    package = tmp_path / name.replace("-", "_")
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('the probe must not import me')\n")
    built = package / module
    built.parent.mkdir(parents=True, exist_ok=True)
    built.write_bytes(fake_elf({".nv_fatbin": fake_container(fake_entry(KIND_ELF, sm))}))
    info = tmp_path / f"{package.name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "RECORD").write_text(record)
    monkeypatch.syspath_prepend(str(tmp_path))
    return built


def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A FAKE engine distribution on sys.path, built in place: its .so sits in the package
    directory and its RECORD omits it (as `pip install -e .` leaves it)."""
    record = "fp4doctor_fake_engine/__init__.py,,\n"
    return fake_distribution(
        tmp_path, monkeypatch, "fp4doctor-fake-engine", "_C.abi3.so", record, 120
    )


def test_an_editable_build_is_found_in_its_package_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = fake_engine(tmp_path, monkeypatch)
    assert locate("fp4doctor-fake-engine/_C.abi3.so") == built
    found = probe_compiled_archs(["fp4doctor-fake-engine/_C.abi3.so"])
    assert found["fp4doctor-fake-engine/_C.abi3.so"].sass == ["sm_120"]
    assert "installed no file" in (
        probe_compiled_archs(["fp4doctor-fake-engine/_D.so"])["fp4doctor-fake-engine/_D.so"].error
        or ""
    )


# --- `fp4doctor probe` scans what the installed engine's profile names ------------------------


def test_the_profiles_are_found_where_the_profile_package_finds_them() -> None:
    assert archs.profiles_dir() == profile.builtin_dir()


def test_engine_modules_come_from_the_shipped_profiles_text() -> None:
    assert archs.engine_modules([]) == []
    assert archs.engine_modules(["sglang", "tensorrt-llm"]) == []  # none of their rules name one
    # that is installed: FlashInfer's cubins (profiles/common/flashinfer.yaml) are read only
    # where flashinfer-cubin is (issue 40: every binary a backend needs).
    cubins = archs.engine_modules(["sglang", "flashinfer-cubin"])
    assert cubins and all(m.startswith("flashinfer-cubin/") for m in cubins)
    from_text = archs.engine_modules(["vllm", "flashinfer-cubin"])
    assert sorted(from_text) == sorted(modules_read(profile.load("vllm")))  # the parsed profile
    assert VLLM_C in from_text
    assert archs.engine_modules(["vllm"]) == [m for m in from_text if m.startswith("vllm/")]


def test_probe_scans_the_installed_engines_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_engine(tmp_path, monkeypatch)
    shipped = tmp_path / "profiles"
    (shipped / "common").mkdir(parents=True)
    (shipped / "common" / "kernels.yaml").write_text(
        "conditions:\n  built:\n    - compiled_arch: fp4doctor-fake-engine/_D.so\n"
    )
    (shipped / "fake.yaml").write_text(
        "schema: 1\nengine:\n  package: fp4doctor_fake_engine\n  newest_known: '0.1'\n"
        "include: [kernels]\nbackends:\n  x:\n    requires:\n"
        "      - compiled_arch: 'fp4doctor-fake-engine/_C.abi3.so'  # quoted, commented\n"
    )
    monkeypatch.setattr(archs, "profiles_dir", lambda: shipped)
    host = probe_host(packages=["fp4doctor-fake-engine"])
    assert host.compiled_archs["fp4doctor-fake-engine/_C.abi3.so"].sass == ["sm_120"]
    assert "installed no file" in (host.compiled_archs["fp4doctor-fake-engine/_D.so"].error or "")
    assert "fp4doctor-fake-engine/_C.abi3.so" in json.loads(facts.dumps(host))["compiled_archs"]


def test_the_plain_record_reading_agrees_with_importlib_metadata() -> None:
    """`installed_files` (RECORD read as text, no importlib.metadata imports) lists what
    `importlib.metadata`'s `files()` lists, for every real distribution installed here that it
    answers for; the test venv holds flashinfer-python's 14,000-line RECORD among them."""
    import importlib.metadata

    from fp4doctor.probe.packages import installed_files

    answered = 0
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        listed = installed_files(name)
        if listed is None:
            continue
        directory, files = listed
        first = next(iter(importlib.metadata.distributions(name=name)))
        assert Path(directory) == Path(str(first._path))  # type: ignore[attr-defined]
        # Python 3.12's files() leaves out the files that do not exist (a script that
        # `pip install --target` did not put in bin/): compare the ones that do.
        base = Path(directory).parent
        theirs = [f.as_posix() for f in first.files or () if (base / f).exists()]
        assert [f for f in files if (base / f).exists()] == theirs, name
        answered += 1
    assert answered >= 5


def test_a_quoted_record_path_is_left_to_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RECORD line the csv module must read (a comma in a path, quoted) is not read as plain
    text: `installed_files` says so (None) and `locate` asks importlib.metadata, which finds it."""
    from fp4doctor.probe.packages import installed_files

    record = '"fp4doctor_fake_quoted/odd,name/_C.so",,\n'
    built = fake_distribution(
        tmp_path, monkeypatch, "fp4doctor-fake-quoted", "odd,name/_C.so", record, 100
    )
    assert installed_files("fp4doctor-fake-quoted") is None
    assert locate("fp4doctor-fake-quoted/_C.so") == built
    with pytest.raises(LookupError, match="not installed"):
        installed_files("fp4doctor-fake-absent")
