"""What the user will run: the conditions a known bug's trigger is judged against
(`profile/triggers.py`), settled by `fp4doctor/settle.py` from the engine's command line, the
environment, fp4doctor's options and the engine release's defaults.

Each field is None when nothing settles it: a trigger that needs it is then not established, and
the finding says how to settle it (`--model PATH`, ...), never assumes it.
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
    """The serving conditions, each with where it came from (`origins`)."""

    tp: int | None = None  # tensor-parallel size
    ep: int | None = None  # expert-parallel size
    concurrency: int | None = None  # requests served at once (1: one stream)
    autotune: bool | None = None  # FlashInfer's autotuner at start-up
    cuda_graphs: bool | None = None  # CUDA graphs captured
    # With a model: the checkpoint's architectures (config.json) and its routed experts.
    architectures: tuple[str, ...] | None = None
    experts: int | None = None
    dp: int | None = None  # data-parallel size (the engine's --data-parallel-size)
    all2all: str | None = None  # the MoE all2all backend, as the engine names it
    dtype: str | None = None  # the activation dtype the engine runs: float16 | bfloat16
    # Whether the release keeps FlashInfer's autotune results in a persistent file and reads it
    # back (profiles/coldstart.yaml `autotune.cache`, with the autotuner on): False for a release
    # that tunes in memory at every start.
    autotune_cache: bool | None = None
    # With --model: every NVFP4 GEMM of each family, per rank at the deployment's TP/EP.
    gemms: tuple[DeployedGemm, ...] | None = None
    # field -> where its value came from ("set by --tensor-parallel-size", "vLLM 0.15.1 default").
    origins: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()  # stated settings the release cannot honour, and why

    def origin(self, field: str) -> str | None:
        """Where `field`'s value came from, or None when nothing settled it."""
        return dict(self.origins).get(field)
