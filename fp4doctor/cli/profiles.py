"""`fp4doctor profiles`: list, show and validate profiles."""

from __future__ import annotations

from pathlib import Path

import click

from fp4doctor.console import Group, user_errors, write


@click.group(cls=Group)
def profiles() -> None:
    """List, show and validate profiles."""


@profiles.command("list")
def profiles_list() -> None:
    """List the shipped profiles."""
    from fp4doctor import profile

    with user_errors():
        loaded = [profile.load(name) for name in profile.builtin_names()]
    rows = [(p.target, p.title, f"{len(p.backends)} backends, {len(p.eras)} eras") for p in loaded]
    width = [max((len(row[i]) for row in rows), default=0) for i in range(3)]
    write(
        "".join(
            f"{t.ljust(width[0])}  {title.ljust(width[1])}  {counts.ljust(width[2])}  "
            f"up to {p.engine.newest_known}\n"
            for (t, title, counts), p in zip(rows, loaded, strict=True)
        )
    )


@profiles.command("show")
@click.argument("name")
@click.option(
    "--profile",
    "extra",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="A profile YAML that adds or overrides a target.",
)
def profiles_show(name: str, extra: tuple[str, ...]) -> None:
    """Show a profile as Markdown: what each backend needs and which knob selects it."""
    from fp4doctor import profile
    from fp4doctor.profile.markdown import render as markdown

    with user_errors():
        text = markdown(profile.load(name, [Path(p) for p in extra]))
    write(text)


@profiles.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
def profiles_validate(paths: tuple[str, ...]) -> None:
    """Validate profile files; exit 2 with file, line and key on the first error."""
    from fp4doctor import profile

    with user_errors():
        for path in paths:
            p = profile.load_file(path)
            write(f"{path}: ok ({p.target}: {len(p.backends)} backends, {len(p.eras)} eras)\n")
