"""PowerShell statements (`$env:NAME = 'value'`).

PowerShell ends a single-quoted string at any of five quote characters: ``'`` and the
typographic U+2018, U+2019, U+201A, U+201B; each is doubled to stand for itself (as
PowerShell's own ``CodeGeneration.EscapeSingleQuotedStringContent`` does). Newline and CR are
written as ``[char]10`` and ``[char]13`` joined with ``+``, so each statement stays on one line
whatever line handling ``Invoke-Expression`` or the console applies to native output.

An empty value is refused: PowerShell before 7.5 deletes a variable that is set to the empty
string (about_Environment_Variables, changed in 7.5), so the result would depend on the
PowerShell version.

A list (an engine's flags, `Exports.lists`) is set twice: as the environment variable (the
words joined by a space, as every format writes it) and as a global PowerShell array of the
same name, ``$global:NAME = @('--a=x', '--b=y')``; PowerShell passes each element of an array
to a native command as its own argument: ``vllm serve MODEL $FP4DOCTOR_VLLM_ARGS``. (PowerShell
is not installed on fp4doctor's test hosts: tests/test_emit_shells.py runs it where it is.)

Use: ``fp4doctor env --shell pwsh | Out-String | Invoke-Expression``.
"""

from __future__ import annotations

from fp4doctor.emit.exports import EmitError, Exports

_SINGLE_QUOTES = frozenset("'\u2018\u2019\u201a\u201b")
_AS_CHAR = {"\n": "[char]10", "\r": "[char]13"}


def quote(value: str) -> str:
    """Write `value` as one PowerShell expression that evaluates to exactly `value`."""
    # The first term is always a string literal, so `+` concatenates rather than adds.
    terms: list[str] = []
    run: list[str] = []
    for char in value:
        if char in _AS_CHAR:
            if run or not terms:
                terms.append("'" + "".join(run) + "'")
            run = []
            terms.append(_AS_CHAR[char])
        else:
            run.append(char * 2 if char in _SINGLE_QUOTES else char)
    if run or not terms:
        terms.append("'" + "".join(run) + "'")
    return " + ".join(terms)


def render(exports: Exports) -> str:
    """Remove statements, then assignments, one per line."""
    for name, value in exports.set:
        if not value:
            raise EmitError.refused(
                "pwsh", name, "PowerShell before 7.5 deletes a variable set to the empty string"
            )
    lines = [f"Remove-Item -LiteralPath Env:{name} -ErrorAction Ignore" for name in exports.unset]
    lines += [f"$env:{name} = {quote(value)}" for name, value in exports.set]
    for name in exports.lists:
        words = ", ".join(quote(w) for w in exports.words(name))
        lines.append(f"$global:{name} = @({words})")
    return "".join(line + "\n" for line in lines)


def usage(name: str) -> str:
    """How a command line takes the list `name`, in PowerShell."""
    return f"${name} (a PowerShell array: one argument per flag)"
