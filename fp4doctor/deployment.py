"""What the user will run: the conditions a known bug's trigger is judged against
(`profile/triggers.py`), settled by `fp4doctor/settle.py` from the engine's command line, the
environment, fp4doctor's options and the engine release's defaults.

Each field is None when nothing settles it: a trigger that needs it is then not established, and
the finding says how to settle it (`--model PATH`, ...), never assumes it.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    # field -> where its value came from ("set by --tensor-parallel-size", "vLLM 0.15.1 default").
    origins: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()  # stated settings the release cannot honour, and why

    def origin(self, field: str) -> str | None:
        """Where `field`'s value came from, or None when nothing settled it."""
        return dict(self.origins).get(field)
