"""The one error a checkpoint can raise: missing, partial, malformed or not NVFP4.

The message names the file and, where one is at fault, the key, so a user can open the file and
see it. The doctor core turns it into a QuestionError (exit 2)."""

from __future__ import annotations


class CheckpointError(ValueError):
    """A checkpoint that cannot be judged; the message names the file and the key."""
