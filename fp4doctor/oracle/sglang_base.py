"""What every SGLang adapter shares: the device stub, the model a case is asked for, the
server arguments through SGLang's own parser and resolution, the NVFP4 MoE method's own
runner choice, and SGLang's backend names in fp4doctor's words.

Its functions run only in the oracle worker, under the engine's interpreter (torch and SGLang
there, imported inside them); at import it needs neither. Read from the released wheels
0.5.16, 0.5.19 and 0.5.23:
- SGLang asks torch for the device (sglang/srt/utils/common.py `get_device_capability`,
  sgl_kernel/load_utils.py `_get_compute_capability`, sglang/srt/platforms/cuda.py), so on a
  host without a GPU the stub answers torch.cuda's device queries: the capability, the name,
  the count, and the memory its resolution sizes the KV cache from
  (sglang/srt/utils/common.py `get_device_memory_capacity`). Nothing of SGLang is replaced;
- sglang/srt/server_args.py `prepare_server_args(argv)`: SGLang's own parser, then its
  resolution (the per-model overrides that pick the MoE runner, e.g. flashinfer_trtllm for
  DeepSeek and Qwen3-MoE on SM100);
- sglang/srt/layers/quantization/fp4_utils.py `initialize_fp4_gemm_config` then
  `get_fp4_gemm_runner_backend()` (auto: flashinfer_cutedsl on SM100, marlin on SM80-SM90,
  flashinfer_cutlass otherwise), as the scheduler calls them (sglang/srt/managers/scheduler.py);
- sglang/srt/layers/quantization/modelopt_quant.py `ModelOptNvFp4FusedMoEMethod`: its
  constructor refuses a GPU below Blackwell unless Marlin, and `create_moe_runner` resolves
  auto (marlin on SM80-SM9x, flashinfer_trtllm otherwise) into its `_moe_runner_backend`.
"""

from __future__ import annotations

import json
import tempfile
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fp4doctor.oracle import engine_side
from fp4doctor.oracle.answers import Answer, Case

# sglang/srt/layers/quantization/fp4_utils.py Fp4GemmRunnerBackend values -> fp4doctor.
LINEAR_NAMES = {
    "flashinfer_cudnn": "flashinfer-cudnn",
    "flashinfer_cutedsl": "flashinfer-cutedsl",
    "flashinfer_cutlass": "flashinfer-cutlass",
    "flashinfer_trtllm": "flashinfer-trtllm",
    "cutlass": "sgl-cutlass",
    "marlin": "marlin",
}
# The FP4 GEMM backend under which a compressed-tensors W4A16 layer runs FlashInfer's
# mm_bf16_fp4 -> fp4doctor (compressed_tensors_w4a16_nvfp4.py; cuDNN's is not modelled).
WEIGHT_ONLY_NAMES = {"flashinfer_cutedsl": "flashinfer-cutedsl-w4a16"}
# sglang/srt/layers/moe/utils.py MoeRunnerBackend values -> fp4doctor (the NVFP4 ones).
MOE_NAMES = {
    "flashinfer_trtllm": "flashinfer-trtllm-moe",
    "flashinfer_cutlass": "flashinfer-cutlass-moe",
    "flashinfer_cutedsl": "flashinfer-cutedsl-moe",
    "cutlass": "sgl-cutlass-moe",
    "marlin": "marlin-moe",
}

# How the adapter names a weight-only kernel: the FP4 GEMM backend, then the way it runs.
_WEIGHT_ONLY_SUFFIXES = (" w4a16", " mm_bf16_fp4")


def backend_of(case: Case, engine_name: str) -> str | None:
    """fp4doctor's backend for the kernel SGLang named (as this adapter names it), or None when
    the rules know no such backend: the one vocabulary the answers are built from, and checked
    against by the parent (oracle/query.py)."""
    if case.family == "moe":
        return MOE_NAMES.get(engine_name)
    for suffix in _WEIGHT_ONLY_SUFFIXES:
        if engine_name.endswith(suffix):
            return WEIGHT_ONLY_NAMES.get(engine_name.removesuffix(suffix))
    return LINEAR_NAMES.get(engine_name)


# The models asked when --model gives none: a ModelOpt NVFP4 checkpoint's config.json, dense
# (Llama) for the linear layers and MoE (Mixtral: no per-model override of the MoE runner in
# the releases read) for the experts.
_QUANT = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
          "exclude_modules": ["lm_head"]}  # fmt: skip
_COMMON = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
           "num_hidden_layers": 2, "vocab_size": 32000, "max_position_embeddings": 8192,
           "torch_dtype": "bfloat16", "quantization_config": _QUANT}  # fmt: skip
DENSE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
         "intermediate_size": 14336, **_COMMON}  # fmt: skip
MOE = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
       "intermediate_size": 14336, "num_local_experts": 8, "num_experts_per_tok": 2,
       **_COMMON}  # fmt: skip

_CAPABILITY: list[tuple[int, int]] = [(0, 0)]  # the case being asked (the stub reads it)
_STUB_NAME = "fp4doctor capability stub"
_STUB_MEMORY = 192 * 2**30  # FAKE: a B200's 192 GiB, which SGLang sizes its KV cache from


def stub_torch_cuda() -> None:
    """Make torch report one CUDA device with the case's compute capability (a host with no
    GPU: FAKE device queries only; SGLang's code runs as it is)."""
    import torch

    cuda: Any = torch.cuda  # its device queries replaced (their types are torch's own)
    cuda.is_available = lambda: True
    cuda.device_count = lambda: 1
    cuda.current_device = lambda: 0
    cuda.get_device_capability = lambda device=None: _CAPABILITY[0]
    cuda.get_device_name = lambda device=None: _STUB_NAME
    cuda.mem_get_info = lambda device=None: (_STUB_MEMORY, _STUB_MEMORY)
    cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
        major=_CAPABILITY[0][0],
        minor=_CAPABILITY[0][1],
        name=_STUB_NAME,
        total_memory=_STUB_MEMORY,
        multi_processor_count=148,
    )


def model_dir(config: Mapping[str, Any], where: Path) -> str:
    """A directory holding `config` as config.json, as SGLang's --model-path reads it (the
    quantization config a ModelOpt checkpoint keeps in hf_quant_config.json added when
    config.json lacks one)."""
    where.mkdir(parents=True, exist_ok=True)
    data = dict(config)
    data.setdefault("quantization_config", _QUANT)
    (where / "config.json").write_text(json.dumps(data))
    return str(where)


class Session:
    """SGLang's selection code, imported (with the device stub in place when asked); an adapter
    says how its release hands the parsed arguments to the selection (`publish`)."""

    backend_of = staticmethod(backend_of)  # its vocabulary (worker.vocabulary)

    def __init__(self, stub: bool, model: Mapping[str, Any] | None) -> None:
        """Import SGLang's selection code (raises what the import raises: ImportError,
        OSError), for `model` (its config.json) or the default ones."""
        self.stub = stub
        if stub:
            stub_torch_cuda()
        self._tmp = tempfile.TemporaryDirectory(prefix="fp4doctor-sglang-")
        root = Path(self._tmp.name)
        self.models = {
            "linear": model_dir(model or DENSE, root / "linear"),
            "moe": model_dir(model or MOE, root / "moe"),
        }
        import torch
        from sglang.srt.layers.quantization import fp4_utils, modelopt_quant
        from sglang.srt.server_args import prepare_server_args

        self.torch: Any = torch  # the worker's one torch, for the layers asked
        self.fp4 = fp4_utils
        self.modelopt = modelopt_quant
        self.prepare_server_args = prepare_server_args

    def publish(self, server_args: Any) -> None:
        """Hand the resolved arguments to SGLang's MoE and FP4 GEMM configuration, as its
        scheduler process does before it builds the model."""
        raise NotImplementedError

    def ask(self, case: Case) -> Answer:
        if self.stub:
            _CAPABILITY[0] = case.cc
            engine_side.forget_memoised("sglang")
        with engine_side.environment(case):
            argv = ["--model-path", self.models[case.family], *case.args]
            server_args = engine_side.parsed(lambda: self.prepare_server_args(argv), case.args)
            self.publish(server_args)
            if case.family == "moe":
                return self._moe(case)
            name = str(self.fp4.get_fp4_gemm_runner_backend().value)
            if case.a16:
                return self._weight_only(case, name)
            return self._linear(case, name)

    def _linear(self, case: Case, name: str) -> Answer:
        """A ModelOpt W4A4 layer: the FP4 GEMM backend, and the linear method's own mode where
        it has one (0.5.19+: `quant_mode` is w4a16, FlashInfer's mm_bf16_fp4, with
        SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16=1 under flashinfer_cutedsl)."""
        quant = self.modelopt.ModelOptFp4Config.from_config(dict(_QUANT))
        method = self.modelopt.ModelOptFp4LinearMethod(quant)
        if getattr(method, "quant_mode", "w4a4") == "w4a16":
            return _named(case, f"{name} w4a16")
        return _named(case, name)

    def _weight_only(self, case: Case, name: str) -> Answer:
        """A compressed-tensors W4A16 layer (bf16 activations): the scheme's own choice between
        FlashInfer's mm_bf16_fp4 under the FP4 GEMM backend `name` and FP4 Marlin (0.5.22+)."""
        import importlib

        try:
            scheme = importlib.import_module(
                "sglang.srt.layers.quantization.compressed_tensors.schemes."
                "compressed_tensors_w4a16_nvfp4"
            )
        except ImportError:  # before 0.5.22: no such scheme, and the rules say so
            scheme = None
        chooses = getattr(scheme, "_use_flashinfer_bf16_fp4", None)
        if chooses is None:
            raise engine_side.NotAsked("no compressed-tensors W4A16 NVFP4 choice in this SGLang")
        if not chooses(self.torch.bfloat16):
            return _named(case, "marlin")
        return _named(case, f"{name} mm_bf16_fp4")

    def _moe(self, case: Case) -> Answer:
        """The NVFP4 MoE method's own runner for a ModelOpt layer (8 experts, top-2, bf16), or,
        for weight-only experts, the compressed-tensors W4A16 scheme's
        (`CompressedTensorsW4A16Nvfp4MoE.create_moe_runner`, 0.5.23)."""
        from sglang.srt.layers.moe.moe_runner.base import MoeRunnerConfig

        config = MoeRunnerConfig(num_experts=8, num_local_experts=8, hidden_size=4096,
                                 intermediate_size_per_partition=2048, top_k=2,
                                 params_dtype=self.torch.bfloat16)  # fmt: skip
        layer = self.torch.nn.Module()
        if case.a16:
            scheme = _weight_only_moe_scheme()
            scheme.create_moe_runner(layer, config)
            name = str(scheme.runner.runner_backend.value)
            return _named(case, name)
        quant = self.modelopt.ModelOptFp4Config.from_config(dict(_QUANT))
        method = self.modelopt.ModelOptNvFp4FusedMoEMethod(quant)
        method.create_moe_runner(layer, config)
        name = str(method._moe_runner_backend.value)  # what create_moe_runner resolved
        return _named(case, name)


def _named(case: Case, engine_name: str) -> Answer:
    return Answer(case.key, engine_name=engine_name, backend=backend_of(case, engine_name))


def _weight_only_moe_scheme() -> Any:
    """SGLang's compressed-tensors W4A16 NVFP4 experts scheme (schemes/
    compressed_tensors_w4a16_nvfp4_moe.py); NotAsked in a release without one."""
    import importlib

    try:
        module = importlib.import_module(
            "sglang.srt.layers.quantization.compressed_tensors.schemes."
            "compressed_tensors_w4a16_nvfp4_moe"
        )
    except ImportError:
        raise engine_side.NotAsked("no compressed-tensors W4A16 NVFP4 experts here") from None
    return module.CompressedTensorsW4A16Nvfp4MoE()
