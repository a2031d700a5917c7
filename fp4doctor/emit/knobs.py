"""From a resolution to what `env` exports and `config` writes: the knob's variable, or its flag
or argument carried in the engine's args variable (`FP4DOCTOR_VLLM_ARGS`).

An engine runs several FP4 GEMM families (dense linear, MoE), each resolved on its own;
`settings` puts their knobs together, so that one `eval` or one config file switches them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fp4doctor.emit.exports import Exports
from fp4doctor.profile.model import Profile
from fp4doctor.selection.choice import Resolution


@dataclass(frozen=True)
class Settings:
    """The knobs of every family's choice together (the same fields as a `Resolution`)."""

    chosen: str
    set_env: tuple[tuple[str, str], ...] = ()
    unset_env: tuple[str, ...] = ()
    cli_args: tuple[tuple[str, str], ...] = ()
    config: tuple[tuple[str, str], ...] = ()
    arguments: tuple[tuple[str, str], ...] = ()
    # The config keys as the options YAML holds them: a one-element list, or a scalar.
    options: tuple[tuple[str, object], ...] = ()


def settings(resolutions: Sequence[Resolution]) -> Settings:
    """One family's knobs after another's, in the order given; a variable one family sets is
    never unset for another (vLLM 0.22's MoE variables stay when the linear choice unsets its
    own)."""
    set_env = tuple(pair for r in resolutions for pair in r.set_env)
    names = {n for n, _ in set_env}
    unset = tuple(dict.fromkeys(n for r in resolutions for n in r.unset_env if n not in names))
    return Settings(
        chosen=", ".join(str(r.chosen) for r in resolutions),
        set_env=set_env,
        unset_env=unset,
        cli_args=tuple(pair for r in resolutions for pair in r.cli_args),
        config=tuple(pair for r in resolutions for pair in r.config),
        arguments=tuple(pair for r in resolutions for pair in r.arguments),
        options=tuple(
            (key, value if r.knob is not None and r.knob.scalar else [value])
            for r in resolutions
            for key, value in r.config
        ),
    )


def exports_for(
    profile: Profile, resolution: Resolution | Settings, label: str, fmt: str | None = None
) -> tuple[Exports, list[str]]:
    """The variables to set and unset, and the notes that say how to use them (for stderr).

    A flag is written as one word, `--linear-backend=flashinfer_cudnn`, and the engine's args
    variable is a list of those words (`Exports.lists`): each shell's format sets it so that its
    unquoted expansion gives one argument per flag. With `fmt`, a shell's format, the notes end
    with that shell's usage line (`vllm serve MODEL $FP4DOCTOR_VLLM_ARGS`).
    """
    from fp4doctor.emit import usage
    from fp4doctor.emit.serve import serve_command

    notes: list[str] = []
    set_env = list(resolution.set_env)
    variable = profile.engine.args_variable
    args = [f"{flag}={value}" for flag, value in resolution.cli_args]
    args += [f"{name}={value}" for name, value in resolution.arguments]
    lists: tuple[str, ...] = ()
    if args and variable:
        set_env.append((variable, " ".join(args)))
        lists = (variable,)
        how = "a command-line flag" if resolution.cli_args else "an argument"
        notes.append(
            f"{label} takes this choice only as {how}: pass ${variable} to it ({' '.join(args)})"
        )
        serve = serve_command(profile.target)
        shown = usage(fmt, variable) if fmt is not None else None
        if serve is not None and shown is not None and resolution.cli_args:
            notes.append(f"use: {serve} {shown}")
    if resolution.config:
        notes.append(
            f"{label} takes this choice only in its options YAML: "
            f"write it with `fp4doctor config --target {profile.target} -o FILE.yaml`"
        )
    names = {n for n, _ in set_env}
    unset = tuple(n for n in resolution.unset_env if n not in names)
    return Exports(set=tuple(set_env), unset=unset, lists=lists), notes
