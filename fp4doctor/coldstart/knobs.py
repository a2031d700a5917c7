"""`fp4doctor env --cold-start MODE`: the knobs that make the first start-up short, where the
engine release has them, and what each trades (for stderr).

- `fast`: skip the engine's FlashInfer autotune (its disable flag): FlashInfer then runs its
  default tactics, not the fastest measured ones.
- `persist`: keep tuning, but keep the results (the engine's autotune cache directory) so the
  next start reads them instead of tuning again.

Both point FlashInfer's JIT workspace at `--cache-dir` when given (FLASHINFER_WORKSPACE_BASE), so
modules built once are found by the next start, in a container too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from fp4doctor.coldstart import rules as _rules
from fp4doctor.emit.exports import Exports

MODES = ("fast", "persist")
WORKSPACE_VARIABLE = "FLASHINFER_WORKSPACE_BASE"  # flashinfer/jit/env.py FLASHINFER_BASE_DIR


def with_cold_start(
    exports: Exports,
    *,
    mode: str,
    target: str,
    engine_version: str | None,
    label: str,
    args_variable: str | None,
    cache_dir: str | None,
    tuned: Sequence[str],
    rules: _rules.Rules | None = None,
) -> tuple[Exports, list[str]]:
    """`exports` with the cold-start knobs of `mode` added, and the notes that say what they
    trade. `tuned`: the chosen FlashInfer backends the engine would autotune."""
    r = rules or _rules.load()
    rule = r.autotune_for(target, engine_version)
    set_env = list(exports.set)
    args: list[str] = []
    notes: list[str] = []
    if cache_dir:
        base = os.path.abspath(os.path.expanduser(cache_dir))
        set_env.append((WORKSPACE_VARIABLE, base))
        notes.append(
            f"cold start: FlashInfer builds its JIT modules under {base}/.cache/flashinfer and "
            "finds them there on the next start (keep the directory on a persistent volume)"
        )
    else:
        notes.append(
            "cold start: --cache-dir DIR also points FlashInfer's JIT workspace at a persistent "
            f"directory ({WORKSPACE_VARIABLE})"
        )
    if rule is None:
        notes.append(f"cold start: no autotune rule for {label}: nothing else set")
    elif not rule.tunes:
        notes.append(f"cold start: {rule.reason}: nothing to skip")
    elif not tuned:
        notes.append(
            "cold start: the chosen backends are not FlashInfer kernels: "
            f"{label}'s FlashInfer autotune does not tune them"
        )
    elif mode == "fast":
        if rule.disable_arg:
            args.append(rule.disable_arg)
            notes.append(
                f"cold start: {rule.disable_arg} skips {label}'s FlashInfer autotune for every "
                "FlashInfer kernel (not only FP4): it trades the fastest measured tactics for "
                "FlashInfer's default ones, a slower kernel choice for some shapes"
            )
        else:
            notes.append(f"cold start: {label} has no knob to skip FlashInfer's autotune")
    elif rule.cache == "none":
        notes.append(f"cold start: {label} keeps no autotune cache: every start tunes")
    elif rule.cache_dir_variable and cache_dir:
        where = os.path.join(os.path.abspath(os.path.expanduser(cache_dir)), "flashinfer-autotune")
        set_env.append((rule.cache_dir_variable, where))
        notes.append(
            f"cold start: {label} keeps its FlashInfer autotune results under {where} "
            f"({rule.cache}); the first start still tunes, later ones read them"
        )
    else:
        notes.append(
            f"cold start: {label} keeps its FlashInfer autotune results ({rule.cache}) in its "
            "cache directory; --cache-dir DIR moves them to a persistent one"
        )
    if args and args_variable:
        current = dict(set_env).get(args_variable)
        value = " ".join([current, *args]) if current else " ".join(args)
        set_env = [(n, v) for n, v in set_env if n != args_variable] + [(args_variable, value)]
        if not current:
            notes.append(f"{label} takes it only as a command-line flag: pass ${args_variable}")
    unset = tuple(n for n in exports.unset if n not in dict(set_env))
    return Exports(set=tuple(set_env), unset=unset), notes
