"""The smoke stage on a CPU host, through real worker processes and the real libraries."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fp4doctor.smoke import ADAPTERS, SmokeResult, run_smoke
from fp4doctor.smoke.runner import physical_device, worker_env

# mm_fp4's adapters (the MoE ones build their own problem: tests/test_moe.py)
FLASHINFER = [a for a in ADAPTERS if a.startswith("flashinfer-") and not a.endswith("-moe")]
HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_FLASHINFER = importlib.util.find_spec("flashinfer") is not None
NO_TORCH = "torch is not installed (pip install 'fp4doctor[smoke]')"

if HAS_TORCH:
    from fp4doctor.smoke.cases import SHAPES  # imports torch
else:
    SHAPES = []  # the tests over the shapes need torch and are skipped without it

# Runs in a fresh interpreter, so "the main process never imports torch" can be checked.
_ALL_ON_CPU = """
import json, sys
from fp4doctor.smoke import ADAPTERS, SmokeResult, run_smoke
results = run_smoke(list(ADAPTERS), [])
heavy = sorted(m for m in ("torch", "flashinfer", "cudnn") if m in sys.modules)
print(json.dumps({"imported": heavy, "results": [r.to_dict() for r in results]}))
"""


def _run_all_on_cpu(workdir: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _ALL_ON_CPU], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)  # stdout holds our JSON and nothing else
    doc["by_adapter"] = {r["adapter"]: r for r in doc["results"]}
    return doc


# Started in the background once collection ends (tests/conftest.py, `prefetched`); `pinned`
# is defined below.
PREFETCH: dict[str, Callable[[Path], Any]] = {}


@pytest.fixture(scope="module")
def all_on_cpu(prefetched: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    if not HAS_TORCH:
        pytest.skip(NO_TORCH)  # the workers would only report that torch is missing
    return prefetched(__name__, "all_on_cpu", _run_all_on_cpu)


def test_the_main_process_imports_no_torch(all_on_cpu: dict[str, Any]) -> None:
    assert all_on_cpu["imported"] == []


def test_every_adapter_reports_once_in_order(all_on_cpu: dict[str, Any]) -> None:
    assert [r["adapter"] for r in all_on_cpu["results"]] == list(ADAPTERS)
    for r in all_on_cpu["results"]:
        assert r["device"] == "cpu" and r["gpu"] is None
        assert set(r) == {
            "adapter", "device", "gpu", "status", "reason", "max_abs_err", "tolerance",
            "norm_ratio", "unwritten", "median_ms", "shapes", "library_error",
        }  # fmt: skip


def test_emulation_passes_on_cpu_with_sane_numbers(all_on_cpu: dict[str, Any]) -> None:
    r = all_on_cpu["by_adapter"]["emulation"]
    assert r["status"] == "pass", r["reason"]
    assert r["shapes"] == [list(s) for s in SHAPES]
    assert r["unwritten"] == 0
    assert 0 <= r["max_abs_err"] < r["tolerance"]
    assert 0.99 < r["norm_ratio"] < 1.01
    assert 0 < r["median_ms"] < 1000
    assert "3 shapes match the reference" in r["reason"]


def test_adapters_that_need_a_gpu_skip_on_cpu(all_on_cpu: dict[str, Any]) -> None:
    for name in ADAPTERS:
        if name in ("emulation", "emulation-moe"):  # the CPU runs (tests/test_moe.py)
            continue
        r = all_on_cpu["by_adapter"][name]
        assert r["status"] == "skip", (name, r)
        assert r["reason"].startswith(("needs a CUDA GPU", "vLLM not installed")) or (
            "not installed" in r["reason"]
        ), r["reason"]
        assert r["shapes"] is None and r["median_ms"] is None


@pytest.mark.skipif(not HAS_FLASHINFER, reason="flashinfer-python is not installed")
def test_flashinfer_adapters_load_the_real_library_on_cpu(all_on_cpu: dict[str, Any]) -> None:
    from importlib.metadata import version

    label = f"flashinfer-python {version('flashinfer-python')}"
    for name in FLASHINFER:
        r = all_on_cpu["by_adapter"][name]
        assert r["status"] == "skip"
        assert r["reason"] == f"needs a CUDA GPU ({label} imported fine)"


@pytest.mark.skipif(not HAS_FLASHINFER, reason="flashinfer-python is not installed")
def test_flashinfer_on_cpu_tensors_answers_in_its_own_words() -> None:
    """Called in-process on CPU tensors, the real mm_fp4 refuses with its own text, which the
    harness reports as `fail` (on a GPU host the same path carries BackendSupportedError)."""
    from fp4doctor.smoke import harness
    from fp4doctor.smoke.adapters.flashinfer_mm_fp4 import FlashInferMmFp4

    forced = FlashInferMmFp4("flashinfer-cudnn", "cudnn", supports_cpu=True)  # call it on CPU
    outcome = harness.run_adapter(forced, "cpu", shapes=[(7, 256, 512)])
    assert outcome.status == "fail"
    assert outcome.reason == "ValueError: device must be a cuda device"
    assert outcome.library_error == "ValueError: device must be a cuda device"


@pytest.mark.skipif(not HAS_FLASHINFER, reason="flashinfer-python is not installed")
@pytest.mark.parametrize("name", FLASHINFER)
@pytest.mark.parametrize("shape", SHAPES)
def test_flashinfer_arguments_pass_flashinfers_own_checks(
    name: str, shape: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operands each adapter hands mm_fp4 satisfy the installed FlashInfer's own problem
    check (dtypes, 2-D, K agreement, alpha, block size) and the documented scale shapes."""
    import flashinfer
    import torch

    gemm_base = pytest.importorskip("flashinfer.gemm.gemm_base")
    check = getattr(gemm_base, "_check_mm_fp4_problem_size", None)
    if check is None:
        pytest.skip("this flashinfer has no _check_mm_fp4_problem_size")
    from fp4doctor.smoke.adapters import load_adapter
    from fp4doctor.smoke.cases import make_case

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(flashinfer, "mm_fp4", lambda *a, **k: calls.append((a, k)))
    m, n, k = shape
    case = make_case(m, n, k, "cpu")
    load_adapter(name).bind(case, case.new_output("cpu"))()
    ((args, kwargs),) = calls
    assert check(*args, **kwargs) is True
    a, b, a_sf, b_sf, alpha, out_dtype = args

    def rup(x: int, y: int) -> int:
        return -(-x // y) * y

    assert a.shape == (m, k // 2) and b.shape == (k // 2, n) and b.stride() == (1, k // 2)
    eight_by_four = name == "flashinfer-trtllm" and m <= 32
    assert kwargs.get("use_8x4_sf_layout", False) is eight_by_four
    assert a_sf.dtype == torch.uint8 and b_sf.dtype == torch.uint8
    assert a_sf.shape == (rup(m, 8 if eight_by_four else 128), rup(k // 16, 4))
    assert b_sf.shape == (rup(k // 16, 4), rup(n, 128))
    assert alpha.dtype == torch.float32 and alpha.numel() == 1
    assert float(alpha) == pytest.approx(case.alpha)
    assert out_dtype == torch.bfloat16 and kwargs["block_size"] == 16
    assert kwargs["backend"] == name.removeprefix("flashinfer-")
    assert kwargs["out"].dtype == torch.bfloat16 and kwargs["out"].isnan().all()


def _run_pinned(workdir: Path) -> list[SmokeResult]:
    """The engine's cuda:1 under CUDA_VISIBLE_DEVICES=5,7 (a worker pinned to "7")."""
    return run_smoke(["emulation"], [1], env={**os.environ, "CUDA_VISIBLE_DEVICES": "5,7"})


@pytest.fixture(scope="module")
def pinned(prefetched: Callable[..., list[SmokeResult]]) -> list[SmokeResult]:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA; the GPU tests cover it")
    return prefetched(__name__, "pinned", _run_pinned)


def test_a_gpu_index_is_pinned_through_the_users_cuda_visible_devices(
    pinned: list[SmokeResult],
) -> None:
    """The engine's cuda:1 under CUDA_VISIBLE_DEVICES=5,7 is physical GPU 7: the worker is
    pinned to "7". On this CPU host torch then finds no device, in its own words."""
    (r,) = pinned
    assert (r.device, r.gpu, r.status) == ("cuda:1", 1, "error")
    assert "sees no CUDA device with CUDA_VISIBLE_DEVICES='7'" in r.reason
    assert r.library_error and "Traceback" in r.library_error


if HAS_TORCH:  # (on a CUDA host `pinned` runs for nothing: its fixture skips there)
    PREFETCH.update(all_on_cpu=_run_all_on_cpu, pinned=_run_pinned)


def test_a_gpu_index_outside_cuda_visible_devices_is_an_error_without_a_worker() -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"}
    results = run_smoke(["emulation", "flashinfer-cudnn"], [3], env=env)
    assert [(r.adapter, r.status, r.gpu) for r in results] == [
        ("emulation", "error", 3),
        ("flashinfer-cudnn", "error", 3),
    ]
    assert results[0].reason == "GPU 3 is not visible to the engine: CUDA_VISIBLE_DEVICES='0,1'"


def test_no_adapters_is_no_work() -> None:
    assert run_smoke([], [0, 1]) == []


@pytest.mark.parametrize(
    ("index", "visible", "expected"),
    [
        (0, None, "0"),
        (3, None, "3"),
        (1, "5,7", "7"),
        (0, " 2 , 3 ", "2"),
        (2, "5,7", None),
        (0, "", None),
        (1, "GPU-aaaa,GPU-bbbb", "GPU-bbbb"),
        (0, "MIG-1234", "MIG-1234"),
    ],
)
def test_physical_device(index: int, visible: str | None, expected: str | None) -> None:
    assert physical_device(index, visible) == expected


def test_workers_run_with_jit_and_downloads_off_unless_allowed() -> None:
    base = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "4,5", "FLASHINFER_DISABLE_JIT": "0"}
    env = worker_env(base, "5", allow_jit=False)
    assert env["CUDA_VISIBLE_DEVICES"] == "5"
    assert env["FLASHINFER_DISABLE_JIT"] == "1" and env["FLASHINFER_NO_DOWNLOAD"] == "1"
    assert env["PATH"] == "/bin"
    allowed = worker_env(base, "5", allow_jit=True)
    assert allowed["FLASHINFER_DISABLE_JIT"] == "0"  # the user's own setting stands
    assert "FLASHINFER_NO_DOWNLOAD" not in allowed


@pytest.mark.skipif(not HAS_TORCH, reason=f"the adapter's module imports torch: {NO_TORCH}")
def test_the_backends_an_mm_fp4_declares_are_read_from_its_signature() -> None:
    from typing import Literal

    from fp4doctor.smoke.adapters.flashinfer_mm_fp4 import _listed_backends

    def mm_fp4(a: object, backend: object = "auto") -> None: ...

    mm_fp4.__annotations__["backend"] = Literal["cudnn", "cutlass"]
    assert _listed_backends(mm_fp4) == ("cudnn", "cutlass")
    mm_fp4.__annotations__["backend"] = 'Literal["cudnn", "trtllm", "auto"]'  # postponed
    assert _listed_backends(mm_fp4) == ("cudnn", "trtllm", "auto")
    mm_fp4.__annotations__["backend"] = str
    assert _listed_backends(mm_fp4) is None  # unknown: let the library answer
    del mm_fp4.__annotations__["backend"]
    assert _listed_backends(mm_fp4) is None
    assert _listed_backends(lambda a: None) is None  # no backend= at all
