"""The smoke stage on a real GPU (run on the H200 device machine; skipped elsewhere).

On an H200 (compute capability 9.0) every native FP4 path must be refused by the library
itself, with its own words; the emulation path must pass on CUDA.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from smoke_fakes import fake_env

from fp4doctor.smoke import ADAPTERS, run_smoke
from fp4doctor.smoke.runner import physical_device

pytestmark = pytest.mark.gpu

FLASHINFER = [a for a in ADAPTERS if a.startswith("flashinfer-") and not a.endswith("-moe")]
FLASHINFER_MOE = [a for a in ADAPTERS if a.startswith("flashinfer-") and a.endswith("-moe")]

_PROBE = """
import json, torch
ok = torch.cuda.is_available()
n = torch.cuda.device_count() if ok else 0
props = [torch.cuda.get_device_properties(i) for i in range(n)]
print(json.dumps({"available": ok, "count": n,
                  "cc": [p.major * 10 + p.minor for p in props],
                  "uuid": [str(getattr(p, "uuid", "?")) for p in props]}))
"""


@functools.lru_cache(maxsize=1)
def _cuda() -> dict[str, Any]:
    """What torch sees, asked in a subprocess (collection on a CPU host stays cheap)."""
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        return {"available": False, "count": 0, "cc": [], "uuid": []}
    info: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return info


@pytest.fixture(scope="module")
def cuda() -> dict[str, Any]:
    info = _cuda()
    if not info["available"]:
        pytest.skip("needs an NVIDIA GPU (torch.cuda.is_available() is false)")
    return info


def _below_blackwell(cuda: dict[str, Any]) -> int:
    cc = int(cuda["cc"][0])
    if cc >= 100:
        pytest.skip(f"GPU 0 has compute capability {cc}: native FP4 runs there for real")
    return cc


def test_emulation_passes_on_cuda(cuda: dict[str, Any]) -> None:
    (r,) = run_smoke(["emulation"], [0])
    assert (r.device, r.gpu) == ("cuda:0", 0)
    assert r.status == "pass", r.reason
    assert r.unwritten == 0 and 0.99 < (r.norm_ratio or 0) < 1.01
    assert r.median_ms is not None and r.median_ms > 0


def test_cudnn_graph_is_refused_below_blackwell(cuda: dict[str, Any]) -> None:
    if importlib.util.find_spec("cudnn") is None:
        pytest.skip("nvidia-cudnn-frontend is not installed")
    _below_blackwell(cuda)
    (r,) = run_smoke(["cudnn-graph"], [0])
    assert r.status == "fail", r
    assert r.reason.startswith("cuDNN refused the NVFP4 graph"), r.reason
    assert r.library_error is not None
    assert any(
        words in r.library_error
        for words in (
            "FORT_NATIVE_10X engine is only supported since Blackwell",
            "No valid engine configs",
            "cudnnGraphNotSupportedError",
        )
    ), r.library_error


@pytest.mark.parametrize("adapter", FLASHINFER)
def test_flashinfer_backends_are_refused_by_flashinfer_below_blackwell(
    cuda: dict[str, Any], adapter: str
) -> None:
    if importlib.util.find_spec("flashinfer") is None:
        pytest.skip("flashinfer-python is not installed")
    cc = _below_blackwell(cuda)
    (r,) = run_smoke([adapter], [0])
    backend = adapter.removeprefix("flashinfer-")
    assert r.status == "fail", r
    assert "BackendSupportedError" in r.reason, r.reason
    assert f"does not support backend '{backend}' with capability {cc}" in r.reason


@pytest.mark.parametrize("adapter", FLASHINFER_MOE)
def test_flashinfer_moe_backends_do_not_run_below_blackwell(
    cuda: dict[str, Any], adapter: str
) -> None:
    """Below Blackwell a FlashInfer fused MoE never passes, and says why in FlashInfer's words:
    CUTLASS picks its module by the GPU's arch, one no wheel ships prebuilt for SM90, so offline
    it is a JIT skip (MissingJITCacheError); CuTe-DSL is declared for SM100-family GPUs
    (`@supported_compute_capability`) and is absent where CuTe DSL is unusable; TRT-LLM's own
    predicate (`is_trtllm_moe_supported`) raises in FlashInfer 0.7.4, so its call decides."""
    if importlib.util.find_spec("flashinfer") is None:
        pytest.skip("flashinfer-python is not installed")
    _below_blackwell(cuda)
    (r,) = run_smoke([adapter], [0])
    assert r.status in ("skip", "fail"), r
    assert "'int' object has no attribute 'type'" not in r.reason  # not our pre-check's error
    if r.status == "skip":
        named = ("JIT", "download", "not installed", "CuTe DSL")
        assert any(words in r.reason for words in named), r.reason


def test_torch_scaled_mm_is_refused_below_blackwell(cuda: dict[str, Any]) -> None:
    _below_blackwell(cuda)
    (r,) = run_smoke(["torch-scaled-mm"], [0])
    if r.status == "skip":
        assert "float4_e2m1fn_x2" in r.reason  # this torch has no NVFP4 dtype
    else:
        assert r.status == "fail", r  # cuBLASLt: CUBLAS_STATUS_NOT_SUPPORTED on SM90


def test_cuda_visible_devices_restriction_is_honoured(cuda: dict[str, Any]) -> None:
    """The engine's cuda:0 under CUDA_VISIBLE_DEVICES=<last GPU> is that physical GPU."""
    last = cuda["count"] - 1
    entry = physical_device(last, os.environ.get("CUDA_VISIBLE_DEVICES"))
    base = {**os.environ, "CUDA_VISIBLE_DEVICES": str(entry)}
    (r,) = run_smoke(["fake-where"], [0], env=fake_env(base=base))
    assert r.status == "skip", r
    assert r.reason.startswith(f"where: CUDA_VISIBLE_DEVICES='{entry}' devices=1 ")
    assert r.reason.endswith(f"uuid={cuda['uuid'][last]}")


def test_two_gpus_run_in_parallel(cuda: dict[str, Any]) -> None:
    if cuda["count"] < 2:
        pytest.skip("needs two GPUs")
    where = run_smoke(["fake-where"], [0, 1], env=fake_env())
    assert [r.gpu for r in where] == [0, 1]
    assert all("devices=1" in r.reason for r in where)  # each worker sees only its own GPU
    assert [r.reason.rsplit("uuid=", 1)[1] for r in where] == cuda["uuid"][:2]

    run_smoke(["emulation"], [0])  # warm caches before timing
    t0 = time.monotonic()
    run_smoke(["emulation"], [0])
    one = time.monotonic() - t0
    t0 = time.monotonic()
    both = run_smoke(["emulation"], [0, 1])
    two = time.monotonic() - t0
    assert [(r.gpu, r.status) for r in both] == [(0, "pass"), (1, "pass")]
    assert two < 1.5 * one, f"two GPUs took {two:.1f} s, one took {one:.1f} s"
