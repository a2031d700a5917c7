"""The errors a checkpoint can raise: missing, partial, malformed or not NVFP4 (CheckpointError),
or named but not here to read offline (NotHere).

The message names the file and, where one is at fault, the key, so a user can open the file and
see it. The doctor core turns it into a QuestionError (exit 2)."""

from __future__ import annotations


class CheckpointError(ValueError):
    """A checkpoint that cannot be judged; the message names the file and the key."""


class NotHere(CheckpointError):
    """A model named by repo id that is neither a directory nor in the Hugging Face cache (and
    the Hub not asked): the deployment names it, but its checkpoint cannot be read offline."""
