"""Profiles: the shipped YAML rules per target, and the user's own (`--profile PATH`)."""

from __future__ import annotations

from pathlib import Path

from fp4doctor.profile.model import Profile
from fp4doctor.profile.schema import ProfileError, parse

__all__ = ["Profile", "ProfileError", "builtin_dir", "builtin_names", "load", "load_file"]


def builtin_dir() -> Path:
    """Where the shipped profiles are: inside the wheel, or `profiles/` in a source checkout."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_profiles"
    return packaged if packaged.is_dir() else here.parent / "profiles"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.yaml"))


def load_file(path: str | Path) -> Profile:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ProfileError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    return parse(text, str(p))


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
