"""Profiles: the shipped YAML rules per target, and the user's own (`--profile PATH`)."""

from __future__ import annotations

from pathlib import Path

from fp4doctor.profile.model import Profile
from fp4doctor.profile.schema import ProfileError, parse
from fp4doctor.textfile import UnreadableText, read_text

__all__ = ["Profile", "ProfileError", "builtin_dir", "builtin_names", "load", "load_file"]


def builtin_dir() -> Path:
    """Where the shipped profiles are: inside the wheel, or `profiles/` in a source checkout."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_profiles"
    return packaged if packaged.is_dir() else here.parent / "profiles"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.yaml"))


def load_file(path: str | Path) -> Profile:
    try:
        text = read_text(path)
    except UnreadableText as exc:
        raise ProfileError(str(exc)) from None
    return parse(text, str(path))


def load(target: str, overrides: list[Path] | None = None) -> Profile:
    """The profile for `target`: a user's `--profile` file for it wins over the shipped one."""
    for path in overrides or []:
        profile = load_file(path)
        if profile.target == target:
            return profile
    path = builtin_dir() / f"{target}.yaml"
    if not path.is_file():
        known = sorted({*builtin_names(), *(load_file(p).target for p in overrides or [])})
        raise ProfileError(f"no profile for target '{target}' (valid: {', '.join(known)})")
    return load_file(path)
