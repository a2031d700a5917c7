"""`eval "$(fp4doctor env)"` end to end, with hostile values coming from a user's profile.

The emitters are fuzzed on their own in test_emit_shells.py; here the whole command runs (profile
load, resolve, emit) and its stdout is evaluated by the real shell: the intended variable holds
exactly the profile's bytes, the conflicting one is gone, and no canary command ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.shells

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
HOSTILE = [
    "$(touch CANARY)",
    "`touch CANARY`",
    "'; touch CANARY; echo '",
    'a"b\\"; touch CANARY; "',
    "x\ny; touch CANARY",
    "(touch CANARY) {a,b} *",
]

PROFILE = """\
schema: 1
target: hostile
title: Hostile
engine:
  package: hostile-engine
  newest_known: "1.0"
backends:
  fast:
    summary: a backend whose knob value is hostile
    native: false
eras:
  - versions: ">=0"
    source: test
    knobs:
      - env: HOSTILE_BACKEND
        values:
          fast: {value}
    auto:
      - backend: fast
    conflicts: [HOSTILE_OLD]
"""

SHELLS = {
    "bash": [
        "bash",
        "-c",
        'eval "$(cat "$1")"; printf "%s" "${HOSTILE_BACKEND}"; '
        'printf "\\0%s" "${HOSTILE_OLD-unset}"',
        "sh",
    ],
    "zsh": [
        "zsh",
        "-c",
        'eval "$(cat "$1")"; printf "%s" "${HOSTILE_BACKEND}"; '
        'printf "\\0%s" "${HOSTILE_OLD-unset}"',
        "sh",
    ],
    "sh": [
        "dash",
        "-c",
        'eval "$(cat "$1")"; printf "%s" "${HOSTILE_BACKEND}"; '
        'printf "\\0%s" "${HOSTILE_OLD-unset}"',
        "sh",
    ],
    "fish": [
        "fish",
        "-c",
        'source $argv[1]; printf "%s" "$HOSTILE_BACKEND"; '
        'if set -q HOSTILE_OLD; printf "\\0%s" $HOSTILE_OLD; else; printf "\\0unset"; end',
    ],
}


@pytest.mark.parametrize("shell", sorted(SHELLS))
@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_profile_values_are_set_exactly_and_never_run(
    shell: str, value: str, tmp_path: Path
) -> None:
    program = SHELLS[shell]
    if shutil.which(program[0]) is None:
        pytest.skip(f"{program[0]} is not installed")
    import json

    profile = tmp_path / "hostile.yaml"
    profile.write_text(PROFILE.format(value=json.dumps(value)))  # a JSON string is valid YAML
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "HOSTILE"))}
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "fp4doctor",
            "env",
            "--target",
            "hostile",
            "--profile",
            str(profile),
            "--facts",
            str(HOSTS / "cpu.json"),
            "--shell",
            shell,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    script = tmp_path / "exports"
    script.write_text(made.stdout)
    ran = subprocess.run(
        [*program, str(script)],
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HOSTILE_OLD": "stale"},
    )
    assert ran.returncode == 0, ran.stderr
    got, old = ran.stdout.decode().split("\0")
    assert got == value
    assert old == "unset"
    assert not (tmp_path / "CANARY").exists()
