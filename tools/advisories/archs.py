"""Per FlashInfer release: the SM majors each FP4 JIT module builds for, and the C++ arch checks.

    python tools/advisories/archs.py GIT_DIR > tools/advisories/flashinfer-archs.tsv

The Python-side gates (`@supported_compute_capability`, `backend_requirement`) say what an API
accepts; what a kernel can run on is decided by the module's build list and the compiled code's
own checks. This reads both from each final release tag of a FlashInfer git directory:

- every function in MODULE_FILES whose body calls something with `supported_major_versions=[...]`
  (the SM majors the JIT/AOT module is compiled for; `None` means every supported arch);
- every line of CPP_FILES that checks the device's major/minor version (`ICHECK_*(major, N)`,
  `getSMVersion() ...`, `sm == N`, `major == N`), the kernels' own architecture dispatch.

Output is TSV on stdout: release, kind (module|check), file, name (function, or line number),
value (the major list, or the checking source line).
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULE_FILES = (
    "flashinfer/jit/fused_moe.py",
    "flashinfer/jit/gemm/core.py",
    "flashinfer/jit/gemm.py",
    "flashinfer/jit/moe_utils.py",
    "flashinfer/jit/fp4_quantization.py",
)
CPP_FILES = (
    "csrc/trtllm_fused_moe_kernel_launcher.cu",
    "csrc/fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_binding.cu",
    "csrc/fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_sm100_binding.cu",
    "csrc/fp4_gemm_cutlass.cu",
    "csrc/fp4_gemm_cutlass_sm120.cu",
    "csrc/trtllm_gemm_runner.cu",
    "csrc/trtllm_batched_gemm_runner.cu",
    "csrc/nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_template_dispatch.h",
    "csrc/nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_template_dispatch_tma_ws.h",
    "csrc/fused_moe/trtllm_backend/trtllm_fused_moe_routing_common.cu",
)
CHECK_RE = re.compile(
    r"ICHECK_(EQ|GE|LE|GT|LT|NE)\s*\(\s*(major|std::get<0>|sm|smVersion|mSM)"
    r"|getSMVersion\(\)\s*[<>=!]=?|\bsm(_version)?\s*[<>=!]=\s*\d+|\bmajor\s*[<>=!]=\s*\d+"
    r"|mSM\s*[<>=!]=\s*\d+"
)


def _git(git_dir: Path, *args: str) -> str:
    proc = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else ""


def module_archs(source: str) -> Iterator[tuple[str, str]]:
    """(function name, majors) for each function that builds with supported_major_versions."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            for kw in call.keywords:
                if kw.arg == "supported_major_versions":
                    yield node.name, ast.unparse(kw.value)


def arch_checks(source: str) -> Iterator[tuple[int, str]]:
    """(line number, stripped line) for each line that checks the device architecture."""
    for n, line in enumerate(source.splitlines(), start=1):
        if CHECK_RE.search(line) and not line.lstrip().startswith("//"):
            yield n, " ".join(line.split())[:200]


def rows(git_dir: Path, since: str = "v0.5.0") -> Iterator[tuple[str, ...]]:
    """Every module build list and arch check of every final release tag from `since` on."""
    sys.path.insert(0, str(HERE.parents[1]))  # the checkout: tools.advisories.*
    from tools.advisories import walk  # the release list lives in walk.py, beside this file

    tags = [b for _, b in walk.ranges(git_dir, since)]
    for tag in [walk.release_tags(git_dir, since)[0], *tags]:
        release = tag.lstrip("v")
        for path in MODULE_FILES:
            for name, value in module_archs(_git(git_dir, "show", f"{tag}:{path}")):
                yield release, "module", path, name, value
        for path in CPP_FILES:
            for n, line in arch_checks(_git(git_dir, "show", f"{tag}:{path}")):
                yield release, "check", path, str(n), line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", type=Path)
    parser.add_argument("--since", default="v0.5.0")
    args = parser.parse_args(argv)
    print("release\tkind\tfile\tname\tvalue")
    for row in rows(args.git_dir, args.since):
        print("\t".join(field.replace("\t", " ") for field in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
