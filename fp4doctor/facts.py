"""Host facts: what the probe saw, as plain data that round-trips through versioned JSON.

Everything after the probe works on a `HostFacts`, whether it came from this host or from a
snapshot file (`--facts FILE`), so every stage can be tested offline from fixtures.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from fp4doctor.textfile import UnreadableText, read_text

SCHEMA_VERSION = 1


class FactsError(Exception):
    """A facts snapshot that cannot be used: unreadable, malformed, or from a newer fp4doctor."""


# NVML's states that we tell apart, each with its own fix (see probe/gpus.py).
NVML_OK = "ok"
NVML_LIBRARY_NOT_FOUND = "library_not_found"
NVML_DRIVER_NOT_LOADED = "driver_not_loaded"
NVML_DRIVER_MISMATCH = "driver_library_mismatch"
NVML_NO_GPU = "no_gpu"
NVML_ERROR = "error"


@dataclass(frozen=True)
class Gpu:
    """One GPU as the engine would see it (index after CUDA_VISIBLE_DEVICES)."""

    index: int
    name: str
    cc_major: int
    cc_minor: int
    memory_total_mib: int | None = None
    uuid: str | None = None
    nvml_index: int | None = None  # index in NVML's own enumeration, before CUDA_VISIBLE_DEVICES

    @property
    def cc(self) -> int:
        """Compute capability as FlashInfer and the engines write it: 10.0 -> 100, 12.1 -> 121."""
        return self.cc_major * 10 + self.cc_minor

    @property
    def cc_text(self) -> str:
        return f"{self.cc_major}.{self.cc_minor}"


@dataclass(frozen=True)
class NvmlFacts:
    """What NVML said: its status, and the driver facts when it answered."""

    status: str = NVML_ERROR
    error: str | None = None
    fix: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # the CUDA version the driver supports, "13.0"
    library_path: str | None = None


def cudnn_version_text(encoded: int) -> str:
    """cuDNN's integer version (`cudnnGetVersion`, `cudnn.backend_version()`) as text: cuDNN 9
    encodes major*10000 + minor*100 + patch (91002 -> "9.10.2"), cuDNN 8 and older
    major*1000 + minor*100 + patch (8907 -> "8.9.7")."""
    if encoded < 10000:
        major, rest = divmod(encoded, 1000)
    else:
        major, rest = divmod(encoded, 10000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


@dataclass(frozen=True)
class CudnnLibrary:
    """One libcudnn file and the version `cudnnGetVersion` reported from it."""

    path: str | None = None
    version: int | None = None  # cuDNN's integer encoding, 9.10.2 -> 91002
    origin: str | None = None  # "nvidia-cudnn-cu12 wheel", "system (ldconfig)", "torch/lib"
    error: str | None = None

    @property
    def version_text(self) -> str | None:
        return None if self.version is None else cudnn_version_text(self.version)


@dataclass(frozen=True)
class CudnnFacts:
    """The cuDNN that cudnn-frontend would load, and the one torch bundles or links."""

    frontend: CudnnLibrary = field(default_factory=CudnnLibrary)
    torch: CudnnLibrary | None = None  # None when torch uses the same file, or has none


@dataclass(frozen=True)
class PackageFacts:
    """Installed distributions (by canonical name) and torch's build facts."""

    versions: dict[str, str] = field(default_factory=dict)  # only installed ones
    torch_cuda: str | None = None  # torch.version.cuda, read from torch/version.py's text
    torch_git_version: str | None = None
    torch_hip: str | None = None
    errors: dict[str, str] = field(default_factory=dict)  # name -> why it could not be read

    def version(self, name: str) -> str | None:
        return self.versions.get(canonical_name(name))


# A field with this metadata is left out of the JSON while empty: snapshots from before it
# existed round-trip byte for byte, and read back with its default.
OMIT_EMPTY = {"omit_empty": True}


@dataclass(frozen=True)
class ToolchainFacts:
    """What FlashInfer's JIT would compile with."""

    cuda_home: str | None = None
    cuda_home_source: str | None = None  # "CUDA_HOME", "CUDA_PATH", "PATH", "/usr/local/cuda"
    nvcc_path: str | None = None
    nvcc_version: str | None = None  # "12.8"
    ninja_path: str | None = None
    # The nvcc on PATH itself (`shutil.which`), which vLLM before 0.32 looks for whatever
    # CUDA_HOME says; None when none is (or the snapshot predates it: probe/toolchain.py).
    nvcc_on_path: str | None = field(default=None, metadata=OMIT_EMPTY)
    # The ptxas Triton assembles with (fp4doctor.probe.triton): below compute capability 10.0,
    # and from it; None when Triton is not installed.
    triton_ptxas_path: str | None = field(default=None, metadata=OMIT_EMPTY)
    triton_ptxas_version: str | None = field(default=None, metadata=OMIT_EMPTY)  # "12.8"
    triton_ptxas_blackwell_path: str | None = field(default=None, metadata=OMIT_EMPTY)
    triton_ptxas_blackwell_version: str | None = field(default=None, metadata=OMIT_EMPTY)
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CompiledArchs:
    """The GPU code one CUDA module carries, read from its fatbin (probe/archs.py)."""

    sass: list[str] = field(default_factory=list)  # "sm_90", "sm_90a", "sm_100f"
    ptx: list[str] = field(default_factory=list)  # "compute_90"
    error: str | None = None  # why the module could not be found or read
    path: str | None = None  # the file scanned


@dataclass(frozen=True)
class CudartLibrary:
    """One libcudart.so.N file the process could load, and where it was found (probe/cudart.py)."""

    major: int  # 12 for libcudart.so.12
    path: str
    origin: str  # one of CUDART_ORIGINS

    @property
    def on_loader_path(self) -> bool:
        """Found where `dlopen("libcudart.so.N")` looks by itself (LD_LIBRARY_PATH, ld.so.cache);
        a wheel's or the toolkit's copy counts only when something loads it first."""
        return self.origin in (CUDART_LD_LIBRARY_PATH, CUDART_LDCONFIG)


CUDART_LD_LIBRARY_PATH = "LD_LIBRARY_PATH"
CUDART_LDCONFIG = "ldconfig"  # /etc/ld.so.cache
CUDART_WHEEL = "wheel"  # nvidia-cuda-runtime(-cu12) in site-packages
CUDART_TOOLKIT = "toolkit"  # CUDA_HOME/lib64
CUDART_ORIGINS = (CUDART_LD_LIBRARY_PATH, CUDART_LDCONFIG, CUDART_WHEEL, CUDART_TOOLKIT)


@dataclass(frozen=True)
class CudartFacts:
    """Every libcudart.so.N the probe found (none is a finding too); `error` when it could not
    look everywhere."""

    libraries: list[CudartLibrary] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class PrebuiltKernels:
    """One installed package of prebuilt FlashInfer JIT modules (flashinfer-jit-cache), read from
    its RECORD: the modules it ships, and the GPU code of those the cold-start rules name."""

    dist: str
    version: str
    modules: list[str] = field(default_factory=list)  # "fp4_gemm_cutlass_sm120"
    archs: dict[str, CompiledArchs] = field(default_factory=dict)  # the FP4 modules, scanned


@dataclass(frozen=True)
class AutotuneFile:
    """One autotune cache file an engine would read, and FlashInfer's `_metadata` in it."""

    path: str  # relative to the autotune root
    metadata: dict[str, str] = field(default_factory=dict)  # flashinfer_version, gpu, cuda_version
    entries: int | None = None  # tuned configurations, `_metadata` not counted
    error: str | None = None  # why it could not be read


@dataclass(frozen=True)
class ColdStartFacts:
    """What decides whether the first start-up compiles or autotunes (fp4doctor/coldstart/):
    FlashInfer's JIT workspace and the modules built there, the prebuilt modules installed,
    and the engine's persistent autotune cache. Directories and metadata only."""

    flashinfer_cache_dir: str | None = None  # $FLASHINFER_WORKSPACE_BASE (or ~)/.cache/flashinfer
    # "<flashinfer version>/<arch key>" -> the modules built there (cached_ops/<m>/<m>.so)
    built: dict[str, list[str]] = field(default_factory=dict)
    prebuilt: list[PrebuiltKernels] = field(default_factory=list)
    autotune_root: str | None = None  # vLLM's FlashInfer autotune cache directory
    autotune_files: list[AutotuneFile] = field(default_factory=list)
    # FlashInfer's managed autotune store (autotune_v2): <root>/v2/<environment hash>/
    managed_root: str | None = None
    managed_stores: list[AutotuneFile] = field(default_factory=list)  # their manifest.json
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HostFacts:
    """Everything the rules need to know about one host."""

    schema_version: int = SCHEMA_VERSION
    fp4doctor_version: str = ""
    captured_at: str | None = None  # ISO 8601, UTC
    hostname: str | None = None
    python_version: str | None = None
    platform: str | None = None
    # A synthetic fixture says so here, with what it stands for; a real capture leaves it None.
    synthetic: str | None = None
    nvml: NvmlFacts = field(default_factory=NvmlFacts)
    gpus: list[Gpu] = field(default_factory=list)
    cuda_visible_devices: str | None = None  # the raw value, when set
    packages: PackageFacts = field(default_factory=PackageFacts)
    cudnn: CudnnFacts = field(default_factory=CudnnFacts)
    toolchain: ToolchainFacts = field(default_factory=ToolchainFacts)
    env: dict[str, str] = field(default_factory=dict)  # FP4-relevant variables; secrets redacted
    probe_errors: dict[str, str] = field(default_factory=dict)  # probe name -> failure reason
    # The CUDA modules the profile's `compiled_arch` rules name ("vllm/_C.abi3.so"), scanned.
    compiled_archs: dict[str, CompiledArchs] = field(default_factory=dict, metadata=OMIT_EMPTY)
    # The libcudart majors the process could load; None in snapshots from before the probe had it.
    cudart: CudartFacts | None = field(default=None, metadata=OMIT_EMPTY)
    # The JIT and autotune caches on disk; None in snapshots from before it was probed.
    cold_start: ColdStartFacts | None = field(default=None, metadata=OMIT_EMPTY)


REDACTED = "<redacted>"


@functools.cache  # one diagnosis asks for the same few names a thousand times
def canonical_name(name: str) -> str:
    """PEP 503 normalisation, so `Flashinfer_Python` and `flashinfer-python` are one key."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


# --- JSON round trip -------------------------------------------------------------------------


def to_dict(obj: Any) -> Any:
    """A dataclass tree as JSON-ready data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: to_dict(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if getattr(obj, f.name) or not f.metadata.get("omit_empty")
        }
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


def dumps(facts: HostFacts) -> str:
    return json.dumps(to_dict(facts), indent=2, sort_keys=False) + "\n"


MAX_GPUS = 1024
"""The GPUs one snapshot may hold: one host's (the largest single systems have 72 to 576 GPUs
in one NVLink domain, each node of which is still its own host). A snapshot with more is refused
(FactsError: exit 3, "no verdict"), so that a crafted file cannot stall a fleet run; judging is
linear in the GPUs up to it (docs/reliability.md)."""


# What every `check --json` report holds at its top (schemas/report-v1 and v2), no snapshot.
_REPORT_KEYS = frozenset(("outcome", "exit_code", "findings"))


def from_dict(data: Any, source: str = "<facts>") -> HostFacts:
    """Build `HostFacts` from parsed JSON, with a clear error naming the bad key."""
    if not isinstance(data, dict):
        raise FactsError(f"{source}: expected a JSON object at the top, got {_kind(data)}")
    if data.keys() >= _REPORT_KEYS:
        raise FactsError(
            f"{source}: a report (`fp4doctor check --json`), not a facts snapshot: --facts "
            "takes what `fp4doctor probe --json` writes"
        )
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise FactsError(f"{source}: missing or non-integer 'schema_version'")
    if version > SCHEMA_VERSION:
        raise FactsError(
            f"{source}: schema_version {version} is newer than this fp4doctor understands "
            f"({SCHEMA_VERSION}); upgrade fp4doctor to read it"
        )
    if version < 1:
        raise FactsError(f"{source}: schema_version {version} is not a valid version")
    gpus = data.get("gpus")
    if isinstance(gpus, list) and len(gpus) > MAX_GPUS:
        raise FactsError(
            f"{source}: {len(gpus)} GPUs; a snapshot is one host's, of at most {MAX_GPUS} GPUs "
            "(split a fleet into one snapshot per host)"
        )
    result = _convert(data, HostFacts, source, "")
    assert isinstance(result, HostFacts)
    return result


def check_fields(data: dict[str, Any], names: Iterable[str], source: str = "<facts>") -> None:
    """Check these top-level fields of parsed snapshot data against the facts model, alone:
    FactsError as `from_dict` would raise it for them."""
    hints = _hints(HostFacts)
    for name in names:
        if name in data:
            _convert(data[name], hints[name], source, name)


def parse(text: str, source: str = "<facts>") -> Any:
    """A snapshot's JSON, not yet checked against the facts model (`from_dict` does that)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FactsError(f"{source}: not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except RecursionError:
        raise FactsError(f"{source}: nested too deeply to be a facts snapshot") from None


def loads(text: str, source: str = "<facts>") -> HostFacts:
    return from_dict(parse(text, source), source)


def read(path: str | Path) -> Any:
    """The JSON of a snapshot file, not yet checked against the facts model."""
    try:
        text = read_text(path)
    except UnreadableText as exc:
        raise FactsError(str(exc)) from None
    return parse(text, str(path))


def load(path: str | Path) -> HostFacts:
    """Load a facts snapshot written by `fp4doctor probe --json`."""
    return from_dict(read(path), str(path))


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def _convert(value: Any, tp: Any, source: str, path: str) -> Any:
    origin = typing.get_origin(tp)
    where = path or "(top)"
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(value, inner, source, path)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise FactsError(f"{source}: '{where}' should be an object, got {_kind(value)}")
        hints = _hints(typing.cast(type, tp))
        names = {f.name for f in dataclasses.fields(tp)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise FactsError(
                f"{source}: unknown key '{_join(path, unknown[0])}' "
                f"(known here: {', '.join(sorted(names))})"
            )
        required = [
            f.name
            for f in dataclasses.fields(tp)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        missing = [name for name in required if name not in value]
        if missing:
            raise FactsError(f"{source}: '{where}' is missing the key '{missing[0]}'")
        kwargs = {k: _convert(v, hints[k], source, _join(path, k)) for k, v in value.items()}
        return typing.cast(Any, tp)(**kwargs)
    if origin is list:
        if not isinstance(value, list):
            raise FactsError(f"{source}: '{where}' should be an array, got {_kind(value)}")
        (inner,) = typing.get_args(tp)
        return [_convert(v, inner, source, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise FactsError(f"{source}: '{where}' should be an object, got {_kind(value)}")
        _, inner = typing.get_args(tp)
        return {k: _convert(v, inner, source, _join(path, k)) for k, v in value.items()}
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise FactsError(f"{source}: '{where}' should be an integer, got {_kind(value)}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise FactsError(f"{source}: '{where}' should be a string, got {_kind(value)}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise FactsError(f"{source}: '{where}' should be true or false, got {_kind(value)}")
        return value
    raise TypeError(f"unsupported type in facts model: {tp!r}")  # a bug in this module


@functools.cache  # resolved on every object, they were 85% of reading a snapshot (1.7 of 2 ms)
def _hints(tp: type) -> dict[str, Any]:
    return typing.get_type_hints(tp)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# --- redaction -------------------------------------------------------------------------------


def redact(facts: HostFacts, home: str | None = None) -> HostFacts:
    """A copy with nothing that identifies the host or its users: no UUIDs, hostname or home.

    Home directories are replaced by `~` in every string (paths, env values, errors), and so is
    any `/home/<user>` or `/Users/<user>` prefix. GPU/MIG UUIDs, the hostname and the user name
    are replaced by `<redacted>` in every string too (NVIDIA_VISIBLE_DEVICES holds UUIDs under
    Kubernetes; cache paths such as /scratch/$HOSTNAME/$USER are common).
    """
    import contextlib
    import getpass
    import os
    import re

    homes = [h for h in {home or os.path.expanduser("~")} if h and h not in ("/", "~")]
    home_re = re.compile(
        "|".join(
            [re.escape(h.rstrip("/")) + r"(?=/|$)" for h in homes] + [r"/(?:home|Users)/[^/\s:]+"]
        )
    )
    uuid_re = re.compile(r"(GPU|MIG)-[0-9A-Fa-f]{4,}[0-9A-Fa-f-]*(?![0-9A-Za-z_])")
    names = {facts.hostname, os.uname().nodename}
    with contextlib.suppress(Exception):  # no user name to be found: none to leak
        names.add(getpass.getuser())
    names |= {n.split(".")[0] for n in names if n}
    # Whole names only ("vm" must not hit "nvml"), longest first (the FQDN before its host).
    name_re = re.compile(
        "|".join(
            rf"(?<![\w.-]){re.escape(n)}(?![\w-])"
            for n in sorted(filter(None, names), key=len, reverse=True)
        )
        or r"(?!)"
    )

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            value = uuid_re.sub(r"\1-" + REDACTED, home_re.sub("~", value))
            return name_re.sub(REDACTED, value)
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    data = to_dict(facts)
    data["hostname"] = None
    for gpu in data["gpus"]:
        gpu["uuid"] = None
    cvd = data.get("cuda_visible_devices")
    if cvd and ("GPU-" in cvd or "MIG-" in cvd):
        data["cuda_visible_devices"] = re.sub(r"(GPU|MIG)-[0-9A-Fa-f-]+", r"\1-" + REDACTED, cvd)
        if "CUDA_VISIBLE_DEVICES" in data["env"]:
            data["env"]["CUDA_VISIBLE_DEVICES"] = data["cuda_visible_devices"]
    return from_dict(scrub(data))
