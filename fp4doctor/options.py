"""The options every question-asking command shares (`check`, `env`, `config`, `explain`,
`node`, `fleet`), handed to the command as one `Question`; running the doctor core; and how
`env` and `config` settle a report before they print anything."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from fp4doctor.console import EXIT_NO_VERDICT, EXIT_NOT_READY, note, user_errors
from fp4doctor.findings import Kind

if TYPE_CHECKING:  # the core is imported inside the commands: start-up stays fast
    from fp4doctor.doctor import Question, Report

QUESTION_OPTIONS = (
    click.option(
        "--target",
        "-t",
        help="Engine: vllm, sglang, trtllm or flashinfer "
        "(default: the engine installed; vllm when none is).",
    ),
    click.option(
        "--profile",
        "profiles",
        multiple=True,
        type=click.Path(dir_okay=False),
        help="A profile YAML that adds or overrides a target (repeatable).",
    ),
    click.option(
        "--facts",
        "facts_file",
        type=click.Path(dir_okay=False),
        help="Judge this facts snapshot (from `fp4doctor probe --json`) instead of this host.",
    ),
    click.option(
        "--engine-version", help="Judge for this engine version instead of the installed one."
    ),
    click.option(
        "--ignore",
        multiple=True,
        metavar="IDS",
        help="Downgrade these finding ids (or id prefixes, or advisory ids as `fp4doctor "
        "advisories` lists them; comma-separated) to warnings.",
    ),
    click.option(
        "--prefer", help="Backend to prefer when valid (e.g. cudnn, trtllm, cutlass, marlin)."
    ),
    click.option(
        "--require",
        help="NAME, 'native' or 'any': exit 1 (and print or write nothing) unless it resolves.",
    ),
    click.option(
        "--family",
        type=click.Choice(["linear", "moe"]),
        help="Judge one FP4 GEMM family only: the dense linear layers or the MoE experts "
        "(default: every family the engine runs). --prefer/--require apply to the family "
        "whose backend they name; write moe:NAME to say which.",
    ),
    click.option(
        "--model",
        metavar="PATH_OR_ID",
        help="Also judge this NVFP4 checkpoint's GEMMs (a directory, or ORG/NAME in the Hugging "
        "Face cache; configs and safetensors headers only).",
    ),
    click.option(
        "--tp",
        type=click.IntRange(min=1),
        default=None,
        help="Tensor-parallel size the model is served at (default 1; with --model, each "
        "rank's GEMMs; also settles known bugs that need a TP size).",
    ),
    click.option(
        "--ep",
        type=click.IntRange(min=1),
        default=None,
        help="Expert-parallel size (default 1; must divide --tp; settles known bugs that need "
        "an EP size).",
    ),
    click.option(
        "--concurrency",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="Requests the deployment serves at once (1: one stream); settles known bugs that "
        "strike only under concurrent load.",
    ),
    click.option(
        "--autotune",
        type=click.Choice(["on", "off"]),
        default=None,
        help="Whether the engine runs FlashInfer's autotuner; settles known bugs of the tuned "
        "tactics.",
    ),
    click.option(
        "--cuda-graphs",
        type=click.Choice(["on", "off"]),
        default=None,
        help="Whether the engine captures CUDA graphs; settles known bugs of graph capture.",
    ),
    click.option(
        "--engine/--no-engine",
        default=True,
        help="Ask the installed engine's own selection code which kernel it picks, beside the "
        "rules' prediction (default: when the engine judged is installed); --no-engine skips it.",
    ),
    click.option(
        "--hub",
        is_flag=True,
        help="With --model ORG/NAME not in the cache: read its configs and headers from the Hub "
        "(needs pip install 'fp4doctor[hub]' and the network).",
    ),
    click.option(
        "--strict",
        is_flag=True,
        help="Exit 1 when the verdict is unverified: a release judged (the engine, FlashInfer) "
        "is newer than the release data fp4doctor's rules were read from.",
    ),
)
_QUESTION_FIELDS = ("target", "profiles", "facts_file", "engine_version", "ignore", "prefer",
                    "require", "family", "model", "tp", "ep", "hub", "concurrency",
                    "strict", "engine")  # fmt: skip
_SWITCHES = ("autotune", "cuda_graphs")  # on|off -> True/False, None when not given


def question_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the shared options, and hand them to the command as one `Question`."""

    @functools.wraps(command)
    def wrapper(**options: Any) -> None:
        from fp4doctor.doctor import Question  # here, not at decoration: `probe` never needs it

        fields: dict[str, Any] = {k: options.pop(k) for k in _QUESTION_FIELDS}
        if "command" in options:  # `-- vllm serve MODEL ...` (engine_command)
            fields["command"] = tuple(options.pop("command"))
        for k in _SWITCHES:
            fields[k] = None if (v := options.pop(k)) is None else v == "on"
        asked = Question(**fields)
        command(asked, **options)

    for option in reversed(QUESTION_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def engine_command(command: Callable[..., None]) -> Callable[..., None]:
    """The engine's command line after `--` (`fp4doctor check -- vllm serve MODEL -tp 4`): the
    deployment judged as it will run. Put above `question_options`."""
    return click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND]")(
        command
    )


ENGINE_COMMAND_HELP = (
    "COMMAND, after `--`, is the engine's command line as you will run it (`vllm serve MODEL "
    "...`, `python -m vllm.entrypoints.openai.api_server ...`, `python -m sglang.launch_server "
    "...`, `trtllm-serve MODEL ...`): its model, parallel sizes, backends and switches are "
    "judged as set, read with the flags of the engine release judged; FP4DOCTOR_<ENGINE>_ARGS "
    "in the environment count as set. A flag or value that release does not have is a usage "
    "error (exit 2)."
)


def ask(question: Question) -> Report:
    """Run the doctor core, its refusals as user errors and its progress on stderr."""
    from fp4doctor.doctor import diagnose

    with user_errors():
        report = diagnose(question, progress=note)
    _unmatched_ignores(report)
    return report


def _unmatched_ignores(report: Report) -> None:
    for pattern in report.unmatched_ignores():
        note(
            f"--ignore {pattern}: no finding has this id or id prefix "
            "(`fp4doctor check -v` lists the ids); nothing was ignored for it"
        )


def settle(report: Report, nothing: str) -> None:
    """For `env` and `config`: explain on stderr, and exit 1 unless every family counted has a
    valid choice (naming the family that has none), 3 when the host cannot be judged."""
    from fp4doctor.doctor import Outcome

    if report.engine.note:
        note(report.engine.note)
    if report.outcome is Outcome.NO_VERDICT:
        for f in report.blocking():
            note(f.reason)
        note(f"{nothing}: no verdict; run `fp4doctor check` for the full report")
        sys.exit(EXIT_NO_VERDICT)
    several = len(report.families) > 1
    for part in report.families:
        said = f"{part.title}: " if several else ""
        for n in part.resolution.notes:
            note(said + n)
        for f in part.resolution.findings:
            if f.kind is Kind.ENGINE_PICK and f.status.blocking and part.chosen is not None:
                note(f"{said}steering away: {f.reason}")
    if report.question.strict and not report.verified:
        texts = {u.text: None for p in report.families for u in p.evaluation.unverified}
        for text in texts:
            note(text)
        note(f"{nothing}: --strict and the verdict is unverified")
        sys.exit(EXIT_NOT_READY)
    if not report.usable:
        for part in report.counted:
            if part.chosen is None:
                note(f"the {part.title} has no valid backend here")
        for f in report.blocking():
            note(f.reason)
        note(f"{nothing}; run `fp4doctor check` for the full report")
        sys.exit(EXIT_NOT_READY)
    if not report.ready and not report.env_makes_ready:
        for f in report.blocking():
            note(f"the knobs select a valid backend, but this still blocks: {f.reason}")
    for f in report.ignored_deciding():
        reason = f.reason.removesuffix(" (ignored)")
        note(f"--ignore changes the outcome: without it, this fails: {reason} [{f.id}]")


def using(report: Report) -> str:
    """`vLLM 0.15.1: using cutlass`, each family's choice named when there are several."""
    from fp4doctor.render import uses

    return f"{report.engine_label}: using {uses(report)}"
