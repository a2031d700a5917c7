"""Build .whl/, the wheels that benchmarks/gpu_round.sh installs on the H200 device machine.

    python benchmarks/device_wheels.py [DEST]        # default .whl (git-excluded)

The device machine has no package index, and what travels with the working tree is at most
64 MiB. Its image holds torch, pytest, pytest-xdist, prometheus-client, PyYAML and the rest of
the test dependencies except those below. flashinfer-python's wheel is ~100 MB, nearly all of it
C++/CUDA sources for its JIT builds (which the H200 cannot use for FP4 anyway: no FP4 tensor
cores); they are dropped, with their RECORD lines, and the wheel is written again.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

#: name==version for Python 3.12 on x86-64 manylinux (the device image's interpreter).
WHEELS = (
    "flashinfer-python==0.7.4",
    "nvidia-cudnn-frontend==1.32.0",
    "apache-tvm-ffi==0.1.15.post2",
    "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1",
    "referencing==0.37.0",
    "rpds-py==2026.9.1",
)
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
SOURCES = (".cu", ".cuh", ".h", ".hpp", ".hh", ".cpp", ".cc", ".cxx", ".inl", ".c", ".tcc")


def trim(wheel: Path) -> None:
    """Write `wheel` again without its C/C++/CUDA sources (and their RECORD lines)."""
    kept = wheel.with_suffix(".trimmed")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(kept, "w", zipfile.ZIP_DEFLATED) as dst:
        dropped = {i.filename for i in src.infolist() if i.filename.endswith(SOURCES)}
        for info in src.infolist():
            if info.filename in dropped:
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(x for x in lines if x.split(",", 1)[0] not in dropped).encode()
            dst.writestr(info, data)
    kept.replace(wheel)
    print(
        f"{wheel.name}: {len(dropped)} source files dropped, "
        f"{wheel.stat().st_size / 2**20:.1f} MiB",
        file=sys.stderr,
    )


def main() -> int:
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else ".whl")
    dest.mkdir(exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "-d",
        str(dest),
    ]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    subprocess.run([*command, *WHEELS], check=True)
    for wheel in dest.glob("flashinfer_python-*.whl"):
        trim(wheel)
    total = sum(p.stat().st_size for p in dest.glob("*.whl"))
    print(f"{dest}: {total / 2**20:.1f} MiB (64 MiB travel per device call)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
