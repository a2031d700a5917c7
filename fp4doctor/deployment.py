"""What the user will run, as far as the question, the environment and the model say: the
conditions a known bug's trigger is judged against (`profile/triggers.py`).

Each field is None when nothing says it: a trigger that needs it is then not established, and
the finding says how to settle it (`--ep N`, `--model PATH`, ...), never assumes it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeployedGemm:
    """One NVFP4 GEMM of the model as one rank runs it: out[M, n] = x[M, k] @ w[n, k].T."""

    family: str  # linear | moe
    scheme: str  # W4A4 (an FP4 activation quantizer runs) or W4A16 (weight-only)
    n: int
    k: int


@dataclass(frozen=True)
class Deployment:
    """The serving conditions known for this question."""

    tp: int | None = None  # --tp: tensor-parallel size
    ep: int | None = None  # --ep: expert-parallel size
    concurrency: int | None = None  # --concurrency: requests served at once (1: one stream)
    autotune: bool | None = None  # --autotune on|off: FlashInfer's autotuner at start-up
    cuda_graphs: bool | None = None  # --cuda-graphs on|off
    # With --model: the checkpoint's architectures (config.json) and its routed experts.
    architectures: tuple[str, ...] | None = None
    experts: int | None = None
    dp: int | None = None  # data-parallel size (the engine's --data-parallel-size)
    all2all: str | None = (
        None  # the MoE all2all backend, as the engine names it (--all2all-backend)
    )
    dtype: str | None = None  # the activation dtype the engine runs: float16 | bfloat16
    # Whether the release keeps FlashInfer's autotune results in a persistent file and reads it
    # back (profiles/coldstart.yaml `autotune.cache`, with the autotuner on): False for a release
    # that tunes in memory at every start.
    autotune_cache: bool | None = None
    # With --model: every NVFP4 GEMM of each family, per rank at the deployment's TP/EP.
    gemms: tuple[DeployedGemm, ...] | None = None
