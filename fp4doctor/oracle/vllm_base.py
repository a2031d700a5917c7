"""What every vLLM adapter shares: the capability stub, the environment and argument parsing of
one case, the MoE layer's configuration, and vLLM's kernel names in fp4doctor's words.

Its functions run only in the oracle worker, under the engine's interpreter (torch and vLLM
there, imported inside them); at import it needs neither, so verify-log reads its name tables.
Read from the released wheels 0.18.0, 0.24.0, 0.33.0 and 0.34.0:
- vllm/platforms/__init__.py: `current_platform` is resolved lazily and can be assigned
  (`__setattr__`), so the stub is in place before any selection module reads it;
- vllm/platforms/cuda.py: `NonNvmlCudaPlatform` asks torch for the capability, name and
  count; the stub subclasses it and answers those three only;
- vllm/engine/arg_utils.py: `EngineArgs.add_cli_args` and `from_cli_args` over vLLM's own
  `FlexibleArgumentParser` (vllm/utils/argparse_utils.py), which also reads `--config FILE`;
- vllm/model_executor/layers/fused_moe/oracle/nvfp4.py: `select_nvfp4_moe_backend(config,
  weight_key, activation_key)`, called by ModelOpt's NVFP4 MoE method with kNvfp4Static and
  kNvfp4Dynamic (vllm/model_executor/layers/quantization/modelopt.py).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from fp4doctor.oracle import engine_side
from fp4doctor.oracle.answers import Answer, Case

# vLLM's linear kernel (0.24+: class name; 0.18-0.23: NvFp4LinearBackend value) -> fp4doctor.
LINEAR_NAMES = {
    "FlashInferCuteDslNvFp4LinearKernel": "flashinfer-cutedsl",
    "FlashInferCuteDslNvFp4W4A16LinearKernel": "flashinfer-cutedsl-w4a16",
    "FlashInferCutlassNvFp4LinearKernel": "flashinfer-cutlass",
    "FlashInferB12xNvFp4LinearKernel": "flashinfer-b12x",
    "FlashInferTrtllmNvFp4LinearKernel": "flashinfer-trtllm",
    "FlashInferCudnnNvFp4LinearKernel": "flashinfer-cudnn",
    "CutlassNvFp4LinearKernel": "cutlass",
    "MarlinNvFp4LinearKernel": "marlin",
    "FbgemmNvFp4LinearKernel": "fbgemm",
    "B12xNvFp4LinearKernel": "b12x",
    "B12xNvFp4W4A16LinearKernel": "b12x-w4a16",
    "TorchNvFp4LinearKernel": "torch",
    "HummingNvFp4LinearKernel": "humming",
    "EmulationNvFp4LinearKernel": "emulation",
    # vllm/model_executor/layers/quantization/utils/nvfp4_utils.py NvFp4LinearBackend (0.18)
    "cutlass": "cutlass",
    "flashinfer-cutlass": "flashinfer-cutlass",
    "flashinfer-trtllm": "flashinfer-trtllm",
    "flashinfer-cudnn": "flashinfer-cudnn",
    "fbgemm": "fbgemm",
    "marlin": "marlin",
    "emulation": "emulation",
}
# vllm/model_executor/layers/fused_moe/oracle/nvfp4.py NvFp4MoeBackend -> fp4doctor.
MOE_NAMES = {
    "FLASHINFER_TRTLLM": "flashinfer-trtllm-moe",
    "FLASHINFER_CUTLASS": "flashinfer-cutlass-moe",
    "FLASHINFER_CUTEDSL": "flashinfer-cutedsl-moe",
    "FLASHINFER_CUTEDSL_BATCHED": "flashinfer-cutedsl-moe",
    "FLASHINFER_B12X": "flashinfer-b12x-moe",
    "B12X": "b12x-moe",
    "VLLM_CUTLASS": "cutlass-moe",
    "MARLIN": "marlin-moe",
    "HUMMING": "humming-moe",
    "EMULATION": "emulation-moe",
}

_CAPABILITY: list[tuple[int, int]] = [(0, 0)]  # the case being asked (the stub reads it)
_STUB_NAME = "fp4doctor capability stub"


def stub_platform() -> None:
    """Make vLLM's current platform CUDA with the case's compute capability: only the
    capability, the device name and the device count are answered here; everything else is
    vLLM's own `NonNvmlCudaPlatform`. Must run before any selection module is imported."""
    import vllm.platforms
    import vllm.platforms.cuda as cuda
    from vllm.platforms.interface import DeviceCapability

    class StubbedCudaPlatform(cuda.NonNvmlCudaPlatform):  # type: ignore[misc, name-defined]
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            return DeviceCapability(*_CAPABILITY[0])

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return _STUB_NAME

        @classmethod
        def device_count(cls) -> int:
            return 1

    vllm.platforms.current_platform = StubbedCudaPlatform()


def set_capability(cc: tuple[int, int]) -> None:
    """Point the stub at `cc`, and forget what vLLM memoised for the last case's capability."""
    _CAPABILITY[0] = cc
    engine_side.forget_memoised("vllm")


@functools.cache
def _parser() -> Any:
    """vLLM's `vllm serve` argument parser, built once per worker: building it walks every
    config dataclass (0.14 s a case in vLLM 0.34.0, the most of a question's cost), and what it
    parses is read from the arguments, not from the environment the case sets."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return EngineArgs.add_cli_args(FlexibleArgumentParser())


def engine_args(args: tuple[str, ...]) -> Any:
    """vLLM's EngineArgs for `args`, through its own parser, as `vllm serve` builds them."""
    from vllm.engine.arg_utils import EngineArgs

    parser = _parser()
    namespace = engine_side.parsed(
        lambda: parser.parse_args(["--model", "fp4doctor-oracle", *args]), args
    )
    return EngineArgs.from_cli_args(namespace)


def moe_config(moe_backend: str) -> Any:
    """A FusedMoEConfig as a single-GPU NVFP4 MoE layer has it (8 experts, top-2, SiLU, bf16
    activations, no parallelism), its required fields filled by name so that the fields
    each release adds or renames (intermediate_size_per_partition -> intermediate_size) fit."""
    import torch
    from vllm.model_executor.layers.fused_moe import config as moe

    activation = _enum_member("vllm.model_executor.layers.fused_moe.activation", "MoEActivation",
                              "SILU") or "silu"  # fmt: skip
    given = {
        "num_experts": 8,
        "experts_per_token": 2,
        "hidden_dim": 4096,
        "intermediate_size": 2048,
        "intermediate_size_per_partition": 2048,
        "num_local_experts": 8,
        "num_logical_experts": 8,
        "activation": activation,
        "device": "cuda",
        "routing_method": moe.RoutingMethodType.Renormalize,
        "moe_parallel_config": _filled(moe.FusedMoEParallelConfig, {}),
        "in_dtype": torch.bfloat16,
        "moe_backend": moe_backend,
    }
    return _filled(moe.FusedMoEConfig, given)


def _enum_member(module: str, cls: str, member: str) -> Any:
    try:
        return getattr(getattr(__import__(module, fromlist=[cls]), cls), member)
    except (ImportError, AttributeError):
        return None


def _filled(cls: Any, given: dict[str, Any]) -> Any:
    """`cls(**kwargs)` for a dataclass: `given` where it names a field, the neutral value for
    the other required ones (sizes 1, ranks 0, flags False)."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name in given:
            kwargs[f.name] = given[f.name]
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        elif f.name.endswith("_size"):
            kwargs[f.name] = 1
        elif f.name.endswith("_rank"):
            kwargs[f.name] = 0
        elif hints.get(f.name) is bool:
            kwargs[f.name] = False
        elif f.name == "all2all_backend":
            kwargs[f.name] = "allgather_reducescatter"
        else:
            raise TypeError(f"{cls.__name__}.{f.name} ({hints.get(f.name)}) has no value to give")
    return cls(**kwargs)


def select_moe(moe_backend: str, a16: bool = False) -> tuple[str, Any]:
    """vLLM's NVFP4 MoE selection: (NvFp4MoeBackend name, kernel). A W4A4 layer is asked with
    kNvfp4Dynamic activations; a weight-only (W4A16) one with none, as ModelOpt's W4A16_NVFP4
    and compressed-tensors' NVFP4A16 experts ask (`activation_key=None if use_a16`,
    modelopt.py and compressed_tensors_moe*.py, wheels 0.18.0-0.34.0)."""
    from vllm.model_executor.layers.fused_moe.oracle import nvfp4
    from vllm.model_executor.layers.quantization.utils.quant_utils import (
        kNvfp4Dynamic,
        kNvfp4Static,
    )

    backend, kernel = nvfp4.select_nvfp4_moe_backend(
        moe_config(moe_backend), kNvfp4Static, None if a16 else kNvfp4Dynamic
    )
    return str(backend.name), kernel


def backend_of(case: Case, engine_name: str) -> str | None:
    """fp4doctor's backend for the kernel vLLM named, or None when the rules know no such
    backend: the one vocabulary the answers are built from, and checked against by the parent
    (oracle/query.py)."""
    return (MOE_NAMES if case.family == "moe" else LINEAR_NAMES).get(engine_name)


def picked(case: Case, engine_name: str) -> Answer:
    """The answer for a kernel vLLM picked, named in fp4doctor's words where the rules know it."""
    return Answer(case.key, engine_name=engine_name, backend=backend_of(case, engine_name))


class Session:
    """vLLM's selection code, imported (with the capability stub in place when asked); an
    adapter says where its release selects the linear kernel (`linear`) and how the parsed
    arguments reach the selection (`configured`)."""

    backend_of = staticmethod(backend_of)  # its vocabulary (worker.vocabulary)

    def __init__(self, stub: bool, model: Mapping[str, Any] | None = None) -> None:
        """Import the release's selection code (raises what the import raises: ImportError,
        OSError); `model` is not read, the selection asked takes no model."""
        self.stub = stub
        if stub:
            stub_platform()
        self.load()
        import vllm.model_executor.layers.fused_moe.oracle.nvfp4  # noqa: F401  (fails early)

    def load(self) -> None:
        """Import the release's linear selection (raises what the import raises)."""
        raise NotImplementedError

    def configured(self, args: Any) -> AbstractContextManager[Any]:
        """The selection's view of the parsed arguments (its `moe_backend` read by MoE)."""
        raise NotImplementedError

    def linear(self, case: Case) -> str:
        """vLLM's name of the linear kernel it selects for the case."""
        raise NotImplementedError

    def ask(self, case: Case) -> Answer:
        if self.stub:
            set_capability(case.cc)
        with engine_side.environment(case):
            args = engine_args(case.args)
            with self.configured(args) as config:
                if case.family == "moe":
                    name, _kernel = select_moe(config.moe_backend, case.a16)
                    return picked(case, name)
                return picked(case, self.linear(case))
