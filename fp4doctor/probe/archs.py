"""Which GPU architectures a CUDA shared object carries, read from its fatbin headers.

A CUDA module built for sm_80 and sm_90 fails on an sm_120 GPU at its first kernel launch with
"no kernel image is available for execution on the device". The kernels a module carries are
listed in its ELF `.nv_fatbin` section: a run of fatbin containers (magic 0xBA55ED50), each a
run of entries, each a header that names the code's kind (1 = PTX, 2 = ELF, i.e. SASS), its
architecture and its flags, followed by its payload (compressed or not). This module reads only
those headers, with `os.pread`, and skips every payload, so a 1 GB library costs a few thousand
small reads, not a read of the whole file. It needs only the standard library (no torch, no
pyelftools, no cuobjdump).

A cubin (an ELF file of device code for one architecture, `e_machine` EM_CUDA, as FlashInfer's
trtllm-gen kernels ship in flashinfer-cubin) has no fatbin: its architecture is read from its
ELF header's `e_flags`. From ELF ABI version 8 (`e_ident[EI_ABIVERSION]`, the cubins CUDA 12.8+
writes) the SM number is bits 8-15 and bit 3 marks an arch-specific (`a`) cubin; before it the
SM number is the low byte. Both read from flashinfer-cubin 0.6.12's cubins, whose file names say
their target (`..._sm100f.cubin`: 0x..6402/0x..6404, `..._sm103a.cubin`: 0x..670c,
`fmhaSm100a...`: 0x..640a/0x..640c); a family cubin reads as its base (`sm_100`), as cuobjdump
names it. A module key may be a glob (`DIST/cubins/*/batched_gemm-*/*.cubin`): every installed
file it matches is read and the architectures united (a GPU runs the kernels when any matches).

`__nv_relfatbin` (relocatable device code, kept for a later device link) is walked too, but its
entries do not count as what the module carries: the CUDA runtime registers only `.nv_fatbin`
(and `cuobjdump` lists only it unless given `-all`), so a PTX there never runs.

The layout is NVIDIA's and not documented; what is read here is what every published fatbin
reader agrees on (the 16-byte container header, the 64-byte entry header), checked against
`cuobjdump --list-elf/--list-ptx` in tests/test_probe_archs.py. The two variant flags were read
from modules nvcc 13.5 built for known targets (`code=sm_90a`, `sm_100a`, `sm_100f`, `sm_103f`,
`sm_120f`, with their PTX): 0x00100000 marks an arch-specific (`a`) entry, 0x00200000 a family
(`f`) one, and NVIDIA's wheels agree (cuBLAS's sm_90a kernels, nccl's sm_100a/sm_103a ones,
cuDNN 9.28's compute_120f PTX). cuobjdump names a family cubin by its base architecture
(`sm_100`) and only family PTX with the `f`; this module keeps the `f` on both.
"""

from __future__ import annotations

import fnmatch
import os
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fp4doctor.facts import CompiledArchs, canonical_name
from fp4doctor.probe.packages import installed_files, probe_packages
from fp4doctor.shipped import profiles_dir
from fp4doctor.textfile import UnreadableText, open_regular

__all__ = [
    "Entry",
    "FatbinError",
    "cubin_arch",
    "engine_modules",
    "entries",
    "locate",
    "locate_all",
    "probe_compiled_archs",
    "scan",
]

RUNTIME_SECTION = ".nv_fatbin"  # what the CUDA runtime registers and loads from

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_ELF = 2  # a cubin: SASS for one architecture
SECTIONS = (".nv_fatbin", "__nv_relfatbin")

# Entry flags (fatbinary.h names the low ones; the variant bits are read from NVIDIA's wheels).
FLAG_64BIT = 0x1
FLAG_COMPRESS = 0x1000
FLAG_COMPRESS2 = 0x2000  # LZ4-style, the default of nvcc --compress-mode (12.x)
FLAG_ZSTD = 0x8000
COMPRESSED = FLAG_COMPRESS | FLAG_COMPRESS2 | FLAG_ZSTD
FLAG_ARCH_SPECIFIC = 0x0010_0000  # sm_90a, sm_100a: runs only on that exact GPU
FLAG_FAMILY = 0x0020_0000  # sm_100f, sm_120f: runs on that family, same or newer minor

CONTAINER_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
ENTRY_HEADER = struct.Struct("<HHIQIIHHIIIQ")  # the first 48 bytes of the entry header
ENTRY_MIN = 64
SECTION_HEADER = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
EM_CUDA = 190  # e_machine of a cubin
CUBIN_ABI_V8 = 8  # e_ident[EI_ABIVERSION] from which e_flags holds the SM in bits 8-15
CUBIN_ARCH_SPECIFIC_V8 = 0x8  # e_flags bit of an `a` cubin (ABI version 8)
GLOB_CHARS = "*?["
SHT_NOBITS = 8
SHN_XINDEX = 0xFFFF
MAX_TABLE = 16 << 20  # a section-header or name table larger than this is not a real library
ZERO_CHUNK = 1 << 16


class FatbinError(Exception):
    """A file that is not a readable 64-bit ELF, or a fatbin that does not parse."""


@dataclass(frozen=True)
class Entry:
    """One fatbin entry's header: the code's kind, its architecture and its flags."""

    kind: int  # KIND_PTX or KIND_ELF
    arch: int  # 90 for sm_90 / compute_90
    flags: int
    offset: int  # of the entry header in the file
    section: str = RUNTIME_SECTION

    @property
    def suffix(self) -> str:
        if self.flags & FLAG_ARCH_SPECIFIC:
            return "a"
        if self.flags & FLAG_FAMILY:
            return "f"
        return ""

    @property
    def compressed(self) -> bool:
        return bool(self.flags & COMPRESSED)

    @property
    def name(self) -> str:
        """As nvcc and cuobjdump write it: `sm_90a` for SASS, `compute_90` for PTX."""
        prefix = "compute" if self.kind == KIND_PTX else "sm"
        return f"{prefix}_{self.arch}{self.suffix}"


def scan(path: str | os.PathLike[str]) -> CompiledArchs:
    """The SASS and PTX architectures `path` carries in `.nv_fatbin`, the code the CUDA runtime
    can load; never raises (an unreadable file, a 32-bit or non-ELF one, a truncated fatbin
    become `error`). A library without a fatbin section carries no device code: both lists
    empty, no error."""
    sass: set[str] = set()
    ptx: set[str] = set()
    error = None
    try:
        cubin = cubin_arch(path)
        if cubin is not None:
            return CompiledArchs(sass=[cubin])
        for entry in entries(path):
            if entry.section != RUNTIME_SECTION:
                continue
            if entry.kind == KIND_ELF:
                sass.add(entry.name)
            elif entry.kind == KIND_PTX:
                ptx.add(entry.name)
    except FatbinError as exc:
        error = str(exc)
    except OSError as exc:
        error = f"cannot read {os.fspath(path)}: {exc.strerror or exc}"
    return CompiledArchs(
        sass=sorted(sass, key=arch_order), ptx=sorted(ptx, key=arch_order), error=error
    )


def cubin_arch(path: str | os.PathLike[str]) -> str | None:
    """The architecture of a cubin (`sm_100a`), read from its ELF header; None when `path` is
    not a cubin (a shared library, or not ELF at all: `entries` says what it is)."""
    try:  # as `entries` opens it: a FIFO or a device in a shared cache is never waited on
        fd = open_regular(path)
    except UnreadableText as exc:
        raise FatbinError(f"cannot read {exc}") from None
    try:
        ident = os.pread(fd, 64, 0)
    finally:
        os.close(fd)
    if len(ident) < 52 or ident[:4] != b"\x7fELF" or ident[5] != 1:
        return None
    (machine,) = struct.unpack_from("<H", ident, 18)
    if machine != EM_CUDA:
        return None
    (flags,) = struct.unpack_from("<I", ident, 48 if ident[4] == 2 else 36)
    if ident[8] >= CUBIN_ABI_V8:
        suffix = "a" if flags & CUBIN_ARCH_SPECIFIC_V8 else ""
        return f"sm_{(flags >> 8) & 0xFF}{suffix}"
    return f"sm_{flags & 0xFF}"


def arch_order(name: str) -> tuple[int, str]:
    """`sm_90` < `sm_90a` < `sm_100` < `sm_100f`: by number, then suffix."""
    digits = name.rsplit("_", 1)[-1]
    number = "".join(c for c in digits if c.isdigit())
    return (int(number) if number else 0, digits[len(number) :])


def entries(path: str | os.PathLike[str]) -> Iterator[Entry]:
    """Every fatbin entry header of the ELF file `path`, in file order (headers only)."""
    try:  # never waited on (a FIFO named like a module in a shared JIT workspace), never a device
        fd = open_regular(path)
    except UnreadableText as exc:
        raise FatbinError(f"cannot read {exc}") from None
    try:
        size = os.fstat(fd).st_size
        for name, start, length in _fatbin_sections(fd, size):
            yield from _walk(fd, name, start, start + length)
    finally:
        os.close(fd)


def _read(fd: int, offset: int, length: int) -> bytes:
    data = os.pread(fd, length, offset)
    if len(data) != length:
        raise FatbinError(f"truncated: {length} bytes wanted at offset {offset:#x}")
    return data


def _fatbin_sections(fd: int, size: int) -> list[tuple[str, int, int]]:
    """(name, offset, size) of the fatbin sections, from the ELF64 section headers."""
    ident = os.pread(fd, 64, 0)
    if len(ident) < 4 or ident[:4] != b"\x7fELF":
        raise FatbinError("not an ELF file")
    if len(ident) < 64:
        raise FatbinError("truncated ELF header")
    if ident[4] == 1:
        raise FatbinError("a 32-bit ELF file: CUDA fatbins are read from 64-bit libraries only")
    if ident[4] != 2:
        raise FatbinError(f"unknown ELF class {ident[4]}")
    if ident[5] != 1:
        raise FatbinError("a big-endian ELF file: CUDA libraries are little-endian")
    (shoff,) = struct.unpack_from("<Q", ident, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
    if shoff == 0:
        return []  # no section headers (stripped to program headers only): nothing to name
    if shentsize < SECTION_HEADER.size:
        raise FatbinError(f"bad ELF section header size {shentsize}")
    if shnum == 0 or shstrndx == SHN_XINDEX:  # extended numbering: the real values in header 0
        first = SECTION_HEADER.unpack(_read(fd, shoff, SECTION_HEADER.size))
        shnum = shnum or first[5]
        shstrndx = first[6] if shstrndx == SHN_XINDEX else shstrndx
    if shnum * shentsize > MAX_TABLE or shoff + shnum * shentsize > size:
        raise FatbinError("truncated ELF file: the section headers lie past its end")
    table = _read(fd, shoff, shnum * shentsize)
    headers = [SECTION_HEADER.unpack_from(table, i * shentsize) for i in range(shnum)]
    if shstrndx >= shnum:
        raise FatbinError("bad ELF section name table index")
    names_at, names_size = headers[shstrndx][4], headers[shstrndx][5]
    if names_size > MAX_TABLE or names_at + names_size > size:
        raise FatbinError("truncated ELF file: the section names lie past its end")
    names = _read(fd, names_at, names_size)
    found = []
    for name_at, kind, _flags, _addr, offset, length, *_ in headers:
        end = names.find(b"\0", name_at)
        name = names[name_at : end if end >= 0 else None].decode("latin-1")
        if name not in SECTIONS or kind == SHT_NOBITS:
            continue
        if offset + length > size:
            raise FatbinError(f"truncated: {name} runs past the end of the file")
        found.append((name, offset, length))
    return found


def _walk(fd: int, section: str, pos: int, end: int) -> Iterator[Entry]:
    """The entries of the containers laid end to end in [pos, end)."""
    while pos + CONTAINER_HEADER.size <= end:
        head = _read(fd, pos, CONTAINER_HEADER.size)
        magic, _version, header_size, fat_size = CONTAINER_HEADER.unpack(head)
        if magic != FATBIN_MAGIC:
            if any(head[:8]):
                raise FatbinError(f"not a fatbin container at offset {pos:#x} (magic {magic:#x})")
            pos = _skip_zeros(fd, pos, end)  # alignment padding between containers
            continue
        if header_size < CONTAINER_HEADER.size:
            raise FatbinError(f"bad fatbin container header size {header_size} at {pos:#x}")
        entry = pos + header_size
        stop = entry + fat_size
        if stop > end:
            raise FatbinError(f"truncated: the fatbin container at {pos:#x} runs past its section")
        while entry < stop:
            if entry + ENTRY_MIN > stop:
                raise FatbinError(f"truncated fatbin entry header at {entry:#x}")
            fields = ENTRY_HEADER.unpack(_read(fd, entry, ENTRY_HEADER.size))
            kind, _ver, entry_size, payload, *_, arch, _name_at, _name_len, flags = fields
            if entry_size < ENTRY_MIN:
                raise FatbinError(f"bad fatbin entry header size {entry_size} at {entry:#x}")
            following = entry + entry_size + payload
            if following > stop:
                raise FatbinError(
                    f"truncated: the fatbin entry at {entry:#x} runs past its container"
                )
            yield Entry(kind=kind, arch=arch, flags=flags, offset=entry, section=section)
            entry = following
        pos = stop


def _skip_zeros(fd: int, pos: int, end: int) -> int:
    """The first 8-byte-aligned offset from `pos` whose bytes are not zero (or `end`)."""
    while pos < end:
        chunk = os.pread(fd, min(ZERO_CHUNK, end - pos), pos)
        if not chunk:
            return end
        stripped = len(chunk) - len(chunk.lstrip(b"\0"))
        if stripped < len(chunk):
            return pos + stripped - stripped % 8
        pos += len(chunk)
    return end


# --- which file a module key names ----------------------------------------------------------


def locate(module: str) -> Path:
    """The installed file a module key names, without importing anything.

    A key is `DIST/PATH`: the distribution, then a path among the files its wheel installed
    (`importlib.metadata` `files()`): the file whose path is PATH or ends with `/PATH`, the
    shortest if several do. `vllm/_C.abi3.so` is vLLM's `vllm/_C.abi3.so`;
    `nvidia-cudnn-cu12/lib/libcudnn_ops.so.9` is that wheel's `nvidia/cudnn/lib/libcudnn_ops.so.9`.
    Raises LookupError with the reason when there is no such file.
    """
    dist_name, _, rest = module.partition("/")
    if not dist_name or not rest:
        raise LookupError(f"{module!r} is not DIST/PATH")
    listed = installed_files(dist_name)  # RECORD read as text: no importlib.metadata imports
    if listed is not None:
        dist_info, files = listed
        base = Path(dist_info).parent
        # As `files()` lists them since Python 3.12: only the files that exist.
        matches = [
            f for f in files if (f == rest or f.endswith("/" + rest)) and (base / f).exists()
        ]
        if matches:
            return base / min(matches, key=lambda f: (f.count("/"), f))
        built = _in_package_dir(dist_name, rest)
        if built is None:
            version = probe_packages(names=[dist_name]).version(dist_name)
            raise LookupError(f"{dist_name} {version} installed no file {rest}")
        return built
    from importlib import metadata  # 20 ms of imports: only where the plain reading cannot say

    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        raise LookupError(f"{dist_name} is not installed") from None
    found = [
        f for f in dist.files or () if f.as_posix() == rest or f.as_posix().endswith("/" + rest)
    ]
    if not found:
        built = _in_package_dir(dist_name, rest)
        if built is None:
            raise LookupError(f"{dist_name} {dist.version} installed no file {rest}")
        return built
    best_path = min(found, key=lambda f: (len(f.parts), f.as_posix()))
    return Path(str(dist.locate_file(best_path)))


def _in_package_dir(dist_name: str, rest: str) -> Path | None:
    """`rest` in the directory of the distribution's top-level package, for an editable or
    in-place build (`pip install -e .`), whose file list names no compiled module. `find_spec`
    of a top-level name finds the directory without running the package's code."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(dist_name.replace("-", "_"))
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        for candidate in (Path(base) / rest, Path(base).parent / rest):
            if candidate.is_file():
                return candidate
    return None


def locate_all(module: str) -> list[Path]:
    """Every installed file a glob key names (`DIST/PATTERN`, matched as `locate` matches a
    path: the whole path or its end after a `/`), sorted; LookupError when none is."""
    dist_name, _, pattern = module.partition("/")
    if not dist_name or not pattern:
        raise LookupError(f"{module!r} is not DIST/PATTERN")
    listed = installed_files(dist_name)
    if listed is None:
        from importlib import metadata

        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            raise LookupError(f"{dist_name} is not installed") from None
        base, files = Path(str(dist.locate_file(""))), [f.as_posix() for f in dist.files or ()]
    else:
        base, files = Path(listed[0]).parent, listed[1]
    matches = sorted(
        base / f
        for f in files
        if fnmatch.fnmatchcase(f, pattern) or fnmatch.fnmatchcase(f, "*/" + pattern)
    )
    if not matches:
        version = probe_packages(names=[dist_name]).version(dist_name)
        raise LookupError(f"{dist_name} {version} installed no file matching {pattern}")
    return matches


def _scan_all(paths: list[Path]) -> CompiledArchs:
    """The architectures of several files united, `path` their common directory; the first
    file that cannot be read makes the whole unreadable (its error)."""
    sass: set[str] = set()
    ptx: set[str] = set()
    for path in paths:
        archs = scan(path)
        if archs.error:
            return CompiledArchs(error=archs.error, path=str(path))
        sass.update(archs.sass)
        ptx.update(archs.ptx)
    where = os.path.commonpath([str(p.parent) for p in paths])
    return CompiledArchs(sorted(sass, key=arch_order), sorted(ptx, key=arch_order), None, where)


def probe_compiled_archs(modules: Iterable[str]) -> dict[str, CompiledArchs]:
    """The architectures of each module key (see `locate`; a glob key: `locate_all`, every file
    it matches); a module that cannot be found or read gets its reason in `error`."""
    found: dict[str, CompiledArchs] = {}
    for module in dict.fromkeys(modules):
        try:
            if any(c in module for c in GLOB_CHARS):
                found[module] = _scan_all(locate_all(module))
                continue
            path = locate(module)
        except LookupError as exc:
            found[module] = CompiledArchs(error=str(exc))
            continue
        archs = scan(path)
        found[module] = CompiledArchs(archs.sass, archs.ptx, archs.error, str(path))
    return found


# --- which modules the installed engine's rules read, for `fp4doctor probe` ---------------------

# A `compiled_arch: DIST/PATH` rule, an `include: [NAME, ...]` line and an engine's `package:` in a
# profile's text. `probe` reads the shipped profiles this way rather than parsing them: the parser
# and its imports cost 0.3 s, and nothing is judged here, only which files to scan.
_MODULE_RULE = re.compile(r"^[ \t-]*compiled_arch:[ \t]*[\"']?([^\s\"'#]+)", re.M)
_INCLUDE = re.compile(r"^include:[ \t]*\[([^\]]*)\]", re.M)
_ENGINE_PACKAGE = re.compile(
    r"^engine:[ \t]*\n(?:[ \t]+.*\n|[ \t]*\n)*?[ \t]+package:[ \t]*(\S+)", re.M
)


def engine_modules(installed: Iterable[str], directory: Path | None = None) -> list[str]:
    """The `compiled_arch` modules named by each shipped profile whose engine package is among
    `installed` (canonical names), its included modules' too, whose own distribution is
    installed; [] when no engine is installed."""
    base = profiles_dir() if directory is None else directory
    wanted = set(installed)
    found: list[str] = []
    for path in sorted(base.glob("*.yaml")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        engine = _ENGINE_PACKAGE.search(text)
        if engine is None or canonical_name(engine.group(1).strip("\"'")) not in wanted:
            continue
        texts = [text]
        for include in _INCLUDE.findall(text):
            for name in (n.strip().strip("\"'") for n in include.split(",")):
                try:
                    texts.append((base / "common" / f"{name}.yaml").read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError):
                    continue
        found += [m for body in texts for m in _MODULE_RULE.findall(body)]
    # A module of a distribution that is not installed has nothing to scan (the kind says "not
    # read" from the package versions alone): flashinfer-cubin's cubins, an engine's extensions.
    installed_modules = [m for m in found if canonical_name(m.split("/", 1)[0]) in wanted]
    return list(dict.fromkeys(installed_modules))
