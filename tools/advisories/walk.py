"""List the commits of a release history that touch the FP4 paths: the ledger's candidates.

    python tools/advisories/walk.py GIT_DIR                    # FlashInfer, every range from 0.5.0
    python tools/advisories/walk.py GIT_DIR --since v0.6.8     # from one release on
    python tools/advisories/walk.py GIT_DIR --check LEDGER     # candidates the ledger lacks

GIT_DIR is a bare clone or a `fetch` snapshot (e.g. /work/.mirror/flashinfer-ai+flashinfer/repo).
A *range* is `git rev-list PREV..TAG` between consecutive final releases (rc and post tags are
folded into the release they precede or follow; FlashInfer cuts releases from branches, so a
range holds the main-line commits merged since the previous release and that release's
cherry-picks). A commit is a *candidate* when it changes a shipped file (not tests, benchmarks,
docs or CI) that matches one of TOPICS, or changes any shipped file and its subject matches
SUBJECT_KEYWORDS. A pull request cherry-picked into a later range is listed once, in the first
range that carries it; the later copies are printed as `dup` rows so the count stays honest.

The filter is the definition of "touches FP4/NVFP4 GEMM or MoE code, autotuning, JIT, or arch
gates" that tools/advisories/README.md reports coverage against. Output is TSV on stdout:
range, sha, date, pr, topics, files, subject.
"""

from __future__ import annotations

import argparse
import itertools
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

# Shipped code: what a wheel or the JIT cache carries. Tests, benchmarks, docs and CI are not.
SHIPPED = re.compile(
    r"^(flashinfer/|csrc/|include/|flashinfer-cubin/|flashinfer-jit-cache/|build_backend\.py$"
    r"|setup\.py$|pyproject\.toml$|cmake/|CMakeLists\.txt$)"
)
NOT_SHIPPED = re.compile(r"(^|/)(tests?|benchmarks?|docs?|examples?|\.github|scripts)/")

# Topic -> path pattern over shipped files. Attention, sampling, norms, comm and the like are
# outside the FP4 paths unless a file of theirs matches one of these.
TOPICS: dict[str, re.Pattern[str]] = {
    "fp4-gemm": re.compile(
        r"^flashinfer/gemm/|^flashinfer/gemm\.py$|^flashinfer/fp4_quantization\.py$"
        r"|^flashinfer/quantization/|^include/flashinfer/gemm/|^include/flashinfer/trtllm/gemm/"
        r"|^csrc/[^/]*(fp4|gemm|quantiz)[^/]*$|^csrc/nv_internal/.*(fp4|gemm|[Qq]uantiz)"
        r"|^flashinfer/cute_dsl/.*(gemm|fp4|blockscaled)"
    ),
    "moe": re.compile(
        r"^flashinfer/fused_moe/|^flashinfer/moe_ep/|^csrc/fused_moe/|^csrc/[^/]*moe[^/]*$"
        r"|^include/flashinfer/trtllm/(fused_moe|batched_gemm)/|^csrc/nv_internal/.*moe"
        r"|^flashinfer/cute_dsl/.*(moe|b12x)|^flashinfer/b12x"
    ),
    "autotune": re.compile(r"^flashinfer/autotuner\.py$|^flashinfer/tuning_configs/"),
    "jit": re.compile(
        r"^flashinfer/jit/(core|cpp_ext|env|cubin_loader|utils|__init__|gemm|fused_moe|cutlass|"
        r"activation|cuda_version|fp4)|^flashinfer/jit/gemm/|^flashinfer/compilation_context\.py$"
        r"|^flashinfer/artifacts\.py$|^flashinfer/aot\.py$|^flashinfer-cubin/|^flashinfer-jit-cache/"
        r"|^build_backend\.py$|^setup\.py$|^pyproject\.toml$"
    ),
    "arch-gate": re.compile(
        r"^flashinfer/utils\.py$|^flashinfer/api_logging\.py$|^csrc/tvm_ffi_utils\.h$"
    ),
}
SUBJECT_KEYWORDS = re.compile(
    r"fp4|e2m1|moe|autotun|\bjit\b|cubin|\bsm_?1[0-2]\d[af]?\b|\bsm1[0-2]x\b|blackwell|"
    r"compute.capabilit|\barch(s|itecture)?\b|cutlass|trtllm|cudnn|b12x|cute.?dsl",
    re.IGNORECASE,
)
PR_RE = re.compile(r"\(#(\d+)\)\s*$|[Cc]herry-pick(?:ed)? (?:of )?(?:PR )?#(\d+)")


@dataclass(frozen=True)
class Candidate:
    range: str
    sha: str
    date: str
    pr: str  # "" when the subject names none
    topics: tuple[str, ...]
    files: int
    subject: str
    dup_of: str = ""  # the range that first carried this pull request

    def row(self) -> str:
        kind = f"dup:{self.dup_of}" if self.dup_of else ",".join(self.topics)
        fields = (self.range, self.sha, self.date, self.pr, kind, str(self.files), self.subject)
        return "\t".join(f.replace("\t", " ") for f in fields)


def _git(git_dir: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True, check=True
    )
    return out.stdout


def release_tags(git_dir: Path, since: str = "v0.5.0") -> list[str]:
    """Final release tags (no rc, no post), oldest first, from `since` on."""
    out: list[tuple[Version, str]] = []
    for tag in _git(git_dir, "tag").split():
        try:
            v = Version(tag.lstrip("v"))
        except InvalidVersion:
            continue
        if v.is_prerelease or v.is_postrelease or v < Version(since.lstrip("v")):
            continue
        out.append((v, tag))
    return [t for _, t in sorted(out)]


def ranges(git_dir: Path, since: str) -> list[tuple[str, str]]:
    """Consecutive (previous, release) pairs; the newest tag of any kind closes the last range."""
    tags = release_tags(git_dir, since)
    every = sorted(
        (t for t in _git(git_dir, "tag").split() if _version(t) is not None),
        key=lambda t: _version(t) or Version("0"),
    )
    newest = every[-1] if every else tags[-1]
    if newest not in tags:
        tags.append(newest)  # e.g. v0.6.18rc7, when the final release is newer than the snapshot
    return list(itertools.pairwise(tags))


def _version(tag: str) -> Version | None:
    try:
        return Version(tag.lstrip("v"))
    except InvalidVersion:
        return None


def topics_of(paths: Sequence[str]) -> tuple[str, ...]:
    """The TOPICS the shipped paths of one commit fall under."""
    shipped = [p for p in paths if SHIPPED.search(p) and not NOT_SHIPPED.search(p)]
    return tuple(name for name, pat in TOPICS.items() if any(pat.search(p) for p in shipped))


def commits(git_dir: Path, prev: str, tag: str) -> Iterator[tuple[str, str, str, list[str]]]:
    """(sha, date, subject, paths) for every commit of PREV..TAG, newest first."""
    log = _git(
        git_dir,
        "log",
        "--no-merges",
        "--format=\x1e%h\x1f%cs\x1f%s",
        "--name-only",
        f"{prev}..{tag}",
    )
    for block in log.split("\x1e")[1:]:
        head, _, names = block.partition("\n")
        sha, date, subject = head.split("\x1f", 2)
        yield sha, date, subject, [n for n in names.split("\n") if n]


def walk(git_dir: Path, since: str = "v0.5.0") -> list[Candidate]:
    """Every candidate of every release range, oldest range first."""
    seen: dict[str, str] = {}
    out: list[Candidate] = []
    for prev, tag in ranges(git_dir, since):
        name = f"{prev.lstrip('v')}..{tag.lstrip('v')}"
        for sha, date, subject, paths in reversed(list(commits(git_dir, prev, tag))):
            topics = topics_of(paths)
            shipped = [p for p in paths if SHIPPED.search(p) and not NOT_SHIPPED.search(p)]
            if not topics and not (shipped and SUBJECT_KEYWORDS.search(subject)):
                continue
            m = PR_RE.search(subject)
            pr = next((g for g in m.groups() if g), "") if m else ""
            dup = seen.get(pr, "") if pr else ""
            if pr and not dup:
                seen[pr] = name
            out.append(
                Candidate(name, sha, date, pr, topics or ("keyword",), len(shipped), subject, dup)
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", type=Path)
    parser.add_argument("--since", default="v0.5.0", help="first release tag (default v0.5.0)")
    parser.add_argument("--check", type=Path, help="a ledger TSV: list candidates it lacks")
    args = parser.parse_args(argv)
    found = walk(args.git_dir, args.since)
    if args.check:
        have = {line.split("\t")[1] for line in args.check.read_text().splitlines()[1:] if line}
        missing = [c for c in found if c.sha not in have]
        for c in missing:
            print(c.row())
        print(f"{len(missing)} of {len(found)} candidates not in {args.check}", file=sys.stderr)
        return 1 if missing else 0
    print("range\tsha\tdate\tpr\ttopics\tfiles\tsubject")
    for c in found:
        print(c.row())
    print(f"{len(found)} candidates", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
