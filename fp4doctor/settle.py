"""Settle the deployment: every field a rule or a known bug's trigger reads gets a value and the
place it came from, in this order: the engine's command line (with FP4DOCTOR_*_ARGS), fp4doctor's
own options (--tp, --ep, --autotune, ...), the engine release's default (profiles/deployment.yaml;
FlashInfer's autotune from profiles/coldstart.yaml's per-release rules). One settled value feeds
the triggers, the cold-start section and the choice, so they cannot disagree.

A field nothing settles stays None ("not established"): the load (concurrency), or a field no
default is read for. A setting the release cannot honour (`--autotune off` where it has no
switch) is not believed: the release's behaviour is settled, and a note says why.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet

from fp4doctor.deployment import DeployedGemm, Deployment

if TYPE_CHECKING:
    from fp4doctor.command import EngineCommand
from fp4doctor.facts import HostFacts
from fp4doctor.profile.yamlnode import Node, ProfileError, optional, required
from fp4doctor.textfile import UnreadableText, read_text
from fp4doctor.versions import contains

SCHEMA = 1


@dataclass(frozen=True)
class Stated:
    """A deployment field the user states, and where: `--tensor-parallel-size 4` on the
    command line, `fp4doctor --tp 4`."""

    value: object
    origin: str


@dataclass(frozen=True)
class Defaults:
    """An engine release's defaults for the fields fp4doctor reads (profiles/deployment.yaml)."""

    target: str
    engine: SpecifierSet
    source: str
    tp: int | None = None
    dp: int | None = None
    ep: int | None = None
    expert_parallel: bool | None = None  # vLLM: EP = TP x DP when on
    cuda_graphs: bool | None = None
    cuda_graphs_off_flag: str | None = None


# The command line's fields that settle a deployment field (fp4doctor/command FIELDS).
_FROM_COMMAND = ("tp", "dp", "ep", "expert_parallel", "cuda_graphs", "autotune")


def stated_by(command: EngineCommand | None, options: Mapping[str, Stated]) -> dict[str, Stated]:
    """What the deployment states: the engine's command line first, then fp4doctor's own
    options for what the command line leaves unsaid. The two disagreeing is a ValueError."""
    stated: dict[str, Stated] = {}
    if command is not None:
        for field in _FROM_COMMAND:
            setting = command.settings.get(field)
            if setting is not None:
                stated[field] = Stated(setting.value, setting.describe())
        eager = command.settings.get("enforce_eager")
        if "cuda_graphs" not in stated and eager is not None and eager.value:
            stated["cuda_graphs"] = Stated(False, eager.describe())
    for field, said in options.items():
        mine = stated.get(field)
        if mine is not None and mine.value != said.value:
            raise ValueError(
                f"{said.origin.removeprefix('set by ')} disagrees with the engine's command "
                f"line ({mine.origin}): drop one"
            )
        stated.setdefault(field, said)
    return stated


def settle(
    *,
    target: str,
    engine_version: str,
    engine_label: str,
    host: HostFacts,
    stated: Mapping[str, Stated],
    architectures: tuple[str, ...] | None = None,
    experts: int | None = None,
    gemms: tuple[DeployedGemm, ...] | None = None,
    skip_autotune: bool = False,
) -> Deployment:
    """The deployment as it will run: `stated` (command line, then fp4doctor's options), else
    the release's defaults. `skip_autotune`: `env --cold-start fast` writes the engine's switch."""
    defaults = defaults_for(target, engine_version)
    origins: dict[str, str] = {}
    notes: list[str] = []
    default = f"{engine_label} default"

    def pick(field: str, fallback: object, why: str = "") -> object:
        if field in stated:
            origins[field] = stated[field].origin
            return stated[field].value
        if fallback is not None:
            origins[field] = default + (f" ({why})" if why else "")
        return fallback

    tp = pick("tp", defaults.tp if defaults else None)
    dp = pick("dp", defaults.dp if defaults else None)
    ep: object
    if "ep" in stated:
        ep = pick("ep", None)
    elif stated.get("expert_parallel") and stated["expert_parallel"].value:
        ep = (_int(tp) or 1) * (_int(dp) or 1)
        origins["ep"] = f"{stated['expert_parallel'].origin}: EP = TP x DP"
    elif defaults is not None and (defaults.ep is not None or defaults.expert_parallel is False):
        ep = pick("ep", defaults.ep or 1, "no expert parallelism")
    else:
        ep = None
    off_flag = defaults.cuda_graphs_off_flag if defaults else None
    cuda_graphs = pick(
        "cuda_graphs",
        defaults.cuda_graphs if defaults else None,
        f"no {off_flag}" if off_flag else "",
    )
    autotune = _autotune(target, engine_version, engine_label, host, stated, origins, notes)
    if skip_autotune and autotune:
        from fp4doctor.coldstart import rules

        rule = rules.load().autotune_for(target, engine_version)
        if rule is not None and rule.disable_arg:
            autotune = False
            origins["autotune"] = f"`env --cold-start fast` writes {rule.disable_arg}"
    concurrency = pick("concurrency", None)
    autotune_cache = _autotune_cache(target, engine_version, autotune, _int(tp), _int(dp))
    if autotune_cache is not None:
        origins["autotune_cache"] = f"{engine_label} (profiles/coldstart.yaml)"
    if gemms is not None:
        origins["gemms"] = "read from the model's checkpoint at the deployment's TP/EP"
    if architectures is not None:
        origins["architectures"] = "read from the model's config.json"
    if experts is not None:
        origins["experts"] = "read from the model's config.json"
    return Deployment(
        tp=_int(tp),
        ep=_int(ep),
        dp=_int(dp),
        concurrency=_int(concurrency),
        autotune=None if autotune is None else bool(autotune),
        cuda_graphs=None if cuda_graphs is None else bool(cuda_graphs),
        architectures=architectures,
        experts=experts,
        autotune_cache=autotune_cache,
        gemms=gemms,
        origins=tuple(origins.items()),
        notes=tuple(notes),
    )


def _autotune_cache(
    target: str, version: str, autotune: bool | None, tp: int | None, dp: int | None
) -> bool | None:
    """Whether the release keeps FlashInfer's tuned tactics in a persistent file and reads them
    back, with the autotune as settled, on the deployment's ranks (coldstart.yaml `cache`)."""
    from fp4doctor.coldstart import rules

    rule = rules.load().autotune_for(target, version)
    if rule is None:
        return None
    world = tp * (dp or 1) if tp is not None else None
    return rule.keeps_file(autotune, world)


def _int(value: object) -> int | None:
    return None if value is None else int(str(value))


def _autotune(
    target: str,
    version: str,
    label: str,
    host: HostFacts,
    stated: Mapping[str, Stated],
    origins: dict[str, str],
    notes: list[str],
) -> bool | None:
    """FlashInfer's autotune at start-up, as the release runs it on these GPUs (coldstart.yaml);
    a stated value the release cannot honour is noted and overruled."""
    from fp4doctor.coldstart import rules

    rule = rules.load().autotune_for(target, version)
    said = stated.get("autotune")
    if rule is None:
        if said is not None:
            origins["autotune"] = said.origin
            return bool(said.value)
        return None
    if not rule.tunes:
        if said is not None and (target == "flashinfer" or not said.value):
            origins["autotune"] = said.origin  # a library's caller tunes when it says so
            return bool(said.value)
        if said is not None:
            notes.append(f"{said.origin}: {label} runs no FlashInfer autotune ({rule.reason})")
        origins["autotune"] = f"{label} default ({rule.reason})"
        return False
    if target != "flashinfer" and host.packages.version("flashinfer-python") is None:
        # The engines tune FlashInfer's kernels only where FlashInfer is installed
        # (kernel_warmup's has_flashinfer(), coldstart.yaml's sources).
        origins["autotune"] = f"{label} default (no FlashInfer installed: nothing to tune)"
        return False
    gated = [
        g
        for g in host.gpus
        if rule.compute_capability is not None
        and contains(rule.compute_capability, g.cc_text) is not True
    ]
    if host.gpus and len(gated) == len(host.gpus):
        origins["autotune"] = f"{label} default ({rule.reason}: not on SM {gated[0].cc_text})"
        return False
    if said is not None and not said.value:
        if rule.disable_arg:
            origins["autotune"] = said.origin
            return False
        notes.append(
            f"{said.origin} cannot be honoured: {label} has no switch for FlashInfer's autotune "
            f"({rule.reason}); judged with it on"
        )
    elif said is not None:
        origins["autotune"] = said.origin
        return True
    switch = f"; {rule.disable_arg} turns it off" if rule.disable_arg else ""
    origins["autotune"] = f"{label} default ({rule.reason}{switch})"
    return True


def defaults_for(target: str, version: str) -> Defaults | None:
    """The release's defaults, or None when profiles/deployment.yaml reads none for it."""
    for d in load():
        if d.target == target and contains(d.engine, version) is True:
            return d
    return None


@dataclass(frozen=True)
class _Data:
    """profiles/deployment.yaml as parsed: the engines' defaults and the MoE model names."""

    defaults: tuple[Defaults, ...]
    moe_names: tuple[tuple[str, str], ...]  # (pattern, what it says)


@functools.cache
def _data(path: str | None = None) -> _Data:
    """The file parsed (the shipped one unless `path`), kept in fp4doctor's profile cache as
    the other rule files are; ProfileError names file, line and key."""
    from fp4doctor import cache
    from fp4doctor.profile import builtin_dir

    file = str(path or builtin_dir() / "deployment.yaml")
    return cache.cached("deployment", file, lambda: (_parse(file), []))


def _parse(file: str) -> _Data:
    from fp4doctor.profile.schema import compose

    try:
        text = read_text(file)
    except UnreadableText as exc:
        raise ProfileError(str(exc)) from None
    root = compose(text, file)
    fields = root.mapping(("schema", "defaults", "moe_names"))
    schema = required(fields, "schema", root)
    if schema.integer() != SCHEMA:
        raise schema.error(f"is {schema.integer()}; this fp4doctor reads schema {SCHEMA}")
    defaults = tuple(_defaults(n) for n in required(fields, "defaults", root).sequence())
    names = []
    for node in fields["moe_names"].sequence() if "moe_names" in fields else []:
        f = node.mapping(("pattern", "what", "source"))
        pattern = required(f, "pattern", node)
        required(f, "source", node).text()
        try:
            re.compile(pattern.text(), re.IGNORECASE)
        except re.error as exc:
            raise pattern.error(f"is not a regular expression: {exc}") from None
        names.append((pattern.text(), required(f, "what", node).text()))
    return _Data(defaults, tuple(names))


def load(path: str | None = None) -> tuple[Defaults, ...]:
    """The engines' defaults (the shipped file unless `path`)."""
    return _data(path).defaults


@functools.cache
def _moe_patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(p, re.IGNORECASE), what) for p, what in _data().moe_names)


def moe_by_name(model: str) -> str | None:
    """Why a model's name says it has routed experts (profiles/deployment.yaml `moe_names`),
    or None when the name does not tell. For a model whose checkpoint cannot be read."""
    name = model[-400:]  # a name, not a document: the patterns stay linear in it
    for pattern, what in _moe_patterns():
        if pattern.search(name):
            return what
    return None


def _defaults(node: Node) -> Defaults:
    keys = ("target", "engine", "tp", "dp", "ep", "expert_parallel", "cuda_graphs",
            "cuda_graphs_off_flag", "source")  # fmt: skip
    f = node.mapping(keys)
    return Defaults(
        target=required(f, "target", node).text(),
        engine=required(f, "engine", node).specifier(),
        source=required(f, "source", node).text(),
        tp=optional(f, "tp", Node.integer),
        dp=optional(f, "dp", Node.integer),
        ep=optional(f, "ep", Node.integer),
        expert_parallel=optional(f, "expert_parallel", Node.boolean),
        cuda_graphs=optional(f, "cuda_graphs", Node.boolean),
        cuda_graphs_off_flag=optional(f, "cuda_graphs_off_flag", Node.text),
    )


def engine_flags(argv: Sequence[str]) -> dict[str, str]:
    """The flags of an engine's command line as `--flag` -> value (the last one given wins;
    `--flag=value` and `--flag value`; `--a_b` is `--a-b`, as the engines' parsers take both;
    a flag with no value is "true"). What CLI knobs as set select is read from it."""
    flags: dict[str, str] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if not word.startswith("--") or word == "--":
            continue
        name, eq, value = word.partition("=")
        name = "--" + name[2:].replace("_", "-")
        if not eq:
            if i < len(argv) and not argv[i].startswith("-"):
                value = argv[i]
                i += 1
            else:
                value = "true"
        flags[name] = value
    return flags
