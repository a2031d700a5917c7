"""Real vLLM and SGLang releases asked by the oracle, beside the rules (marker `engine`): the
agreement of tools/engine_agreement.py, one test per release and scenario.

Each release is a real `pip install vllm==V` (`sglang==V`) in $FP4DOCTOR_ENGINE_VENVS/vllm-V
(sglang-V; `tools/engine_venvs.sh` builds them, cached under .ci-cache/); without them the
tests skip and say so. On this CPU host the engine's device queries are stubbed per compute
capability and its compiled extensions load against a stub libcuda.so.1 built with gcc
(tools/engine_agreement.py, where the FAKEs are described). Per release and scenario
(agreement.SCENARIOS: FlashInfer present, absent, off its pin; nvcc on PATH, under CUDA_HOME
only, none) one worker answers every compute capability 9.0-12.1, both families, the knobs as
set and every knob set `env` would write; the base scenario also asks the variables and flags a
user sets, `env` after `env`, and each checkpoint format's layer class. The off-pin scenario
needs an older flashinfer-python wheel ($FP4DOCTOR_FLASHINFER_WHEEL; engine_venvs.sh downloads
one into .ci-cache/wheels), and skips without one.

Disagreements the rules cannot fix here are listed in KNOWN with the rule at fault, and are
expected failures: they must keep failing until that rule is fixed (strict).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from fp4doctor.oracle.answers import AS_SET
from tools import engine_agreement as agreement

pytestmark = pytest.mark.engine

VENVS = os.environ.get("FP4DOCTOR_ENGINE_VENVS")
CHECKPOINTS = Path(__file__).parent / "fixtures" / "checkpoints"

# (engine, release, scenario, case, cc, family) -> the rule that is wrong. Empty: every class of
# issue 40's measured disagreements is modelled (docs/engine-oracle.md says where).
KNOWN: dict[tuple[str, str, str, str, str, str], str] = {}
# (engine, release, cc, family, backend) -> why `env`'s knobs for that backend do not make the
# engine pick it.
KNOWN_KNOBS: dict[tuple[str, str, str, str, str], str] = {}
# (engine, release, scenario) -> why its selection code cannot be asked there at all.
OFF_PIN = (
    "with flashinfer-python 0.6.3 ahead of its own, the release's selection code does not "
    "import (FileNotFoundError: flashinfer/experimental/b12x/_api.py); the rules have no stop "
    "for a FlashInfer that old under it (docs/engine-oracle.md)"
)
KNOWN_UNASKED: dict[tuple[str, str, str], str] = {
    ("vllm", "0.33.0", "flashinfer-off-pin"): OFF_PIN,
    ("vllm", "0.34.0", "flashinfer-off-pin"): OFF_PIN,
}
Asked = dict[tuple[str, str, str], list[agreement.Row]]
SCENARIOS = {s.name: s for s in agreement.SCENARIOS}
PARAMS = [
    pytest.param(e, r, s.name, id=f"{e}-{r}-{s.name}")
    for e, r in agreement.RELEASES
    for s in agreement.SCENARIOS
    if e in s.engines
]


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


def _wheel() -> Path | None:
    """An older flashinfer-python wheel for the off-pin scenario, when one is at hand."""
    given = os.environ.get("FP4DOCTOR_FLASHINFER_WHEEL")
    if given:
        return Path(given)
    found = sorted(Path(VENVS or ".").parent.glob("wheels/flashinfer_python-*.whl"))
    return found[0] if found else None


@pytest.fixture(scope="module")
def asked(tmp_path_factory: pytest.TempPathFactory) -> Asked:
    """Rows per (engine, release, scenario), asked once per module."""
    return {}


def _rows(asked: Asked, tmp: Path, engine: str, release: str, name: str) -> list[agreement.Row]:
    if (engine, release, name) not in asked:
        python = _venv(engine, release)
        sc = SCENARIOS[name]
        overlay = None
        if sc.off_pin:
            wheel = _wheel()
            if wheel is None:
                pytest.skip("no older flashinfer-python wheel ($FP4DOCTOR_FLASHINFER_WHEEL)")
            overlay = agreement.unpacked(wheel, tmp / "overlay")
        driver = agreement.stub_driver(tmp)
        base = agreement.probed(python, engine)
        names = agreement.hidden(sc, dict(base.packages.versions))
        hide = agreement.hide_dir(tmp / "hide", names) if names else None
        qs = agreement.questions(base, engine, release, sc)
        got = agreement.ask(python, driver, hide, engine, release, qs, sc, overlay)
        known = KNOWN_UNASKED.get((engine, release, name))
        if known is not None and got.unasked is not None:
            pytest.xfail(f"{known}: {got.unasked}")
        assert known is None, f"asked now, drop from KNOWN_UNASKED: {(engine, release, name)}"
        assert got.unasked is None, got.unasked
        asked[(engine, release, name)] = agreement.rows(
            engine, release, sc.flashinfer, qs, got, name
        )
    return asked[(engine, release, name)]


def _key(r: agreement.Row) -> tuple[str, str, str, str, str, str]:
    return (r.target, r.release, r.scenario, r.case, r.cc, r.family)


@pytest.mark.parametrize(("engine", "release", "scenario"), PARAMS)
def test_rules_predict_what_the_engine_picks(
    asked: Asked, tmp_path: Path, engine: str, release: str, scenario: str
) -> None:
    rows = _rows(asked, tmp_path, engine, release, scenario)
    assert len([r for r in rows if r.case == "as set"]) == len(agreement.CAPABILITIES) * len(
        agreement.FAMILIES
    )
    this = (engine, release, scenario)
    wrong = [r for r in rows if not r.agree and _key(r) not in KNOWN]
    stale = [k for k in KNOWN if k[:3] == this and any(_key(r) == k and r.agree for r in rows)]
    assert not stale, f"fixed, drop from KNOWN: {stale}"
    assert not wrong, "\n".join(
        f"{engine} {r.release} {r.scenario} [{r.case}] CC {r.cc} {r.family}: rules {r.rules}, "
        f"engine {r.engine}"
        for r in wrong
    )
    if any(this == k[:3] for k in KNOWN):
        pytest.xfail("; ".join(v for k, v in KNOWN.items() if k[:3] == this))


@pytest.mark.parametrize(("engine", "release"), agreement.RELEASES, ids="-".join)
def test_every_knob_set_env_writes_makes_the_engine_pick_it(
    asked: Asked, tmp_path: Path, engine: str, release: str
) -> None:
    rows = _rows(asked, tmp_path, engine, release, "base")
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


@pytest.mark.parametrize("release", ["0.33.0", "0.34.0"])
def test_a_w4a16_moe_checkpoint_is_ready_with_the_engine_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: str
) -> None:
    """The compressed-tensors W4A16 MoE fixture, judged with the release installed (its venv's
    probed facts and one GPU): the experts are asked as weight-only experts, the engine agrees
    with the rules (Marlin), and the host is ready. Issue 40 class 1."""
    from fp4doctor.doctor import Question, diagnose
    from fp4doctor.findings import Status
    from fp4doctor.oracle import query

    python = _venv("vllm", release)
    base = agreement.probed(python, "vllm")
    monkeypatch.setenv(query.ENGINE_PYTHON_ENV, str(python))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(agreement.stub_driver(tmp_path)))
    monkeypatch.setenv("FP4DOCTOR_CACHE_DIR", "")
    model = str(CHECKPOINTS / "qwen3-30b-a3b-nvfp4a16")
    for cc in ((10, 0), (12, 0)):
        host = agreement.host_for(base, cc, True)
        report = diagnose(Question(target="vllm", model=model, tp=1), host=host)
        moe = next(p for p in report.families if p.family == "moe")
        oracle = [f for f in moe.resolution.findings if f.id == "engine.oracle.moe"]
        assert oracle and all(f.status is Status.PASS for f in oracle), oracle
        assert moe.resolution.chosen == "marlin-moe" and report.ready, cc


def test_a_facts_file_of_another_install_is_not_asked_of_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--facts` of a host whose FlashInfer is another release: not asked ("the installed
    engine is not the facts' engine"); of a host without FlashInfer: asked with FlashInfer
    hidden, and the engine answers as that host's would (vLLM CUTLASS on SM100). Class 2."""
    from fp4doctor.doctor import Question, diagnose
    from fp4doctor.findings import Status
    from fp4doctor.oracle import query

    python = _venv("vllm", "0.34.0")
    base = agreement.probed(python, "vllm")
    monkeypatch.setenv(query.ENGINE_PYTHON_ENV, str(python))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(agreement.stub_driver(tmp_path)))
    monkeypatch.setenv("FP4DOCTOR_CACHE_DIR", "")
    host = agreement.host_for(base, (10, 0), True)
    versions = {**host.packages.versions, "flashinfer-python": "0.6.3"}
    other = dataclasses.replace(
        host, packages=dataclasses.replace(host.packages, versions=versions)
    )
    report = diagnose(Question(target="vllm", family="linear"), host=other)
    (skip,) = [f for f in report.families[0].resolution.findings if f.id == "engine.oracle.linear"]
    assert skip.status is Status.SKIP
    assert "is not the facts' engine (differs: flashinfer-python 0.6.3 there, " in skip.reason
    bare = agreement.host_for(base, (10, 0), False)
    report = diagnose(Question(target="vllm", family="linear"), host=bare)
    (asked,) = [f for f in report.families[0].resolution.findings if f.id == "engine.oracle.linear"]
    assert asked.status is Status.PASS and "picks cutlass" in asked.reason, asked.reason


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
