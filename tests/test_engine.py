"""Real vLLM and SGLang releases asked by the oracle, beside the rules (marker `engine`).

Each release is a real `pip install vllm==V` (`sglang==V`) in $FP4DOCTOR_ENGINE_VENVS/vllm-V
(sglang-V; `tools/engine_venvs.sh` builds them, cached under .ci-cache/); without them the
tests skip and say so. On this CPU host the engine's device queries are stubbed per compute
capability and its compiled extensions load against a stub libcuda.so.1 built with gcc
(tools/engine_agreement.py, where the FAKEs are described). Per release x FlashInfer
present/absent (SGLang: present, its dependency) one worker answers every compute capability
9.0-12.1, both families, the knobs as set and every knob set `env` would write.

Disagreements the rules cannot fix here are listed in KNOWN with the rule at fault, and are
expected failures: they must keep failing until that rule is fixed (strict).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fp4doctor.oracle.answers import AS_SET
from tools import engine_agreement as agreement

pytestmark = pytest.mark.engine

VENVS = os.environ.get("FP4DOCTOR_ENGINE_VENVS")
CHECKPOINTS = Path(__file__).parent / "fixtures" / "checkpoints"

# (engine, release, FlashInfer present, cc, family) -> the rule that is wrong. Empty: the three
# disagreements of the first run (vLLM 0.17-0.19 without FlashInfer, 0.34 on SM110, the W4A16
# CuTe-DSL knob) are modelled in profiles/vllm.yaml (docs/engine-oracle.md says where).
KNOWN: dict[tuple[str, str, bool, str, str], str] = {}
# (engine, release, cc, family, backend) -> why `env`'s knobs for that backend do not make the
# engine pick it.
KNOWN_KNOBS: dict[tuple[str, str, str, str, str], str] = {}
Asked = dict[tuple[str, str, bool], list[agreement.Row]]
PARAMS = [pytest.param(e, r, fi, id=f"{e}-{r}-{'fi' if fi else 'no-fi'}")
          for e, r in agreement.RELEASES for fi in agreement.FLASHINFER_CASES[e]]  # fmt: skip


def _venv(engine: str, release: str) -> Path:
    if not VENVS:
        pytest.skip(
            "FP4DOCTOR_ENGINE_VENVS is not set (a directory of vllm-V and sglang-V venvs: "
            "tools/engine_venvs.sh)"
        )
    python = agreement.venv_python(Path(VENVS), engine, release)
    if not python.exists():
        pytest.skip(f"{python} is not installed (pip install {engine}=={release} in a venv there)")
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the stub libcuda.so.1")
    return python


@pytest.fixture(scope="module")
def asked(tmp_path_factory: pytest.TempPathFactory) -> Asked:
    """Rows per (engine, release, FlashInfer present), asked once per module."""
    return {}


def _rows(asked: Asked, tmp: Path, engine: str, release: str, fi: bool) -> list[agreement.Row]:
    if (engine, release, fi) not in asked:
        python = _venv(engine, release)
        driver = agreement.stub_driver(tmp)
        hide = tmp / "hide"
        hide.mkdir(exist_ok=True)
        (hide / "sitecustomize.py").write_text(agreement.HIDE_FLASHINFER)
        base = agreement.probed(python, engine)
        evs = agreement.evaluations(base, engine, release, fi)
        got = agreement.ask(python, driver, None if fi else hide, engine, release, evs)
        assert got.unasked is None, got.unasked
        asked[(engine, release, fi)] = agreement.rows(engine, release, fi, evs, got)
    return asked[(engine, release, fi)]


def _key(r: agreement.Row) -> tuple[str, str, bool, str, str]:
    return (r.target, r.release, r.flashinfer, r.cc, r.family)


@pytest.mark.parametrize(("engine", "release", "flashinfer"), PARAMS)
def test_rules_predict_what_the_engine_picks(
    asked: Asked, tmp_path: Path, engine: str, release: str, flashinfer: bool
) -> None:
    rows = _rows(asked, tmp_path, engine, release, flashinfer)
    assert len(rows) == len(agreement.CAPABILITIES) * len(agreement.FAMILIES)
    this = (engine, release, flashinfer)
    wrong = [r for r in rows if not r.agree and _key(r) not in KNOWN]
    stale = [k for k in KNOWN if k[:3] == this and any(_key(r) == k and r.agree for r in rows)]
    assert not stale, f"fixed, drop from KNOWN: {stale}"
    assert not wrong, "\n".join(
        f"{engine} {r.release} CC {r.cc} {r.family}: rules {r.rules}, engine {r.engine}"
        for r in wrong
    )
    if any(this == k[:3] for k in KNOWN):
        pytest.xfail("; ".join(v for k, v in KNOWN.items() if k[:3] == this))


@pytest.mark.parametrize(("engine", "release"), agreement.RELEASES, ids="-".join)
def test_every_knob_set_env_writes_makes_the_engine_pick_it(
    asked: Asked, tmp_path: Path, engine: str, release: str
) -> None:
    rows = _rows(asked, tmp_path, engine, release, True)
    missed = {
        (engine, release, r.cc, r.family, m.split(" [", 1)[0]): m for r in rows for m in r.missed
    }
    unknown = [f"CC {k[2]} {k[3]}: {m}" for k, m in missed.items() if k not in KNOWN_KNOBS]
    stale = [k for k in KNOWN_KNOBS if k[:2] == (engine, release) and k not in missed]
    assert not stale, f"fixed, drop from KNOWN_KNOBS: {stale}"
    assert not unknown, "\n".join(unknown)
    if any(k[:2] == (engine, release) for k in KNOWN_KNOBS):
        why = (v for k, v in KNOWN_KNOBS.items() if k[:2] == (engine, release))
        pytest.xfail("; ".join(dict.fromkeys(why)))


def test_sglang_runs_a_compressed_tensors_w4a16_model_as_the_rules_say(tmp_path: Path) -> None:
    """SGLang 0.5.23 asked for a compressed-tensors W4A16 checkpoint's linear layers (its
    config.json handed to the worker): FlashInfer's mm_bf16_fp4 under auto on SM100, Marlin on
    SM120 and SM90, as profiles/shapes.yaml's weight-only entry for the format says."""
    from fp4doctor import checkpoint
    from fp4doctor.checkpoint import constraints, judge
    from fp4doctor.oracle import query
    from fp4doctor.pick import family_pick

    python = _venv("sglang", "0.5.23")
    ckpt = checkpoint.load(str(CHECKPOINTS / "llama-3.1-8b-instruct-nvfp4a16"))
    base = agreement.probed(python, "sglang")
    expected = {(10, 0): "flashinfer-cutedsl-w4a16", (12, 0): "marlin", (9, 0): "marlin"}
    cases, rules = [], {}
    for ev in agreement.evaluations(base, "sglang", "0.5.23", True):
        gpu = ev.facts.gpus[0]
        if ev.family != "linear" or (gpu.cc_major, gpu.cc_minor) not in expected:
            continue
        model = judge.judge(ckpt, ev.profile, "0.5.23", constraints.load())
        rules[(gpu.cc_major, gpu.cc_minor)] = family_pick(model.fold(ev)).backend
        cases += [c for c in query.cases_for(ev, True, True) if c.label == AS_SET]
    env = agreement.worker_env(python, agreement.stub_driver(tmp_path))
    asking = query.Asking("sglang", "SGLang", "0.5.23", cases, stub=True, package="sglang",
                          env=env, model=dict(ckpt.config))  # fmt: skip
    got = asking.answers()
    assert got.unasked is None, got.unasked
    picked = {c.cc: a.backend for c in cases if (a := got.answer(c)) is not None}
    assert picked == expected == rules, (picked, rules)


@pytest.mark.parametrize(("release", "majors"), [("0.5.16", {12}), ("0.5.23", {11, 12})])
def test_sglang_post_processing_moves_auto_to_flashinfer_cutlass(
    tmp_path: Path, release: str, majors: set[int]
) -> None:
    """SGLang's own server-args post-processing, run by the oracle adapter through
    prepare_server_args: with --quantization modelopt_fp4 the auto MoE runner becomes
    flashinfer_cutlass on SM12x (SM11x too from 0.5.22), and stays flashinfer_trtllm without the
    flag (tools/extract/data/sglang.json moe.fp4_rewrites_of_moe_runner_backend; the profile's
    automatic order: tests/test_moe_release_data.py)."""
    from fp4doctor.oracle import query
    from fp4doctor.oracle.answers import Case

    python = _venv("sglang", release)
    flag = ("--quantization", "modelopt_fp4")
    cases = [
        Case(AS_SET, "moe", cc, args=args)
        for cc in ((10, 0), (11, 0), (12, 0), (12, 1))
        for args in ((), flag)
    ]
    env = agreement.worker_env(python, agreement.stub_driver(tmp_path))
    asking = query.Asking("sglang", "SGLang", release, cases, stub=True, package="sglang", env=env)
    got = asking.answers()
    assert got.unasked is None, got.unasked
    for case in cases:
        answer = got.answer(case)
        assert answer is not None, case
        moved = bool(case.args) and case.cc[0] in majors
        expected = "flashinfer-cutlass-moe" if moved else "flashinfer-trtllm-moe"
        assert answer.backend == expected, (release, case.cc, case.args, answer)
