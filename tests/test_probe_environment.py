"""The environment probe: an allowlist of FP4-relevant names, and no secret ever recorded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fp4doctor.facts import REDACTED
from fp4doctor.probe.environment import PREFIXES, SECRET_MARKERS, probe_environment


def test_allowlisted_names_only() -> None:
    env = {
        "VLLM_NVFP4_GEMM_BACKEND": "flashinfer-cudnn",
        "SGLANG_FLASHINFER_FP4_GEMM_BACKEND": "cudnn",
        "FLASHINFER_DISABLE_JIT": "1",
        "CUDNN_LOGLEVEL_DBG": "3",
        "TRTLLM_ENABLE_PDL": "1",
        "TLLM_LOG_LEVEL": "INFO",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "CUDA_HOME": "/usr/local/cuda",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "TORCH_CUDA_ARCH_LIST": "10.0a",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "FP4DOCTOR_PROFILE": "x",
        "HOME": "/home/alice",
        "PATH": "/usr/bin",
        "HF_TOKEN": "hf_secret",
        "vllm_lowercase": "not an engine variable",
        "MY_VLLM_THING": "no",
    }
    found = probe_environment(env)
    assert set(found) == {
        "VLLM_NVFP4_GEMM_BACKEND",
        "SGLANG_FLASHINFER_FP4_GEMM_BACKEND",
        "FLASHINFER_DISABLE_JIT",
        "CUDNN_LOGLEVEL_DBG",
        "TRTLLM_ENABLE_PDL",
        "TLLM_LOG_LEVEL",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_HOME",
        "NVIDIA_VISIBLE_DEVICES",
        "TORCH_CUDA_ARCH_LIST",
        "LD_LIBRARY_PATH",
        "FP4DOCTOR_PROFILE",
    }
    assert found["VLLM_NVFP4_GEMM_BACKEND"] == "flashinfer-cudnn"
    assert list(found) == sorted(found)


def test_secret_looking_names_are_redacted() -> None:
    env = {
        "VLLM_API_KEY": "sk-123",
        "SGLANG_AUTH_TOKEN": "t",
        "FLASHINFER_DOWNLOAD_SECRET": "s",
        "NVIDIA_API_KEY": "nvapi-1",  # not an FP4 variable: never recorded at all
        "CUDA_PASSWORD": "p",
        "TRTLLM_CREDENTIALS": "c",
        "VLLM_S3_AUTH": "a",
        "VLLM_USE_V1": "1",
    }
    found = probe_environment(env)
    assert found["VLLM_USE_V1"] == "1"
    assert "NVIDIA_API_KEY" not in found
    assert {name for name, value in found.items() if value == REDACTED} == set(env) - {
        "VLLM_USE_V1",
        "NVIDIA_API_KEY",
    }
    for secret in ("sk-123", "nvapi-1", "t", "s", "p", "c", "a"):
        assert secret not in found.values()


def test_real_environment_is_read_by_default() -> None:
    assert isinstance(probe_environment(), dict)


names = st.builds(
    lambda prefix, middle, marker, tail: prefix + middle + marker + tail,
    st.sampled_from(PREFIXES),
    st.text(alphabet="ABCXYZ_", max_size=5),
    st.sampled_from(SECRET_MARKERS),
    st.text(alphabet="ABCXYZ_", max_size=5),
)


@given(st.dictionaries(names, st.text(min_size=1, max_size=20), max_size=6))
def test_no_secret_value_survives(env: dict[str, str]) -> None:
    found = probe_environment(env)
    assert set(found) == set(env)
    assert all(value == REDACTED for value in found.values())
