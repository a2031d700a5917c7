"""The name a user most likely meant, for the one-line refusal of a name fp4doctor does not know
(a subcommand, a backend): `difflib`'s closest match, as git and pip suggest."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """ ": did you mean 'cudnn'?" for the closest of `choices` to `name`, or "" when none is
    close (difflib's ratio of at least 0.6), to be put after the refusal."""
    found = difflib.get_close_matches(name.lower(), list(dict.fromkeys(choices)), n=1)
    return f": did you mean {found[0]!r}?" if found else ""
