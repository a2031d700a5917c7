"""Write docs/targets/<target>.md from the shipped profiles (or, with --check, report stale pages).

python docs/targets/generate.py          # rewrite every page
python docs/targets/generate.py --check  # exit 1 when a page differs from its profile
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fp4doctor import profile
from fp4doctor.profile.markdown import render

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = []
    for target in profile.builtin_names():
        page = HERE / f"{target}.md"
        text = render(profile.load(target))
        current = page.read_text(encoding="utf-8") if page.is_file() else None
        if current == text:
            continue
        stale.append(page.name)
        if not args.check:
            tmp = page.with_suffix(".md.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(page)
    if args.check and stale:
        print("stale: " + ", ".join(stale) + " (run: python docs/targets/generate.py)")
        return 1
    for name in stale:
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
