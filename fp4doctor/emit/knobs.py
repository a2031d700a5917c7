"""From a resolution to what `env` exports and `config` writes: the knob's variable, or its flag
or argument carried in the engine's args variable (`FP4DOCTOR_VLLM_ARGS`)."""

from __future__ import annotations

from fp4doctor.emit.exports import Exports
from fp4doctor.profile.model import Profile
from fp4doctor.resolve import Resolution


def exports_for(profile: Profile, resolution: Resolution, label: str) -> tuple[Exports, list[str]]:
    """The variables to set and unset, and the notes that say how to use them (for stderr).

    A flag is written as one word, `--linear-backend=flashinfer_cudnn`: a shell that does not
    split words (zsh, fish) still hands the engine's argument parser one it understands.
    """
    notes: list[str] = []
    set_env = list(resolution.set_env)
    variable = profile.engine.args_variable
    args = [f"{flag}={value}" for flag, value in resolution.cli_args]
    args += [f"{name}={value}" for name, value in resolution.arguments]
    if args and variable:
        set_env.append((variable, " ".join(args)))
        how = "a command-line flag" if resolution.cli_args else "an argument"
        notes.append(
            f"{label} takes this choice only as {how}: pass ${variable} to it ({' '.join(args)})"
        )
    if resolution.config:
        notes.append(
            f"{label} takes this choice only in its options YAML: "
            f"write it with `fp4doctor config --target {profile.target} -o FILE`"
        )
    names = {n for n, _ in set_env}
    unset = tuple(n for n in resolution.unset_env if n not in names)
    return Exports(set=tuple(set_env), unset=unset), notes
