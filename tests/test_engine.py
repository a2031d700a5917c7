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
    [_M, "--hf-overrides", "not_json_text"],
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


@pytest.mark.parametrize(
    ("engine", "release"), agreement.RELEASES, ids=[f"{e}-{r}" for e, r in agreement.RELEASES]
)
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
