"""Where the shipped profiles are, found without importing the profile package (whose parser and
imports cost the probe 0.3 s): `fp4doctor.profile` loads them from here, and `probe` reads which
compiled modules the installed engine's rules name."""

from __future__ import annotations

from pathlib import Path


def profiles_dir() -> Path:
    """Inside the wheel (`fp4doctor/_profiles`), or `profiles/` in a source checkout."""
    here = Path(__file__).resolve().parent
    packaged = here / "_profiles"
    return packaged if packaged.is_dir() else here.parent / "profiles"
