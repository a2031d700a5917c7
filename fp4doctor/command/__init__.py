"""The engine's command line as fp4doctor's input: `parse(argv)` -> EngineCommand.

    from fp4doctor.command import parse, CommandError
    cmd = parse(["vllm", "serve", "nvidia/Llama-3.3-70B-Instruct-FP4", "-tp", "4",
                 "--moe-backend", "cutlass"], release="0.34.0", environ=os.environ)
    cmd.target                    # "vllm"
    cmd.value("tp")               # 4
    cmd.get("moe_backend")        # Setting(value="cutlass", flag="--moe-backend cutlass",
                                  #         source="command line")

Pure and fast: no engine, torch or network; the flags of each release come from
profiles/flags/<engine>.json (tools/extract/flags.py, read from the released wheels). A flag or a
value the release's own parser refuses is a CommandError (a ValueError; one line naming the
release, the flag, and the valid choices or the release that introduced or removed it).
`release=None` reads with the newest known release's flags and says so in `notes`.

Forms: `vllm serve [MODEL]`, `python -m vllm.entrypoints.openai.api_server --model MODEL`,
`python -m sglang.launch_server --model-path MODEL`, `sglang serve --model-path MODEL`
(SGLang 0.5.5+), `trtllm-serve [serve] MODEL`; `python` may be `python3` or a path; `NAME=value`
words before the command go to `EngineCommand.environment`. FP4DOCTOR_VLLM_ARGS /
FP4DOCTOR_SGLANG_ARGS / FP4DOCTOR_TRTLLM_ARGS in `environ` are split on white space and read
after the command line's words (`vllm serve MODEL $FP4DOCTOR_VLLM_ARGS`); their Settings have
that variable as `source`.

Fields (`EngineCommand.settings`; a field is present only when the command sets it, never an
engine default):

- model (str): vLLM MODEL or --model; SGLang --model-path (--model); trtllm-serve MODEL.
- tp, pp, dp (int): vLLM --tensor-parallel-size/-tp, --pipeline-parallel-size/-pp,
  --data-parallel-size/-dp; SGLang --tp-size, --pp-size, --dp-size (and their long aliases);
  TensorRT-LLM --tp_size, --pp_size.
- ep (int): vLLM, with --enable-expert-parallel, TP x DP (x PCP from 0.12), the engine's own
  rule; SGLang --ep-size, or TP with --enable-ep-moe / --enable-deepep-moe (to 0.5.4);
  TensorRT-LLM --ep_size (moe_expert_parallel_size).
- expert_parallel (bool): vLLM --enable-expert-parallel (--no-/--disable- forms); SGLang
  --ep-size > 1, --enable-ep-moe, --enable-deepep-moe.
- linear_backend (str): vLLM --linear-backend (or --kernel-config's linear_backend when the
  flag is unset or "auto"); SGLang --fp4-gemm-backend.
- moe_backend (str): vLLM --moe-backend (or --kernel-config's moe_backend, as above); SGLang
  --moe-runner-backend, or the switches it replaced (--enable-flashinfer-moe,
  --enable-flashinfer-cutlass-moe: "flashinfer_cutlass"; --enable-flashinfer-trtllm-moe:
  "flashinfer_trtllm"); TensorRT-LLM moe_config.backend in its --config YAML.
- all2all_backend (str): vLLM --all2all-backend; SGLang --moe-a2a-backend (--enable-deepep-moe:
  "deepep").
- enforce_eager (bool): vLLM --enforce-eager.
- compilation_level (int or str): vLLM --compilation-config's level/mode, else -O N
  (--optimization-level from 0.12; the compilation level before).
- cuda_graphs (bool): vLLM False with --enforce-eager, else --compilation-config's
  cudagraph_mode (NONE: False); SGLang False with --disable-cuda-graph,
  --cuda-graph-backend-decode (disabled: False); TensorRT-LLM cuda_graph_config (null: False).
- kernel_config (dict): vLLM --kernel-config (0.16+), whole.
- autotune (bool): whether FlashInfer's autotune runs at start-up as set: vLLM
  --enable-flashinfer-autotune / --no-enable-flashinfer-autotune (0.16+) or --kernel-config's
  enable_flashinfer_autotune (both set: refused, as the engine does); SGLang False with
  --disable-flashinfer-autotune (0.5.7+); TensorRT-LLM enable_autotuner.
- dtype, quantization (str): --dtype, --quantization (vLLM -q).
- max_num_batched_tokens (int): vLLM --max-num-batched-tokens (8k, 8K read as vLLM does);
  TensorRT-LLM --max_num_tokens.
- chunked_prefill_size (int): SGLang --chunked-prefill-size.
- hf_overrides (dict): vLLM --hf-overrides; SGLang --json-model-override-args.

Backend values are the engine's own spelling, after its own normalisation (vLLM lower-cases
--moe-backend/--linear-backend and turns `-` into `_`). docs/command-line.md has the details.
"""

from fp4doctor.command.model import FIELDS, CommandError, EngineCommand, Setting
from fp4doctor.command.parse import ARGS_VARIABLES, parse

__all__ = ["ARGS_VARIABLES", "FIELDS", "CommandError", "EngineCommand", "Setting", "parse"]
