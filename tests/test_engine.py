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
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

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
    from fp4doctor.selection.engine import family_pick

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


# -- the command line: fp4doctor.command against the engine's own parser ------------------------

_M = "nvidia/Llama-3.3-70B-Instruct-FP4"
# Words after `vllm serve`: forms, every FP4 field, and lines a release refuses. "{config}" is a
# YAML file written by the test.
_VLLM_LINES = [
    [_M],
    ["--model", _M, "-tp", "2"],
    [_M, "-tp", "4", "-dp", "2", "--enable-expert-parallel"],
    [_M, "--tensor-parallel-size=2", "--pipeline-parallel-size", "2"],
    [_M, "--tensor_parallel_size", "2"],
    [_M, "--tensor-parallel", "2"],
    [_M, "--moe-backend", "flashinfer-cutlass"],
    [_M, "--moe-backend", "CUTLASS", "--linear-backend", "flashinfer_cudnn"],
    [_M, "--linear-backend", "flashinfer_b12x"],
    [_M, "--moe-backend", "flashinfer_b12x"],
    [_M, "--all2all-backend", "deepep_low_latency"],
    [_M, "--all2all-backend", "passthrough"],
    [_M, "--enforce-eager", "--dtype", "bfloat16"],
    [_M, "--dtype", "float8"],
    [_M, "-q", "modelopt_fp4", "--max-num-batched-tokens", "8k"],
    [_M, "-O3"],
    [_M, "-O", "0"],
    [_M, "--compilation-config", '{"cudagraph_mode": "NONE"}'],
    [_M, "--compilation-config.cudagraph_mode", "NONE"],
    [_M, "--compilation-config", '{"mode": 3}'],
    [_M, "--kernel-config", '{"enable_flashinfer_autotune": false, "moe_backend": "marlin"}'],
    [_M, "--kernel-config.enable_flashinfer_autotune", "false"],
    [_M, "--no-enable-flashinfer-autotune"],
    [_M, "--disable-flashinfer-autotune"],
    [_M, "--disable-expert-parallel", "-tp", "2"],
    [_M, "--no-enable-expert-parallel"],
    [_M, "--hf-overrides", '{"num_hidden_layers": 2}'],
    [_M, "--config", "{config}", "--moe-backend", "cutlass"],
    [_M, "--no-such-flag"],
    [_M, "-tp"],
    [_M, "-tp", "two"],
    [_M, "--enforce-eager=1"],
]
_VLLM_CONFIG = (
    "tensor-parallel-size: 4\nenable-expert-parallel: true\nenforce_eager: false\n"
    "moe-backend: marlin\ndtype: half\n"
)
_SGLANG_LINES = [
    ["--model-path", _M],
    ["--model", _M, "--tp-size", "4", "--dp-size", "2", "--ep-size", "4"],
    ["--model-path", _M, "--tp", "4"],
    ["--model-path", _M, "--tensor-parallel-size", "2", "--pp-size", "2"],
    ["--model-path", _M, "--fp4-gemm-backend", "flashinfer_cudnn"],
    ["--model-path", _M, "--fp4-gemm-backend", "cutlass"],
    [
        "--model-path",
        _M,
        "--moe-runner-backend",
        "flashinfer_cutlass",
        "--moe-a2a-backend",
        "deepep",
    ],
    ["--model-path", _M, "--moe-runner-backend", "FLASHINFER_CUTLASS"],
    ["--model-path", _M, "--disable-cuda-graph"],
    ["--model-path", _M, "--cuda-graph-backend-decode", "disabled"],
    [
        "--model-path",
        _M,
        "--disable-flashinfer-autotune",
        "--dtype",
        "bfloat16",
        "--quantization",
        "modelopt_fp4",
    ],
    [
        "--model-path",
        _M,
        "--chunked-prefill-size",
        "4096",
        "--json-model-override-args",
        '{"a": 1}',
    ],
    ["--model-path", _M, "--enable-ep-moe"],
    ["--model-path", _M, "--tp_size", "2"],
    ["--model-path", _M, "--quantization", "fp4"],
    ["--model-path", _M, "--dtype", "float8"],
    ["--model-path", _M, "--config", "{config}", "--tp-size", "8"],
    ["--model-path", _M, "--ep-size"],
    ["--model-path", _M, "--config", "{config2}"],
]
_SGLANG_CONFIG = "tp-size: 2\ndp-size: 2\nmoe-runner-backend: flashinfer_trtllm\n"
# --disable-cuda-graph is a DeprecatedStoreTrueAction from 0.5.14: the merger refuses it.
_SGLANG_CONFIG2 = "disable-cuda-graph: true\n"


def _real_parser(engine: str, release: str, tmp: Path, lines: list[list[str]]) -> dict[str, Any]:
    python = _venv(engine, release)
    env = agreement.worker_env(python, agreement.stub_driver(tmp))
    done = subprocess.run(
        [str(python), str(Path(agreement.ROOT) / "tools" / "engine_parse.py"), engine],
        input=json.dumps({"argvs": lines}), capture_output=True, text=True, env=env,
        check=False, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def _no_graphs(mode: Any) -> bool:
    """CUDAGraphMode.NONE as the namespace holds it ("NONE", 0 or the enum's repr)."""
    text = str(mode).upper()
    return text in ("NONE", "0") or ".NONE:" in text or text.endswith(".NONE")


def _vllm_expected(ns: dict[str, Any]) -> dict[str, Any]:
    """The fields as vLLM's parsed namespace holds them (EngineArgs' own names)."""
    cc = ns.get("compilation_config") or {}
    kc = ns.get("kernel_config") or {}
    level = next((cc[k] for k in ("mode", "level") if cc.get(k) is not None), None)
    own = ns.get("enable_flashinfer_autotune")
    tp, dp = ns["tensor_parallel_size"], ns.get("data_parallel_size", 1)
    pcp = ns.get("prefill_context_parallel_size") or 1
    return {
        "model": ns.get("model_tag") or ns.get("model"),
        "tp": tp,
        "pp": ns["pipeline_parallel_size"],
        "dp": dp,
        "expert_parallel": ns["enable_expert_parallel"],
        "ep": tp * dp * pcp if ns["enable_expert_parallel"] else None,
        "linear_backend": ns.get("linear_backend")
        if ns.get("linear_backend") not in (None, "auto") else kc.get("linear_backend"),
        "moe_backend": ns.get("moe_backend")
        if ns.get("moe_backend") not in (None, "auto") else kc.get("moe_backend"),
        "all2all_backend": ns.get("all2all_backend"),
        "enforce_eager": ns["enforce_eager"],
        "compilation_level": level if level is not None else ns.get("optimization_level"),
        "cuda_graphs": False if ns["enforce_eager"] else (
            None if cc.get("cudagraph_mode") is None else not _no_graphs(cc["cudagraph_mode"])),
        "autotune": own if own is not None else kc.get("enable_flashinfer_autotune"),
        "dtype": ns["dtype"],
        "quantization": ns["quantization"],
        "max_num_batched_tokens": ns["max_num_batched_tokens"],
        "hf_overrides": ns.get("hf_overrides"),
    }  # fmt: skip


def _sglang_expected(ns: dict[str, Any]) -> dict[str, Any]:
    """The fields as SGLang's raw argparse namespace holds them (before ServerArgs)."""

    def first(*names: str) -> Any:
        return next((ns[n] for n in names if n in ns), None)

    ep = first("ep_size", "expert_parallel_size")
    decode = ns.get("cuda_graph_backend_decode")
    overrides = ns.get("json_model_override_args")
    return {
        "model": ns.get("model_path"),
        "tp": first("tp_size", "tensor_parallel_size"),
        "pp": first("pp_size", "pipeline_parallel_size"),
        "dp": first("dp_size", "data_parallel_size"),
        "ep": ep,
        "expert_parallel": ep > 1 if isinstance(ep, int) else None,
        "linear_backend": ns.get("fp4_gemm_runner_backend"),
        "moe_backend": ns.get("moe_runner_backend"),
        "all2all_backend": ns.get("moe_a2a_backend"),
        "cuda_graphs": False if ns.get("disable_cuda_graph") else (
            None if decode is None else decode != "disabled"),
        "autotune": False if ns.get("disable_flashinfer_autotune") else None,
        "dtype": ns.get("dtype"),
        "quantization": ns.get("quantization"),
        "chunked_prefill_size": ns.get("chunked_prefill_size"),
        "hf_overrides": json.loads(overrides) if overrides else None,
    }  # fmt: skip


def _same(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return all(_same(v, theirs.get(k)) for k, v in ours.items())
    return str(ours).lower() == str(theirs).lower()


@pytest.mark.parametrize(("engine", "release"), agreement.RELEASES, ids="-".join)
def test_command_line_reads_as_the_engine_parses_it(
    tmp_path: Path, engine: str, release: str
) -> None:
    """fp4doctor.command and profiles/flags/ against the release's own parser (vLLM: the `vllm
    serve` subparser over FlexibleArgumentParser; SGLang: ServerArgs.add_cli_args with the
    --config merge of prepare_server_args), through tools/engine_parse.py in its venv:
    - the options the release accepts: the same option strings, dests and word counts, and the
      FP4 flags' choices;
    - each command line: refused by both or by neither; when read, every field fp4doctor sets
      has the engine's value, and every field it leaves unset keeps the engine's default."""
    from fp4doctor.command import CommandError, parse
    from fp4doctor.command.flagdata import flags_for

    files = {"{config}": tmp_path / "serve.yaml", "{config2}": tmp_path / "serve2.yaml"}
    files["{config}"].write_text(_VLLM_CONFIG if engine == "vllm" else _SGLANG_CONFIG)
    files["{config2}"].write_text(_SGLANG_CONFIG2)
    lines = [[str(files[w]) if w in files else w for w in line]
             for line in (_VLLM_LINES if engine == "vllm" else _SGLANG_LINES)]  # fmt: skip
    real = _real_parser(engine, release, tmp_path, lines)

    flags = flags_for(engine, release)
    assert flags is not None and flags.release == release and flags.complete
    ours = {name: o for name, o in flags.options.items()}
    assert sorted(ours) == sorted(real["options"])
    wrong = []
    for name, theirs in real["options"].items():
        mine = ours[name]
        if (mine.dest, str(mine.nargs)) != (theirs["dest"], str(theirs["nargs"])):
            wrong.append(f"{name}: ours {mine.dest} {mine.nargs}, theirs {theirs}")
        if mine.choices is not None:
            choices = sorted(c for c in theirs["choices"] or [] if c != "None")
            if list(mine.choices) != choices:
                wrong.append(f"{name}: choices ours {mine.choices}, theirs {choices}")
    assert not wrong, "\n".join(wrong)

    expected_of = _vllm_expected if engine == "vllm" else _sglang_expected
    head = ["vllm", "serve"] if engine == "vllm" else ["python", "-m", "sglang.launch_server"]
    baseline = expected_of(real["parsed"][0]["values"])
    problems = []
    for line, answer in zip(lines, real["parsed"], strict=True):
        try:
            cmd = parse([*head, *line], release=release)
        except CommandError as e:
            if "error" not in answer:
                problems.append(f"{line}: we refuse ({e}), the engine reads it")
            continue
        if "error" in answer:
            problems.append(f"{line}: the engine refuses ({answer['error']}), we read it")
            continue
        theirs = expected_of(answer["values"])
        for field, value in theirs.items():
            setting = cmd.get(field)
            if setting is not None and not _same(setting.value, value):
                problems.append(f"{line}: {field} ours {setting.value!r}, engine {value!r}")
            elif setting is None and not _same(value, baseline[field]):
                problems.append(f"{line}: {field} unset by us, engine {value!r}")
    assert not problems, "\n".join(problems)


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
