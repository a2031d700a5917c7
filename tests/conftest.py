"""Shared test helpers. Keep each addition in its own clearly named function."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest

from fp4doctor import facts

HOSTS_DIR = Path(__file__).parent / "fixtures" / "hosts"


# --- fixture hosts -----------------------------------------------------------------------------


def load_fixture_host(name: str) -> facts.HostFacts:
    """The facts of tests/fixtures/hosts/<name>.json."""
    return facts.load(HOSTS_DIR / f"{name}.json")


def fixture_host_names() -> list[str]:
    """Every fixture host, by file stem."""
    return sorted(p.stem for p in HOSTS_DIR.glob("*.json"))


@pytest.fixture
def fixture_host() -> Callable[[str], facts.HostFacts]:
    """`fixture_host("b200")` loads a fixture host's facts."""
    return load_fixture_host


# --- the `gpu` marker --------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def visible_gpu_count() -> int:
    """How many GPUs NVML shows this process (0 when NVML is absent or fails)."""
    from fp4doctor.probe.gpus import probe_gpus

    try:
        return len(probe_gpus().gpus)
    except Exception:
        return 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked `gpu` when no GPU is visible."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu_items and visible_gpu_count() == 0:
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU (NVML sees none)")
        for item in gpu_items:
            item.add_marker(skip)
