"""What the user will run, as far as the question, the environment and the model say: the
conditions a known bug's trigger is judged against (`profile/triggers.py`).

Each field is None when nothing says it: a trigger that needs it is then not established, and
the finding says how to settle it (`--ep N`, `--model PATH`, ...), never assumes it.
"""

from __future__ import annotations

from dataclasses import dataclass


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
