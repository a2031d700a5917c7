"""`compiled_arch: DIST/PATH` — a CUDA module of an installed distribution carries code this GPU
can run, read from its fatbin before anything loads it (probe/archs.py).

    - compiled_arch: vllm/_C.abi3.so

`DIST/PATH` names the distribution, then the file among those its wheel installed (the file
whose path is PATH or ends with `/PATH`): `vllm/_C.abi3.so`,
`nvidia-cudnn-cu12/lib/libcudnn_engines_precompiled.so.9`. Checked on every GPU. A module runs
on a GPU of compute capability X.Y (`sm_XY`) when it carries

- SASS for `sm_XY` itself, in any variant (`sm_XY`, `sm_XYa`, `sm_XYf`);
- or SASS for an older minor of the same major, `sm_XZ` or `sm_XZf` with Z <= Y (cubins run
  on newer minors of their major: sm_80 on sm_86, sm_100 and sm_100f on sm_103). Never across
  majors: sm_100 SASS does not run on sm_120 (12.0) or sm_110 (11.0), nor sm_90 on sm_100;
  and never an `a` variant on another GPU (sm_90a runs only on 9.0, sm_100a only on 10.0);
- or PTX the driver can compile for it: `compute_N` with N <= XY (PTX is forward compatible),
  `compute_XZf` within the family, `compute_XYa` only on X.Y. (The driver must also know that
  PTX version; that is the `cuda_driver` kind's business.)

    - compiled_arch: vllm/_C.abi3.so
      variant: specific

`variant: specific` counts only arch-specific (`sm_XYa`) and family (`sm_XZf`) code, the only
targets in which the FP4 tensor-core instructions exist (PTX ISA: `tcgen05.mma` and
`mma...block_scale` need `sm_100a`/`sm_100f`, `sm_120a`/`sm_120f` and the like). A build made
for plain `12.0` or `12.0+PTX` carries sm_120 code for every other kernel and none of its FP4
ones: vLLM's CMake compiles its NVFP4 kernels only for the `a`/`f` targets and skips them
otherwise (vLLM PR #41738). Any such code in the module stands in for its FP4 kernels: a proxy,
not a per-kernel list (a fatbin does not name which kernel an entry holds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fp4doctor.facts import CompiledArchs, Gpu
from fp4doctor.profile.kinds.base import Check, Context, Kind, Named, ParseChild
from fp4doctor.profile.yamlnode import Node, optional

if TYPE_CHECKING:
    from fp4doctor.profile.kinds.base import Requirement
    from fp4doctor.profile.model import Profile


def _split(name: str) -> tuple[str, int, str] | None:
    """`sm_100f` -> ("sm", 100, "f"); None for anything else."""
    prefix, _, rest = name.partition("_")
    digits = rest.rstrip("af")
    if prefix not in ("sm", "compute") or not digits.isdigit() or len(rest) - len(digits) > 1:
        return None
    return prefix, int(digits), rest[len(digits) :]


VARIANTS = ("any", "specific")


def runs_on(archs: CompiledArchs, cc: int, specific: bool = False) -> str | None:
    """The architecture in `archs` that a GPU of capability `cc` (major*10+minor) would run, or
    None: exact SASS first, then older-minor SASS of its major, then PTX it can JIT. With
    `specific`, only arch-specific (`a`) and family (`f`) code counts."""
    major = cc // 10

    def sass_ok(number: int, suffix: str) -> bool:
        if number == cc:
            return True
        return suffix != "a" and number // 10 == major and number < cc

    def ptx_ok(number: int, suffix: str) -> bool:
        if suffix == "a":
            return number == cc
        if suffix == "f":
            return number // 10 == major and number <= cc
        return number <= cc

    candidates = [(_split(n), n) for n in archs.sass] + [(_split(n), n) for n in archs.ptx]
    if specific:
        candidates = [(parts, n) for parts, n in candidates if parts and parts[2] in ("a", "f")]
    exact = [n for parts, n in candidates if parts and parts[0] == "sm" and parts[1] == cc]
    if exact:
        return exact[0]
    for parts, name in candidates:
        if parts and parts[0] == "sm" and sass_ok(parts[1], parts[2]):
            return name
    for parts, name in candidates:
        if parts and parts[0] == "compute" and ptx_ok(parts[1], parts[2]):
            return name
    return None


def _listed(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


def carries(module: str, archs: CompiledArchs) -> str:
    """`vllm/_C.abi3.so has SASS for sm_80, sm_90 and sm_100 and PTX for compute_90`."""
    sass = f"SASS for {_listed(archs.sass)}" if archs.sass else "no SASS"
    ptx = f"PTX for {_listed(archs.ptx)}" if archs.ptx else "no PTX"
    return f"{module} has {sass} and {ptx}"


@dataclass(frozen=True)
class CompiledArch(Kind):
    """A CUDA module of an installed distribution carries code this GPU can run."""

    key = "compiled_arch"
    options = ("variant",)

    module: str  # DIST/PATH
    specific: bool = False  # `variant: specific`: only `a`/`f` code counts

    @property
    def dist(self) -> str:
        return self.module.split("/", 1)[0]

    @classmethod
    def parse(
        cls, value: Node, fields: Mapping[str, Node], child: ParseChild, named: Named
    ) -> Kind:
        module = value.text()
        dist, _, path = module.partition("/")
        if not dist or not path or path.startswith("/") or ".." in path.split("/"):
            raise value.error(
                "should be DIST/PATH: a distribution, then a file it installs "
                "(e.g. vllm/_C.abi3.so)"
            )
        variant = optional(fields, "variant", lambda n: n.choice(VARIANTS))
        return cls(module, specific=variant == "specific")

    @property
    def per_gpu(self) -> bool:
        return True

    def default_id(self) -> str:
        return self.key

    def packages(self) -> tuple[str, ...]:
        return (self.dist,)

    def wanted(self, gpu: Gpu | None) -> str:
        if gpu is None:
            return f"{self.module} built for this GPU"
        if self.specific:
            return f"{self.module} with sm_{gpu.cc}a or family (f) code for sm_{gpu.cc}"
        return f"{self.module} with SASS or PTX for sm_{gpu.cc}"

    def check(self, ctx: Context, gpu: Gpu | None) -> Check:
        wanted = self.wanted(gpu)

        # What cannot be looked at is said ("not read", a skip), neither failed nor passed: a
        # distribution that is not installed (whether it must be is the `package` kind's
        # business; an engine judged at a version that is not here has no build to read), no
        # GPU to check it for (the host's own finding says so once), a snapshot from before the
        # scan existed, or an install whose file list lacks the module (an editable or source
        # install, or a release that renamed it). Only a module that is there and wrong refuses
        # the GPU.
        def unread(why: str) -> Check:
            return Check(True, f"{self.module} not read: {why}", wanted, read=False)

        if ctx.facts.packages.version(self.dist) is None:
            return unread(f"{self.dist} is not installed")
        if gpu is None:
            return unread("no GPU to check it for")
        archs = ctx.facts.compiled_archs.get(self.module)
        if archs is None:
            return unread("the facts carry no scan of it")
        if archs.error and archs.path is None:
            return unread(archs.error)
        if archs.error:
            return Check(False, f"{self.module} could not be read: {archs.error}", wanted)
        if not archs.sass and not archs.ptx:
            return Check(False, f"{self.module} carries no CUDA kernels", wanted)
        measured = f"{carries(self.module, archs)}; GPU {gpu.index} is sm_{gpu.cc}"
        return Check(runs_on(archs, gpu.cc, self.specific) is not None, measured, wanted)

    def describe(self) -> str:
        if self.specific:
            return (
                f"`{self.module}` built with arch-specific or family code for the GPU "
                "(`sm_XYa`/`sm_XYf`, where the FP4 tensor-core instructions exist)"
            )
        return f"`{self.module}` built for the GPU (SASS for its architecture, or PTX it can JIT)"

    def default_fix(self, ctx: Context) -> str | None:
        archs = ctx.facts.compiled_archs.get(self.module)
        missing = sorted(
            {g.cc for g in ctx.gpus if archs is None or runs_on(archs, g.cc, self.specific) is None}
        )
        if self.specific:
            listed = " ".join(f"{cc // 10}.{cc % 10}a" for cc in missing) or "X.Ya"
            return (
                f"install a build of {self.dist} made for the arch-specific target, or rebuild "
                f"with TORCH_CUDA_ARCH_LIST='{listed}' (or the family target, e.g. 12.0f); "
                "'X.Y' or 'X.Y+PTX' alone skips the FP4 kernels"
            )
        target = " and ".join(f"sm_{cc}" for cc in missing) or "this GPU"
        return f"install a build of {self.dist} for {target} (e.g. the cu128/cu129 wheel)"


def modules_read(profile: Profile) -> list[str]:
    """Every module the profile's `compiled_arch` rules name: the probe scans these only."""
    return list(dict.fromkeys(_modules(profile.requirements())))


def _modules(reqs: Iterable[Requirement]) -> Iterable[str]:
    for req in reqs:
        if isinstance(req.kind, CompiledArch):
            yield req.kind.module
        yield from _modules(req.children)
