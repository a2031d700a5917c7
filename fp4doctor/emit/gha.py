"""Lines for ``$GITHUB_ENV`` (GitHub Actions), which sets variables for the following steps.

Each value is written in the runner's heredoc form::

    NAME<<DELIMITER
    value
    DELIMITER

with one random delimiter per output (``secrets.token_hex``), so a value cannot end the
heredoc early; a value that contains the delimiter is refused. The runner
(actions/runner, ``SetEnvFileCommand``) keeps every byte between the two lines, newlines
and CRs included, except that a Windows runner reads a CR just before the closing line as
part of the line break: a value that ends with CR is refused.

``$GITHUB_ENV`` cannot remove a variable, and an empty value is no substitute: vLLM rejects
an empty ``VLLM_NVFP4_GEMM_BACKEND`` at start-up, and parses its on/off knobs with ``int()``.
So names to unset are left out here; the CLI names them on stderr for the user to remove from
the workflow.

Use: ``fp4doctor env --shell gha >> "$GITHUB_ENV"``.
"""

from __future__ import annotations

import secrets

from fp4doctor.emit.exports import EmitError, Exports


def new_delimiter() -> str:
    """A delimiter no value can guess: 128 random bits."""
    return f"FP4DOCTOR_EOF_{secrets.token_hex(16)}"


def render(exports: Exports, delimiter: str | None = None) -> str:
    """One heredoc per variable to set (names to unset cannot be expressed, see above)."""
    delimiter = delimiter or new_delimiter()
    for name, value in exports.set:
        if delimiter in value:
            raise EmitError.refused("gha", name, "the value contains the heredoc delimiter")
        if value.endswith("\r"):
            raise EmitError.refused(
                "gha", name, "a Windows runner drops a CR at the end of a heredoc value"
            )
    lines: list[str] = []
    for name, value in exports.set:
        lines += [f"{name}<<{delimiter}", value, delimiter]
    return "".join(line + "\n" for line in lines)
