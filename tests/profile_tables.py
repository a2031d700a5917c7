"""What a shipped profile says about FlashInfer, computed the same way by every test that asks.

`table_at` is the set of compute capabilities a profile lets a FlashInfer-backed backend use with
a given FlashInfer release; tests/test_profiles_shipped.py compares it with the reference tables
and the installed FlashInfer, tests/test_release_data.py with every extracted release.
"""

from __future__ import annotations

from collections.abc import Iterator

from packaging.specifiers import SpecifierSet

from fp4doctor import versions
from fp4doctor.profile.kinds.all_of import AllOf
from fp4doctor.profile.kinds.any_of import AnyOf
from fp4doctor.profile.kinds.base import Requirement
from fp4doctor.profile.kinds.compute_capability import ComputeCapability
from fp4doctor.profile.kinds.package import Package
from fp4doctor.profile.kinds.use import Use
from fp4doctor.profile.model import Backend, Profile

FLASHINFER = "flashinfer-python"
# The smoke adapter that calls flashinfer.mm_fp4(backend=...), and that backend's key in
# flashinfer-mm_fp4-cc-by-version.json / its name for mm_fp4.is_backend_supported (and in
# tools/extract/data/flashinfer.json).
FLASHINFER_ADAPTERS = {
    "flashinfer-cudnn": ("cudnn", "cudnn"),
    "flashinfer-cutlass": ("cutlass", "cutlass"),
    "flashinfer-trtllm": ("trtllm", "trtllm"),
    "flashinfer-cute-dsl": ("cute_dsl", "cute-dsl"),
    "flashinfer-b12x": ("b12x", "b12x"),
}


def contains(spec: SpecifierSet, version: str) -> bool:
    """The doctor's own meaning of "this version is in that range" (fp4doctor.versions)."""
    return bool(versions.contains(spec, version))


def flashinfer_backends(p: Profile) -> Iterator[tuple[Backend, str, str]]:
    """(backend, JSON key, mm_fp4 backend name) for every backend that calls flashinfer.mm_fp4."""
    for b in p.backends.values():
        for adapter in b.smoke:
            if adapter in FLASHINFER_ADAPTERS:
                key, name = FLASHINFER_ADAPTERS[adapter]
                yield b, key, name
                break


def applies(req: Requirement, fi_version: str) -> bool:
    for dist, spec in req.when:
        assert dist == FLASHINFER, f"a FlashInfer table rule conditional on {dist}"
        if not contains(spec, fi_version):
            return False
    return True


def flashinfer_rules(reqs: tuple[Requirement, ...]) -> Iterator[Requirement]:
    """Every rule that must hold (use and all_of expanded; any_of alternatives left out)."""
    for req in reqs:
        if isinstance(req.kind, (Use, AllOf)):
            yield from flashinfer_rules(req.children)
        elif not isinstance(req.kind, AnyOf):
            yield req


def table_at(backend: Backend, fi_version: str) -> set[int] | None:
    """The CCs the profile lets this backend use with FlashInfer `fi_version` (None: no backend).

    FlashInfer's table is the explicit CC lists; the engines' own gates are ranges and are left
    out. A required flashinfer-python version that excludes `fi_version` means the backend does
    not exist in that FlashInfer.
    """
    table: set[int] | None = None
    for req in flashinfer_rules(backend.requires):
        kind = req.kind
        if (
            isinstance(kind, Package)
            and kind.name == FLASHINFER
            and not req.when
            and kind.version is not None
            and not contains(kind.version, fi_version)
        ):
            return None
        if isinstance(kind, ComputeCapability) and kind.exact:
            if not applies(req, fi_version):
                continue
            ccs = set(kind.exact)
            table = ccs if table is None else table & ccs
    assert table is not None, f"{backend.name} has no compute-capability list"
    return table


def named_conditions(p: Profile) -> dict[str, tuple[Requirement, ...]]:
    """Every named condition a profile uses (its own and its modules'), by name."""
    found: dict[str, tuple[Requirement, ...]] = {}

    def walk(reqs: tuple[Requirement, ...]) -> None:
        for req in reqs:
            if isinstance(req.kind, Use):
                found[req.kind.name] = req.children
            walk(req.children)

    for b in p.backends.values():
        walk(b.requires)
        for a in b.advisories:
            walk(a.conditions)
    for era in p.eras:
        for step in era.auto:
            walk(step.conditions)
    return found
