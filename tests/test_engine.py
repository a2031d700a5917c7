"""Real vLLM releases asked by the oracle, beside the rules (marker `engine`).

Each release is a real `pip install vllm==V` in $FP4DOCTOR_VLLM_VENVS/vllm-V
(`tools/engine_venvs.sh` builds them, cached under .ci-cache/); without them the tests skip
and say so. On this CPU host the
engine's capability query is stubbed per compute capability and its compiled extension loads
against a stub libcuda.so.1 built with gcc (tools/engine_agreement.py, where both FAKEs are
described). Per release x FlashInfer present/absent one worker answers every compute
capability 9.0-12.1, both families, the knobs as set and every knob set `env` would write.

Disagreements the rules cannot fix here are listed in KNOWN with the rule at fault, and are
expected failures: they must keep failing until that rule is fixed (strict).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tools import engine_agreement as agreement

pytestmark = pytest.mark.engine

VENVS = os.environ.get("FP4DOCTOR_VLLM_VENVS")

# (release, FlashInfer present, cc, family) -> the rule that is wrong. Empty: the three
# disagreements of the first run (vLLM 0.17-0.19 without FlashInfer, 0.34 on SM110, the W4A16
# CuTe-DSL knob) are modelled in profiles/vllm.yaml (docs/engine-oracle.md says where).
KNOWN: dict[tuple[str, bool, str, str], str] = {}
# (release, cc, family, backend) -> why `env`'s knobs for that backend do not make vLLM pick it.
KNOWN_KNOBS: dict[tuple[str, str, str, str], str] = {}


def _venv(release: str) -> Path:
    if not VENVS:
        pytest.skip(
            "FP4DOCTOR_VLLM_VENVS is not set (a directory of vllm-V venvs: tools/engine_venvs.sh)"
        )
    python = agreement.venv_python(Path(VENVS), release)
    if not python.exists():
        pytest.skip(f"{python} is not installed (pip install vllm=={release} in a venv there)")
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the stub libcuda.so.1")
    return python


@pytest.fixture(scope="module")
def asked(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], list[agreement.Row]]:
    """Rows per (release, FlashInfer present), asked once per module."""
    return {}


def _rows(
    asked: dict[tuple[str, bool], list[agreement.Row]], tmp: Path, release: str, fi: bool
) -> list[agreement.Row]:
    if (release, fi) not in asked:
        python = _venv(release)
        driver = agreement.stub_driver(tmp)
        hide = tmp / "hide"
        hide.mkdir(exist_ok=True)
        (hide / "sitecustomize.py").write_text(agreement.HIDE_FLASHINFER)
        base = agreement.probed(python)
        evs = agreement.evaluations(base, release, fi)
        got = agreement.ask(python, driver, None if fi else hide, release, evs)
        assert got.unasked is None, got.unasked
        asked[(release, fi)] = agreement.rows(release, fi, evs, got)
    return asked[(release, fi)]


@pytest.mark.parametrize("flashinfer", [True, False], ids=["flashinfer", "no-flashinfer"])
@pytest.mark.parametrize("release", agreement.RELEASES)
def test_rules_predict_what_vllm_picks(
    asked: dict[tuple[str, bool], list[agreement.Row]],
    tmp_path: Path,
    release: str,
    flashinfer: bool,
) -> None:
    rows = _rows(asked, tmp_path, release, flashinfer)
    assert len(rows) == len(agreement.CAPABILITIES) * len(agreement.FAMILIES)
    wrong = [
        r for r in rows if not r.agree and (r.release, r.flashinfer, r.cc, r.family) not in KNOWN
    ]
    stale = [
        k
        for k in KNOWN
        if k[:2] == (release, flashinfer)
        and any((r.release, r.flashinfer, r.cc, r.family) == k and r.agree for r in rows)
    ]
    assert not stale, f"fixed, drop from KNOWN: {stale}"
    assert not wrong, "\n".join(
        f"vLLM {r.release} CC {r.cc} {r.family}: rules {r.rules}, vLLM {r.engine}" for r in wrong
    )
    if any((release, flashinfer) == k[:2] for k in KNOWN):
        pytest.xfail("; ".join(v for k, v in KNOWN.items() if k[:2] == (release, flashinfer)))


@pytest.mark.parametrize("release", agreement.RELEASES)
def test_every_knob_set_env_writes_makes_vllm_pick_it(
    asked: dict[tuple[str, bool], list[agreement.Row]], tmp_path: Path, release: str
) -> None:
    rows = _rows(asked, tmp_path, release, True)
    missed = {(release, r.cc, r.family, m.split(" [", 1)[0]): m for r in rows for m in r.missed}
    unknown = [f"CC {k[1]} {k[2]}: {m}" for k, m in missed.items() if k not in KNOWN_KNOBS]
    stale = [k for k in KNOWN_KNOBS if k[0] == release and k not in missed]
    assert not stale, f"fixed, drop from KNOWN_KNOBS: {stale}"
    assert not unknown, "\n".join(unknown)
    if any(k[0] == release for k in KNOWN_KNOBS):
        pytest.xfail("; ".join(dict.fromkeys(v for k, v in KNOWN_KNOBS.items() if k[0] == release)))
