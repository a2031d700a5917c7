"""Render a profile as a Markdown page: what each backend needs, which knob selects it, by version.

The pages under docs/targets/ are this function's output for the shipped profiles
(docs/targets/generate.py writes them; tests/test_docs_targets.py keeps them equal), so the
documentation cannot drift from the rules fp4doctor applies.
"""

from __future__ import annotations

from collections.abc import Iterable

from packaging.specifiers import SpecifierSet

from fp4doctor.profile.kinds.base import Requirement
from fp4doctor.profile.kinds.use import Use
from fp4doctor.profile.knobs import STYLES, KnobKind
from fp4doctor.profile.model import (
    FAMILY_LINEAR,
    FAMILY_TITLES,
    Advisory,
    AutoStep,
    Backend,
    Era,
    Knob,
    Profile,
)
from fp4doctor.versions import spec_text

_CONFIG_FORMATS = {
    "vllm-yaml": "vLLM's `--config` YAML file",
    "sglang-yaml": "SGLang's `--config` YAML file",
    "trtllm-yaml": "TensorRT-LLM's LLM API options YAML (`trtllm-serve --config`)",
    "dotenv": "a dotenv file of the variables",
}


def render(profile: Profile) -> str:
    """The Markdown page for one profile (deterministic: the same profile gives the same text)."""
    out: list[str] = []
    out += _header(profile)
    families = profile.families()
    if len(families) > 1:
        titles = ", ".join(f"the {FAMILY_TITLES[f]}" for f in families)
        out += [
            f"Families: {titles}. Each has its own backends, knobs and automatic order, "
            "and is judged and chosen on its own (`--family` narrows a check to one).",
            "",
        ]
    for family in families:
        view = profile.view(family)
        out += _backends_section(view)
        out += _knob_table(view)
        out += _eras_section(view)
    out += _conditions_section(profile)
    out += _variables_section(profile)
    return "\n".join(out).rstrip("\n") + "\n"


# --- text helpers ------------------------------------------------------------------------------


def versions_text(spec: SpecifierSet) -> str:
    """An era's versions in words: '0.11.1 ≤ v < 0.15', 'v < 0.10.1', 'v ≥ 0.28'."""
    lower = [s for s in spec if s.operator == ">="]
    upper = [s for s in spec if s.operator == "<"]
    if len(lower) + len(upper) != len(spec) or len(lower) > 1 or len(upper) > 1:
        return spec_text(spec)
    if lower and upper:
        return f"{lower[0].version} ≤ v < {upper[0].version}"
    if lower:
        return f"v ≥ {lower[0].version}"
    if upper:
        return f"v < {upper[0].version}"
    return "every version"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`"


def describe(req: Requirement, expand_use: bool = True) -> str:
    """One requirement in plain words, without its when-condition, reason or source."""
    if not expand_use and isinstance(req.kind, Use):
        return req.kind.reference()
    return req.kind.describe()


def _inline(req: Requirement, expand_use: bool = True) -> str:
    """A requirement with its when-condition, for use inside a sentence."""
    text = describe(req, expand_use)
    when = req.when_text()
    return f"{text} ({when})" if when else text


def _flatten(reqs: Iterable[Requirement]) -> list[Requirement]:
    """Top-level requirements with every `use` replaced by the entries of its condition."""
    flat: list[Requirement] = []
    for req in reqs:
        if isinstance(req.kind, Use) and not req.when:
            flat.extend(_flatten(req.children))
        else:
            flat.append(req)
    return flat


def _requirement_bullet(req: Requirement) -> str:
    text = _inline(req)
    extras = []
    if req.reason:
        extras.append(req.reason)
    if req.fix:
        extras.append(f"fix: {_code(req.fix)}")
    if req.source:
        extras.append(f"source: {req.source}")
    if extras:
        text += " — " + "; ".join(extras)
    return f"- {text}"


def _knob_spelling(knob: Knob, value: str) -> str:
    return _code(STYLES[KnobKind(knob.kind)].markdown(knob.name, value, knob.scalar))


def _knob_label(knob: Knob) -> str:
    marks = []
    if knob.deprecated:
        marks.append("deprecated")
    if not knob.select:
        marks.append("never set by fp4doctor")
    return f" ({', '.join(marks)})" if marks else ""


# --- sections ----------------------------------------------------------------------------------


def _header(profile: Profile) -> list[str]:
    engine = profile.engine
    out = [
        f"# {profile.title} (`--target {profile.target}`)",
        "",
        f"<!-- Generated from profiles/{profile.target}.yaml by docs/targets/generate.py; "
        "do not edit by hand. -->",
        "",
        f"The version that picks the rules is that of the {_code(engine.package)} distribution "
        f"(or `--engine-version`); the newest version this profile knows is "
        f"{_code(engine.newest_known)}, used when {_code(engine.package)} is not installed.",
        "",
    ]
    config = _CONFIG_FORMATS.get(engine.config_format, engine.config_format)
    where = [f"`fp4doctor config` writes {config}"]
    if engine.config_from:
        where[0] += f" (from {engine.config_from}; a dotenv file of the variables before it)"
    where[0] += "."
    if engine.config_source:
        where.append(f"Config file: {engine.config_source}.")
    if engine.args_variable:
        where.append(
            f"Choices the engine takes only as a flag, config key or argument are exported by "
            f"`fp4doctor env` in {_code(engine.args_variable)}."
        )
    out += [" ".join(where), ""]
    if profile.source:
        out += [f"Source: {profile.source}", ""]
    if engine.requires:
        out += ["What the engine itself needs, whatever backend it uses:", ""]
        out += [_requirement_bullet(r) for r in _flatten(engine.requires)]
        out.append("")
    return out


def _section(profile: Profile, title: str) -> str:
    """A section heading; the MoE family's say so (`## MoE family: backends`)."""
    if profile.family in (None, FAMILY_LINEAR):
        return f"## {title}"
    return f"## MoE family: {title[0].lower()}{title[1:]}"


def _what(profile: Profile) -> str:
    return "FP4 GEMM" if profile.family in (None, FAMILY_LINEAR) else "FP4 MoE"


def _backends_section(profile: Profile) -> list[str]:
    out = [
        _section(profile, "Backends"),
        "",
        "Listed in fp4doctor's order of preference (used when the engine's own automatic "
        "order gives nothing valid).",
        "",
        "| backend | `--prefer` aliases | native FP4 | what it is |",
        "| --- | --- | --- | --- |",
    ]
    for b in profile.backends.values():
        aliases = ", ".join(_code(a) for a in b.aliases) or "—"
        out.append(
            f"| {_code(b.name)} | {aliases} | {'yes' if b.native else 'no'} | {_cell(b.summary)} |"
        )
    out.append("")
    for b in profile.backends.values():
        out += _backend_detail(b)
    return out


def _backend_detail(backend: Backend) -> list[str]:
    out = [f"### {backend.name}", "", backend.summary + ".", ""]
    if backend.smoke:
        out += ["Live check: " + ", ".join(_code(s) for s in backend.smoke) + ".", ""]
    reqs = _flatten(backend.requires)
    if reqs:
        out += ["Needs (on every GPU for compute-capability rules, on the host otherwise):", ""]
        out += [_requirement_bullet(r) for r in reqs]
        out.append("")
    else:
        out += ["Needs nothing this profile checks.", ""]
    if backend.advisories:
        out += ["Known problems (a warning, not a refusal):", ""]
        out += [_advisory_bullet(a) for a in backend.advisories]
        out.append("")
    return out


def _advisory_bullet(advisory: Advisory) -> str:
    conditions = " and ".join(_inline(c) for c in advisory.conditions) or "always"
    text = f"- {_code(advisory.id)}: when {conditions}: {advisory.reason}"
    if advisory.trigger.conditions:
        text += f" (strikes with: {advisory.trigger.describe()})"
    if advisory.evidence:
        text += f"; evidence: {advisory.evidence}"
    if advisory.fix:
        text += f" — fix: {_code(advisory.fix)}"
    if advisory.source:
        text += f"; source: {advisory.source}"
    return text


def _knob_table(profile: Profile) -> list[str]:
    names = profile.backend_names()
    out = [
        _section(profile, "Which knob selects each backend, by version"),
        "",
        "Several knobs in one cell are listed from the highest precedence down. "
        "“—”: no knob selects it in those versions.",
        "",
        "| versions | " + " | ".join(_code(n) for n in names) + " |",
        "| --- |" + " --- |" * len(names),
    ]
    for era in profile.eras:
        cells = []
        for name in names:
            spellings = [
                _knob_spelling(k, k.values[name][0]) + _knob_label(k)
                for k in era.knobs
                if name in k.values
            ]
            cells.append("<br>".join(spellings) or "—")
        out.append(f"| {_cell(versions_text(era.versions))} | " + " | ".join(cells) + " |")
    out.append("")
    return out


def _eras_section(profile: Profile) -> list[str]:
    out = [_section(profile, "Eras"), ""]
    for era in profile.eras:
        out += _era_detail(era, _what(profile))
    return out


def _era_detail(era: Era, what: str = "FP4 GEMM") -> list[str]:
    out = [f"### {versions_text(era.versions)}", ""]
    if era.note:
        out += [era.note + ("" if era.note.endswith(".") else "."), ""]
    if era.knobs:
        out += ["Knobs, highest precedence first:", ""]
        out += [_knob_bullet(k) for k in era.knobs]
        out.append("")
    else:
        out += [f"No knob selects the {what} backend.", ""]
    out += ["Automatic order (what the engine picks when left alone; the first step that holds):"]
    out.append("")
    if era.auto:
        out += [f"{i}. {_auto_step(step)}" for i, step in enumerate(era.auto, 1)]
    else:
        out += [
            "Nothing: the engine has no FP4 GEMM here."
            if what == "FP4 GEMM"
            else f"Nothing: no {what} backend is picked by itself here (the caller chooses one)."
        ]
    out.append("")
    if era.reads:
        out += ["Also reads: " + ", ".join(_code(v) for v in era.reads) + ".", ""]
    if era.conflicts:
        out += ["Unset whatever is chosen: " + ", ".join(_code(v) for v in era.conflicts) + ".", ""]
    if era.source:
        out += [f"Source: {era.source}", ""]
    return out


def _knob_bullet(knob: Knob) -> str:
    kind = STYLES[KnobKind(knob.kind)].label
    values = []
    limited = dict(knob.only_on)
    for backend, spellings in knob.values.items():
        shown = " or ".join(_code(s) for s in spellings)
        where = f" on {limited[backend].describe()}" if backend in limited else ""
        values.append(f"{shown} → {_code(backend)}{where}")
    text = f"- {kind} {_code(knob.name)}: " + ", ".join(values)
    details = []
    if knob.type == "bool":
        style = "parsed with int()" if knob.bool_style == "int" else "true/1 are true"
        details.append(f"on/off, {style}")
    details.append("case-sensitive" if knob.case_sensitive else "any case")
    if knob.deprecated:
        details.append(f"deprecated: {knob.deprecated}")
    if not knob.select:
        details.append("never set by fp4doctor")
    if knob.note:
        details.append(knob.note)
    if knob.on_invalid:
        details.append(f"invalid value: {knob.on_invalid}")
    if knob.source:
        details.append(f"source: {knob.source}")
    return text + " (" + "; ".join(details) + ")"


def _auto_step(step: AutoStep) -> str:
    if not step.conditions:
        return f"{_code(step.backend)}"
    conditions = " and ".join(_inline(c, expand_use=False) for c in step.conditions)
    return f"{_code(step.backend)} when {conditions}"


def _named_conditions(profile: Profile) -> dict[str, tuple[Requirement, ...]]:
    """The `use:` conditions the automatic orders refer to, by name, in order of first use."""
    found: dict[str, tuple[Requirement, ...]] = {}

    def walk(reqs: Iterable[Requirement]) -> None:
        for req in reqs:
            if isinstance(req.kind, Use) and req.kind.name not in found:
                found[req.kind.name] = req.children
            walk(req.children)

    for era in profile.eras:
        for sub in (era, *(e for _, e in era.families)):
            for step in sub.auto:
                walk(step.conditions)
    return found


def _conditions_section(profile: Profile) -> list[str]:
    named = _named_conditions(profile)
    if not named:
        return []
    out = ["## Conditions used by the automatic orders", ""]
    for name, reqs in named.items():
        out += [f"*{name}*:", ""]
        out += [_requirement_bullet(r) for r in reqs]
        out.append("")
    return out


def _variables_section(profile: Profile) -> list[str]:
    if not profile.variables:
        return []
    out = [
        "## Variables",
        "",
        "FP4 variables users set for this engine, and what fp4doctor says when the installed "
        "version ignores them.",
        "",
        "| variable | note |",
        "| --- | --- |",
    ]
    for var in profile.variables.values():
        family = "" if var.family == FAMILY_LINEAR else f"({var.family}) "
        out.append(f"| {_code(var.name)} | {family}{_cell(var.note)} |")
    out.append("")
    return out
