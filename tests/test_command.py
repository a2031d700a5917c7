"""fp4doctor.command: an engine's command line read as the release's own parser reads it.

The release data (profiles/flags/) is what tools/extract/flags.py read from the wheels;
tests/test_engine.py checks it and this reading against the real parsers of the releases it
installs. Here: every form, every field, every error, the environment's args variable, --config
files, and that every FP4-relevant flag of every covered release lands in a field.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fp4doctor import profile
from fp4doctor.command import ARGS_VARIABLES, FIELDS, CommandError, EngineCommand, Setting, parse
from fp4doctor.command.fields import HANDLERS
from fp4doctor.command.flagdata import flags_for, load

ROOT = Path(__file__).resolve().parents[1]
M = "nvidia/Llama-3.3-70B-Instruct-FP4"


def vllm(*flags: str, release: str | None = "0.34.0", **env: str) -> EngineCommand:
    return parse(["vllm", "serve", M, *flags], release=release, environ=env)


def sglang(*flags: str, release: str | None = "0.5.23", **env: str) -> EngineCommand:
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", M, *flags]
    return parse(argv, release=release, environ=env)


def values(cmd: EngineCommand) -> dict[str, Any]:
    return {k: s.value for k, s in cmd.settings.items()}


def refused(argv: list[str], release: str | None, match: str, **env: str) -> str:
    with pytest.raises(CommandError) as e:
        parse(argv, release=release, environ=env)
    message = str(e.value)
    assert "\n" not in message
    assert re.search(match, message), message
    return message


# -- forms ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "target", "model"),
    [
        (["vllm", "serve", M], "vllm", M),
        (["vllm", "serve", "--model", M], "vllm", M),
        (["vllm", "serve", f"--model={M}", "-tp", "2"], "vllm", M),
        (["/opt/venv/bin/vllm", "serve", M], "vllm", M),
        (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", M], "vllm", M),
        (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", M], "vllm", M),
        (
            ["/usr/bin/python3.12", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model", M],
            "vllm",
            M,
        ),
        (["python", "-m", "sglang.launch_server", "--model-path", M], "sglang", M),
        (["python3", "-m", "sglang.launch_server", "--model", M], "sglang", M),
        (["sglang", "serve", "--model-path", M], "sglang", M),
        (["trtllm-serve", M, "--tp_size", "2"], "trtllm", M),
        (["trtllm-serve", "serve", M], "trtllm", M),
    ],
)
def test_every_form_names_its_engine_and_model(argv: list[str], target: str, model: str) -> None:
    cmd = parse(argv)
    assert (cmd.target, cmd.model) == (target, model)
    assert cmd.argv == tuple(argv)
    assert cmd.get("model") is not None and cmd.value("model") == model


def test_one_string_is_split_as_a_shell_splits_it() -> None:
    cmd = parse([f"vllm serve {M} --hf-overrides '{{\"a\": 1}}' -tp 2"], release="0.34.0")
    assert values(cmd) == {"model": M, "hf_overrides": {"a": 1}, "tp": 2}


def test_environment_words_before_the_command_are_kept_apart() -> None:
    cmd = parse(
        [
            "env",
            "CUDA_VISIBLE_DEVICES=0,1",
            "VLLM_USE_FLASHINFER_MOE_FP4=1",
            "vllm",
            "serve",
            M,
            "-tp",
            "2",
        ],
        release="0.15.1",
    )
    assert dict(cmd.environment) == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "VLLM_USE_FLASHINFER_MOE_FP4": "1",
    }
    assert cmd.value("tp") == 2


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        ([], r"no engine command given: expected one of vllm serve MODEL"),
        (["vllm", "bench", "serve"], r"^vllm bench: fp4doctor reads .* `vllm serve`"),
        (["vllm"], r"^vllm \(none\): "),
        (["sglang", "generate"], r"^sglang generate: .*`sglang serve`"),
        (["python", "-m", "http.server"], r"^python http.server: not an engine server"),
        (["llama-server", "-m", "x.gguf"], r"^llama-server: not an engine command"),
        (["vllm serve 'unclosed"], r"cannot split the command line"),
    ],
)
def test_a_command_that_is_no_engine_server_is_refused(argv: list[str], match: str) -> None:
    refused(argv, None, match)


def test_sglang_without_model_path_is_read_and_says_so() -> None:
    cmd = parse(["python", "-m", "sglang.launch_server", "--tp", "2"], release="0.5.23")
    assert cmd.model is None and cmd.value("tp") == 2
    assert any("no --model-path given" in n for n in cmd.notes)


# -- vLLM fields ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "field", "value"),
    [
        (["-tp", "4"], "tp", 4),
        (["-tp=4"], "tp", 4),
        (["--tensor-parallel-size", "4"], "tp", 4),
        (["--tensor-parallel-size=4"], "tp", 4),
        (["--tensor_parallel_size", "4"], "tp", 4),  # FlexibleArgumentParser: _ is -
        (["--tensor-parallel", "4"], "tp", 4),  # argparse's unique prefix
        (["-pp", "2"], "pp", 2),
        (["--pipeline-parallel-size", "2"], "pp", 2),
        (["-dp", "2"], "dp", 2),
        (["--data-parallel-size=8"], "dp", 8),
        (["--enable-expert-parallel"], "expert_parallel", True),
        (["--no-enable-expert-parallel"], "expert_parallel", False),
        (["--disable-expert-parallel"], "expert_parallel", False),  # EnableDisableAction, 0.33+
        (["--linear-backend", "flashinfer_cudnn"], "linear_backend", "flashinfer_cudnn"),
        (["--linear-backend=FlashInfer-CUDNN"], "linear_backend", "flashinfer_cudnn"),
        (["--moe-backend", "cutlass"], "moe_backend", "cutlass"),
        (["--moe-backend", "flashinfer-trtllm"], "moe_backend", "flashinfer_trtllm"),
        (["--all2all-backend", "deepep_low_latency"], "all2all_backend", "deepep_low_latency"),
        (["--enforce-eager"], "enforce_eager", True),
        (["--enforce-eager"], "cuda_graphs", False),
        (["-O3"], "compilation_level", 3),
        (["-O", "3"], "compilation_level", 3),
        (["-O=0"], "compilation_level", 0),
        (["--optimization-level", "2"], "compilation_level", 2),
        (["--compilation-config", '{"mode": 3}'], "compilation_level", 3),
        (["--compilation-config.mode", "3"], "compilation_level", 3),
        (["--compilation-config", '{"cudagraph_mode": "NONE"}'], "cuda_graphs", False),
        (["--compilation-config.cudagraph_mode=FULL_AND_PIECEWISE"], "cuda_graphs", True),
        (
            ["--kernel-config", '{"enable_flashinfer_autotune": false}'],
            "kernel_config",
            {"enable_flashinfer_autotune": False},
        ),
        (["--kernel-config", '{"enable_flashinfer_autotune": false}'], "autotune", False),
        (["--kernel-config.enable_flashinfer_autotune", "false"], "autotune", False),
        (["--no-enable-flashinfer-autotune"], "autotune", False),
        (["--disable-flashinfer-autotune"], "autotune", False),
        (["--enable-flashinfer-autotune"], "autotune", True),
        (
            ["--kernel-config", '{"moe_backend": "flashinfer-cutlass"}'],
            "moe_backend",
            "flashinfer_cutlass",
        ),
        (["--dtype", "bfloat16"], "dtype", "bfloat16"),
        (["--quantization", "modelopt_fp4"], "quantization", "modelopt_fp4"),
        (["-q", "modelopt_fp4"], "quantization", "modelopt_fp4"),
        (["--max-num-batched-tokens", "16384"], "max_num_batched_tokens", 16384),
        (["--max-num-batched-tokens", "8k"], "max_num_batched_tokens", 8000),
        (["--max-num-batched-tokens", "8K"], "max_num_batched_tokens", 8192),
        (["--hf-overrides", '{"num_hidden_layers": 2}'], "hf_overrides", {"num_hidden_layers": 2}),
    ],
)
def test_vllm_flags_set_their_field(flags: list[str], field: str, value: Any) -> None:
    cmd = vllm(*flags)
    assert cmd.value(field) == value, cmd.settings
    setting = cmd.get(field)
    assert setting is not None and setting.source == "command line"
    assert setting.flag.split(" ")[0].split("=")[0] in {f.split("=")[0] for f in flags}


def test_the_setting_says_which_words_set_it() -> None:
    cmd = vllm("-tp", "4", "-O3", "--moe_backend=cutlass")
    assert cmd.get("tp") == Setting(4, "-tp 4", "command line")
    assert cmd.get("compilation_level") == Setting(3, "-O3", "command line")
    assert cmd.get("moe_backend") == Setting("cutlass", "--moe_backend=cutlass", "command line")
    assert cmd.get("tp").describe() == "set by -tp 4"  # type: ignore[union-attr]


def test_only_what_the_command_sets_is_a_setting() -> None:
    assert values(vllm()) == {"model": M}
    assert vllm().value("tp", 1) == 1
    with pytest.raises(KeyError, match="no field 'tensor_parallel_size'"):
        vllm().get("tensor_parallel_size")


@pytest.mark.parametrize(
    ("flags", "ep"),
    [
        (["--enable-expert-parallel", "-tp", "4"], 4),
        (["--enable-expert-parallel", "-tp", "4", "-dp", "2"], 8),
        (["-dp", "2", "--enable-expert-parallel"], 2),
        (["--enable-expert-parallel", "-tp", "2", "-dp", "2", "-pcp", "2"], 8),  # 0.12+
        (["--enable-expert-parallel"], 1),
    ],
)
def test_vllm_ep_size_is_tp_times_dp_with_expert_parallel(flags: list[str], ep: int) -> None:
    cmd = vllm(*flags)
    assert cmd.value("ep") == ep
    assert "--enable-expert-parallel" in cmd.get("ep").flag  # type: ignore[union-attr]


def test_vllm_without_expert_parallel_sets_no_ep() -> None:
    assert vllm("-tp", "4", "-dp", "2").get("ep") is None
    assert vllm("-tp", "4", "--no-enable-expert-parallel").get("ep") is None


def test_vllm_pcp_is_not_an_option_before_0_12() -> None:
    refused(["vllm", "serve", M, "-pcp", "2"], "0.11.2", r"unrecognized arguments: -pcp 2")


def test_vllm_backend_flag_wins_over_kernel_config_unless_auto() -> None:
    kc = '{"moe_backend": "marlin", "linear_backend": "marlin"}'
    cmd = vllm("--moe-backend", "cutlass", "--kernel-config", kc, "--linear-backend", "auto")
    assert cmd.value("moe_backend") == "cutlass"
    assert cmd.value("linear_backend") == "marlin"
    assert cmd.get("linear_backend").flag.startswith("--kernel-config")  # type: ignore[union-attr]


def test_vllm_autotune_flag_and_kernel_config_key_together_are_refused() -> None:
    refused(
        [
            "vllm",
            "serve",
            M,
            "--no-enable-flashinfer-autotune",
            "--kernel-config",
            '{"enable_flashinfer_autotune": true}',
        ],
        "0.34.0",
        r"^vllm 0.34.0: .*mutually exclusive",
    )


def test_vllm_eager_wins_over_a_cudagraph_mode() -> None:
    cmd = vllm("--compilation-config", '{"cudagraph_mode": "FULL"}', "--enforce-eager")
    assert cmd.value("cuda_graphs") is False
    assert cmd.get("cuda_graphs").flag == "--enforce-eager"  # type: ignore[union-attr]


def test_vllm_minus_o_before_0_12_is_the_compilation_level() -> None:
    for flags in (["-O3"], ["-O", "3"], ["-O=3"], ["-O.level=3"], ["-O", '{"level": 3}']):
        cmd = vllm(*flags, release="0.10.0")
        assert cmd.value("compilation_level") == 3, flags
    # the last -O / --compilation-config is the whole value (argparse), dotted keys merged
    cmd = vllm("-O", "3", "--compilation-config.cudagraph_mode", "NONE", release="0.11.0")
    assert cmd.value("compilation_level") is None and cmd.value("cuda_graphs") is False
    cmd = vllm("-O.level=3", "-O.cudagraph_mode=NONE", release="0.11.0")
    assert (cmd.value("compilation_level"), cmd.value("cuda_graphs")) == (3, False)


def test_vllm_bare_compilation_level_of_0_8() -> None:
    assert vllm("-O3", release="0.8.0").value("compilation_level") == 3
    assert vllm("--compilation-config", "2", release="0.8.0").value("compilation_level") == 2


def test_the_last_flag_wins() -> None:
    assert vllm("-tp", "2", "--tensor-parallel-size", "8").value("tp") == 8


# -- SGLang fields -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("release", "flags", "field", "value"),
    [
        ("0.5.23", ["--tp-size", "4"], "tp", 4),
        ("0.5.23", ["--tensor-parallel-size", "4"], "tp", 4),
        ("0.5.23", ["--tp", "4"], "tp", 4),  # unique prefix of --tp-size
        ("0.5.3", ["--tp-size", "4"], "tp", 4),  # dest tensor_parallel_size before 0.5.14
        ("0.5.23", ["--pp-size", "2"], "pp", 2),
        ("0.5.23", ["--dp-size", "2"], "dp", 2),
        ("0.5.3", ["--dp", "2"], "dp", 2),
        ("0.5.23", ["--ep-size", "8"], "ep", 8),
        ("0.5.23", ["--ep-size", "8"], "expert_parallel", True),
        ("0.5.23", ["--ep", "1"], "expert_parallel", False),
        ("0.5.3", ["--enable-ep-moe"], "expert_parallel", True),
        (
            "0.5.23",
            ["--fp4-gemm-backend", "flashinfer_cudnn"],
            "linear_backend",
            "flashinfer_cudnn",
        ),
        (
            "0.5.23",
            ["--moe-runner-backend", "flashinfer_cutlass"],
            "moe_backend",
            "flashinfer_cutlass",
        ),
        ("0.4.9", ["--enable-flashinfer-moe"], "moe_backend", "flashinfer_cutlass"),
        ("0.5.0rc0", ["--enable-flashinfer-cutlass-moe"], "moe_backend", "flashinfer_cutlass"),
        ("0.5.0rc0", ["--enable-flashinfer-trtllm-moe"], "moe_backend", "flashinfer_trtllm"),
        ("0.5.23", ["--moe-a2a-backend", "deepep"], "all2all_backend", "deepep"),
        ("0.5.3", ["--enable-deepep-moe"], "all2all_backend", "deepep"),
        ("0.5.23", ["--disable-cuda-graph"], "cuda_graphs", False),
        ("0.5.23", ["--cuda-graph-backend-decode", "disabled"], "cuda_graphs", False),
        ("0.5.23", ["--cuda-graph-backend-decode", "full"], "cuda_graphs", True),
        ("0.5.23", ["--disable-flashinfer-autotune"], "autotune", False),
        ("0.5.7", ["--disable-flashinfer-autotune"], "autotune", False),
        ("0.5.6", ["--enable-flashinfer-autotune"], "autotune", True),
        ("0.5.23", ["--dtype", "bfloat16"], "dtype", "bfloat16"),
        ("0.5.23", ["--quantization", "modelopt_fp4"], "quantization", "modelopt_fp4"),
        ("0.5.23", ["--chunked-prefill-size", "8192"], "chunked_prefill_size", 8192),
        ("0.5.23", ["--json-model-override-args", '{"a": 1}'], "hf_overrides", {"a": 1}),
    ],
)
def test_sglang_flags_set_their_field(
    release: str, flags: list[str], field: str, value: Any
) -> None:
    assert sglang(*flags, release=release).value(field) == value


def test_sglang_ep_moe_and_deepep_make_ep_the_tp_size() -> None:
    for switch in ("--enable-ep-moe", "--enable-deepep-moe"):
        cmd = sglang("--tp-size", "4", switch, release="0.5.3")
        assert cmd.value("ep") == 4
        assert cmd.get("ep").flag == f"{switch} --tp-size 4"  # type: ignore[union-attr]
    assert sglang("--enable-ep-moe", "--ep-size", "2", release="0.5.3").value("ep") == 2


def test_sglang_false_switches_set_nothing() -> None:
    assert values(sglang(release="0.5.23")) == {"model": M}


# -- TensorRT-LLM --------------------------------------------------------------------------------


def test_trtllm_flags_and_its_options_file(tmp_path: Path) -> None:
    extra = tmp_path / "extra.yaml"
    extra.write_text(
        yaml.safe_dump(
            {
                "moe_config": {"backend": "TRTLLM"},
                "cuda_graph_config": None,
                "enable_autotuner": False,
                "tensor_parallel_size": 8,
            }
        )
    )
    cmd = parse(
        [
            "trtllm-serve",
            M,
            "--tp_size",
            "4",
            "--ep_size=2",
            "--pp_size",
            "1",
            "--max_num_tokens",
            "8192",
            "--config",
            str(extra),
            "--trust_remote_code",
        ]
    )
    assert values(cmd) == {
        "model": M,
        "tp": 8,  # the YAML is merged over the flags (update_llm_args_with_extra_dict)
        "ep": 2,
        "pp": 1,
        "max_num_batched_tokens": 8192,
        "moe_backend": "TRTLLM",
        "cuda_graphs": False,
        "autotune": False,
    }
    assert cmd.get("moe_backend").source == f"--config {extra}"  # type: ignore[union-attr]
    assert any("TensorRT-LLM" in n and "not refused" in n for n in cmd.notes)


def test_trtllm_unknown_option_is_named_not_refused() -> None:
    cmd = parse(["trtllm-serve", M, "--some_new_option", "x", "--tp_size", "2"])
    assert cmd.value("tp") == 2
    assert any(n.startswith("--some_new_option: not known to fp4doctor") for n in cmd.notes)


# -- errors: what the release's parser refuses ---------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "release", "match"),
    [
        (
            ["vllm", "serve", M, "--linear-backend", "cutlass"],
            "0.18.0",
            r"^vllm 0.18.0: unrecognized arguments: --linear-backend cutlass "
            r"\(--linear-backend: introduced in vllm 0.22.0\)$",
        ),
        (
            ["vllm", "serve", M, "--enable-flashinfer-autotune"],
            "0.15.1",
            r"^vllm 0.15.1: unrecognized arguments: --enable-flashinfer-autotune "
            r"\(--enable-flashinfer-autotune: introduced in vllm 0.16.0\)$",
        ),
        (
            ["vllm", "serve", M, "--kernel-config", "{}"],
            "0.15.1",
            r"unrecognized arguments: --kernel-config \{\} .*introduced in vllm 0.16.0",
        ),
        (
            ["vllm", "serve", M, "--disable-expert-parallel"],
            "0.18.0",
            r"unrecognized arguments: --disable-expert-parallel .*introduced in vllm 0.33.0",
        ),
        (
            ["vllm", "serve", M, "--moe-backend", "flashinfer_b12x"],
            "0.18.0",
            r"^vllm 0.18.0: argument --moe-backend: invalid choice: 'flashinfer_b12x' "
            r"\(choose from 'aiter', 'auto', 'cutlass', ",
        ),
        (
            ["vllm", "serve", M, "--dtype", "float8"],
            "0.34.0",
            r"^vllm 0.34.0: argument --dtype: invalid choice: 'float8' \(choose from 'auto', "
            r"'bfloat16', 'float', 'float16', 'float32', 'half'\)$",
        ),
        (
            ["vllm", "serve", M, "-q", "nvfp4_typo"],
            "0.8.0",
            r"^vllm 0.8.0: argument -q: invalid choice: 'nvfp4_typo' \(choose from 'aqlm'",
        ),
        (
            ["vllm", "serve", M, "--all2all-backend", "passthrough"],
            "0.34.0",
            r"argument --all2all-backend: invalid choice: 'passthrough'",
        ),
        (
            ["vllm", "serve", M, "-tp"],
            "0.34.0",
            r"^vllm 0.34.0: argument -tp: expected one argument$",
        ),
        (["vllm", "serve", M, "-tp", "--enforce-eager"], "0.34.0", r"argument -tp: expected one"),
        (
            ["vllm", "serve", M, "-tp", "four"],
            "0.34.0",
            r"^vllm 0.34.0: argument -tp: invalid int value: 'four'$",
        ),
        (
            ["vllm", "serve", M, "--enforce-eager=yes"],
            "0.34.0",
            r"argument --enforce-eager: ignored explicit argument 'yes'",
        ),
        (
            ["vllm", "serve", M, "--enable", "x"],
            "0.34.0",
            r"ambiguous option: --enable could match",
        ),
        (
            ["vllm", "serve", M, "--kernel-config", "{not json"],
            "0.34.0",
            r"^vllm 0.34.0: argument --kernel-config: not valid JSON",
        ),
        (
            ["vllm", "serve", M, "--hf-overrides", "[1]"],
            "0.34.0",
            r"argument --hf-overrides: expected a JSON object",
        ),
        (["vllm", "serve", M, "extra-word"], "0.34.0", r"unrecognized arguments: extra-word"),
        (
            ["python", "-m", "sglang.launch_server", "--model-path", M, "--enable-ep-moe"],
            "0.5.5",
            r"^sglang 0.5.5: unrecognized arguments: --enable-ep-moe "
            r"\(--enable-ep-moe: removed in sglang 0.5.4.post1 \(last in 0.5.4\)\)$",
        ),
        (
            [
                "python",
                "-m",
                "sglang.launch_server",
                "--model-path",
                M,
                "--fp4-gemm-backend",
                "cutlass",
            ],
            "0.5.23",
            r"^sglang 0.5.23: argument --fp4-gemm-backend: invalid choice: 'cutlass' "
            r"\(choose from 'auto', 'flashinfer_cudnn', ",
        ),
        (
            [
                "python",
                "-m",
                "sglang.launch_server",
                "--model-path",
                M,
                "--disable-flashinfer-autotune",
            ],
            "0.5.6",
            r"--disable-flashinfer-autotune: introduced in sglang 0.5.7",
        ),
        (
            ["python", "-m", "sglang.launch_server", "--model-path", M, "--quantization", "fp4"],
            "0.5.23",
            r"argument --quantization: invalid choice: 'fp4'",
        ),
        (
            ["python", "-m", "sglang.launch_server", "--model-path", M, "--tp_size", "2"],
            "0.5.23",
            r"unrecognized arguments: --tp_size 2",
        ),  # plain argparse: no _ for -
        (
            ["python", "-m", "sglang.launch_server", "--model-path", M, "--config", "x.yaml"],
            "0.5.3rc0",
            r"--config: introduced in sglang 0.5.3rc2",
        ),
        (["python", "-m", "sglang.launch_server", "M"], "0.5.23", r"unrecognized arguments: M$"),
    ],
)
def test_what_the_release_refuses_is_a_one_line_usage_error(
    argv: list[str], release: str, match: str
) -> None:
    refused(argv, release, match)


def test_command_error_is_a_value_error() -> None:
    assert issubclass(CommandError, ValueError)


def test_several_unknown_flags_are_named_together() -> None:
    refused(
        ["vllm", "serve", M, "--foo", "--bar=1", "-tp", "2"],
        "0.34.0",
        r"unrecognized arguments: --foo --bar=1$",
    )


# -- the environment's args variable -------------------------------------------------------------


def test_vllm_args_variable_counts_as_set_after_the_command_line() -> None:
    # as fp4doctor env writes it: one word per flag, joined by a space (fp4doctor/emit/knobs.py)
    words = "--linear-backend=flashinfer_cudnn --moe-backend=cutlass"
    cmd = vllm("--moe-backend", "marlin", "-tp", "2", FP4DOCTOR_VLLM_ARGS=words)
    assert cmd.get("linear_backend") == Setting(
        "flashinfer_cudnn", "--linear-backend=flashinfer_cudnn", "FP4DOCTOR_VLLM_ARGS"
    )
    assert cmd.get("moe_backend") == Setting(
        "cutlass", "--moe-backend=cutlass", "FP4DOCTOR_VLLM_ARGS"
    )  # `vllm serve MODEL --moe-backend marlin $FP4DOCTOR_VLLM_ARGS`: the variable's comes last
    assert cmd.get("tp") == Setting(2, "-tp 2", "command line")
    assert cmd.get("moe_backend").describe() == (  # type: ignore[union-attr]
        "set by --moe-backend=cutlass in FP4DOCTOR_VLLM_ARGS"
    )
    assert cmd.argv == ("vllm", "serve", M, "--moe-backend", "marlin", "-tp", "2")


def test_sglang_args_variable_and_other_engines_variables_ignored() -> None:
    cmd = sglang(
        FP4DOCTOR_SGLANG_ARGS="--fp4-gemm-backend=flashinfer_cutlass",
        FP4DOCTOR_VLLM_ARGS="--moe-backend=cutlass",
    )
    assert cmd.get("linear_backend") == Setting(
        "flashinfer_cutlass", "--fp4-gemm-backend=flashinfer_cutlass", "FP4DOCTOR_SGLANG_ARGS"
    )
    assert cmd.get("moe_backend") is None
    assert values(vllm(FP4DOCTOR_VLLM_ARGS="  ")) == {"model": M}


def test_a_flag_in_the_args_variable_is_checked_like_any_other() -> None:
    refused(
        ["vllm", "serve", M],
        "0.18.0",
        r"unrecognized arguments: --linear-backend=cutlass",
        FP4DOCTOR_VLLM_ARGS="--linear-backend=cutlass",
    )


def test_args_variables_are_the_profiles_own() -> None:
    for target, variable in ARGS_VARIABLES.items():
        assert profile.load(target).engine.args_variable == variable


# -- --config FILE.yaml --------------------------------------------------------------------------


def test_vllm_config_yaml_keys_are_flags_and_the_command_line_wins(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(
        "tensor-parallel-size: 4\n"
        "enable_expert_parallel: true\n"
        "enforce-eager: false\n"
        "moe-backend: marlin\n"
        "kernel-config:\n  enable_flashinfer_autotune: false\n"
        "dtype: bfloat16\n"
    )
    cmd = vllm("--config", str(config), "--moe-backend", "cutlass")
    source = f"--config {config}"
    assert cmd.get("tp") == Setting(4, "--tensor-parallel-size 4", source)
    assert cmd.get("expert_parallel") == Setting(True, "--enable_expert_parallel", source)
    assert cmd.get("enforce_eager") == Setting(False, "--no-enforce-eager", source)
    assert cmd.get("moe_backend") == Setting("cutlass", "--moe-backend cutlass", "command line")
    assert cmd.value("autotune") is False and cmd.value("dtype") == "bfloat16"
    assert cmd.value("ep") == 4


def test_vllm_config_false_switch_without_no_form_is_left_out(tmp_path: Path) -> None:
    config = tmp_path / "c.yml"
    config.write_text("enable-flashinfer-autotune: false\ntrust-remote-code: false\n")
    cmd = vllm(f"--config={config}", release="0.18.0")
    assert cmd.value("autotune") is False  # --no-enable-flashinfer-autotune exists in 0.18


def test_vllm_config_flag_the_release_lacks_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("linear-backend: cutlass\n")
    refused(
        ["vllm", "serve", M, "--config", str(config)],
        "0.18.0",
        r"unrecognized arguments: --linear-backend cutlass",
    )


def test_sglang_config_yaml_from_0_5_3rc2(tmp_path: Path) -> None:
    config = tmp_path / "sglang.yaml"
    config.write_text(
        "tp-size: 2\ndisable-cuda-graph: true\nenable-torch-compile: false\n"
        "moe-runner-backend: flashinfer_trtllm\n"
    )
    cmd = sglang("--config", str(config), "--tp-size", "4", release="0.5.13")
    assert values(cmd) == {
        "model": M,
        "tp": 4,
        "cuda_graphs": False,
        "moe_backend": "flashinfer_trtllm",
    }
    assert cmd.get("cuda_graphs").source == f"--config {config}"  # type: ignore[union-attr]


def test_sglang_config_merger_refuses_what_it_cannot_convert(tmp_path: Path) -> None:
    """From 0.5.14 --disable-cuda-graph is a DeprecatedStoreTrueAction, which the merger of the
    releases that check (ConfigArgumentMerger.unsupported_actions) refuses in a config file."""
    config = tmp_path / "sglang.yaml"
    config.write_text("disable-cuda-graph: true\n")
    refused(
        ["sglang", "serve", "--model-path", M, "--config", str(config)],
        "0.5.23",
        r"^sglang 0.5.23: --config .*sglang.yaml: Unsupported config option "
        r"'disable_cuda_graph' with action 'DeprecatedStoreTrueAction'$",
    )
    assert sglang("--disable-cuda-graph").value("cuda_graphs") is False  # on the command line


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("missing.yaml", None, r"--config .*missing.yaml: cannot read it \(No such file"),
        ("c.json", "{}", r"--config .*c.json: the config file must be YAML \(.yaml/.yml\)$"),
        ("c.yaml", "- a\n- b\n", r"--config .*c.yaml: must hold a mapping of flags"),
        ("c.yaml", "a: [\n", r"--config .*c.yaml: not valid YAML \(line 2: "),
    ],
)
def test_a_config_file_that_cannot_be_read_is_refused(
    tmp_path: Path, name: str, text: str | None, match: str
) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    refused(["vllm", "serve", M, "--config", str(path)], "0.34.0", r"^vllm 0.34.0: " + match)
    refused(["sglang", "serve", "--model-path", M, "--config", str(path)], "0.5.23", match)


def test_two_config_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("{}\n")
    refused(
        [
            "vllm",
            "serve",
            M,
            "--config",
            str(tmp_path / "a.yaml"),
            "--config",
            str(tmp_path / "a.yaml"),
        ],
        "0.34.0",
        r"more than one --config",
    )


# -- releases ------------------------------------------------------------------------------------


def test_no_release_reads_with_the_newest_and_says_so() -> None:
    cmd = vllm("-tp", "2", release=None)
    newest = load("vllm").releases[-1]  # type: ignore[union-attr]
    assert cmd.release == newest == profile.newest_known()["vllm"]
    assert any("release not given" in n and newest in n for n in cmd.notes)


def test_a_release_outside_the_data_reads_with_the_nearest_older_one() -> None:
    cmd = vllm(release="0.19.2")
    assert cmd.release == "0.19.1"
    assert any("0.19.2 is not in the flag data" in n for n in cmd.notes)
    newer = vllm(release="9.0.0")
    assert newer.release == "0.34.0" and any("unverified" in n for n in newer.notes)
    assert vllm(release="0.18.0+cu129").release == "0.18.0"
    assert vllm(release="0.18.0+cu129").notes == ()
    assert vllm(release="0.1.0").release == "0.8.0"
    assert sglang(release="0.5.10rc1").release == "0.5.10rc0"


def test_a_release_not_read_completely_names_unknown_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """A release whose full option list the extractor could not read (none today: every
    covered release is complete): an unknown flag is a note, not an error."""
    import fp4doctor.command.flagdata as flagdata

    data = load("vllm")
    assert data is not None
    monkeypatch.setattr(
        flagdata,
        "load",
        lambda target: flagdata.FlagData(
            data.target, data.releases, frozenset(), data.ranges, data.source
        ),
    )
    cmd = vllm("--brand-new-flag", "7", "-tp", "2")
    assert cmd.value("tp") == 2
    assert any(
        n.startswith("--brand-new-flag: not known to fp4doctor for vllm 0.34.0") for n in cmd.notes
    )
    assert any("full option list could not be read" in n for n in cmd.notes)


# -- the release data ----------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["vllm", "sglang"])
def test_flag_data_covers_every_release_the_profiles_cover(target: str) -> None:
    data = load(target)
    assert data is not None
    covers = json.loads((ROOT / "tools/extract/data" / f"{target}.json").read_text())["covers"]
    assert list(data.releases) == covers
    assert data.complete == frozenset(covers)
    assert data.releases[-1] == profile.newest_known()[target]
    raw = json.loads((ROOT / "profiles/flags" / f"{target}.json").read_text())
    assert raw["extracted_by"] == "tools/extract/flags.py" and "wheels" in raw["source"]


# FP4-relevant option names: the parallel sizes, the backends of both families and the
# all-to-all, eager/compilation/CUDA graphs, the kernel config and autotune switches, dtype,
# quantization and the batch sizes the FP4 kernels are tuned for.
FP4_RELEVANT = re.compile(
    r"^(-tp|-pp|-dp|-pcp|-O|-q|--dtype|--quantization|--model|--model-path|"
    r"--(tensor|pipeline|data|expert|prefill-context)-parallel-size|--(tp|pp|dp|ep)(-size)?|"
    r"--(enable|disable|no-enable)-expert-parallel|--linear-backend|--moe-backend|"
    r"--fp4-gemm-backend|--moe-runner-backend|--moe-a2a-backend|--all2all-backend|"
    r"--enforce-eager|--no-enforce-eager|--optimization-level|--compilation-config|"
    r"--kernel-config|--(no-|enable-|disable-)*flashinfer-autotune|--disable-cuda-graph|"
    r"--cuda-graph-backend-decode|--enable-(ep|deepep|flashinfer|flashinfer-cutlass|"
    r"flashinfer-trtllm)-moe|--max-num-batched-tokens|--chunked-prefill-size|--hf-overrides|"
    r"--json-model-override-args)$"
)
# Matched by the pattern but not a field, and why.
NOT_FIELDS = {
    ("vllm", "model"): "MODEL is the model field (read apart from the handlers' table)",
}


def _fp4_options(target: str) -> list[tuple[str, str, str, Any]]:
    data = load(target)
    assert data is not None
    out = []
    for name, spans in data.ranges.items():
        if FP4_RELEVANT.match(name):
            for first, last, spec in spans:
                out.append((name, first, last, spec))
    return out


@pytest.mark.parametrize("target", ["vllm", "sglang"])
def test_every_fp4_relevant_flag_of_every_release_maps_to_a_field(target: str) -> None:
    options = _fp4_options(target)
    assert len({o[0] for o in options}) >= (25 if target == "vllm" else 20)
    unmapped = sorted(
        {
            f"{name} ({first}-{last}): dest {spec['dest']}"
            for name, first, last, spec in options
            if spec["dest"] not in HANDLERS[target] and (target, spec["dest"]) not in NOT_FIELDS
        }
    )
    assert not unmapped, unmapped


def _sample(spec: Any) -> list[str]:
    if spec["nargs"] == 0:
        return []
    if spec.get("choices"):
        return [next(c for c in spec["choices"] if c not in ("", "None"))]
    dest = spec["dest"]
    if "config" in dest or "overrides" in dest or "override_args" in dest:
        return ['{"mode": 3}'] if "compilation" in dest else ["{}"]
    if dest in ("dtype", "quantization"):
        return ["auto"]
    if dest in ("model", "model_path"):
        return ["some/model"]
    if dest == "cuda_graph_backend_decode":
        return ["disabled"]
    return ["2"]


@pytest.mark.parametrize("target", ["vllm", "sglang"])
def test_every_fp4_relevant_flag_parses_to_a_setting_in_each_of_its_releases(target: str) -> None:
    """Each FP4-relevant option, at the first and the last release of each of its ranges, with
    a value the release accepts: parse() sets a field from it, named by that flag (or refuses
    nothing). A false switch (--no-x, --disable-x of an enable) may set False or nothing."""
    missing = []
    for name, first, last, spec in _fp4_options(target):
        for release in dict.fromkeys((first, last)):
            head = (
                ["vllm", "serve", M]
                if target == "vllm"
                else ["python", "-m", "sglang.launch_server"]
            )
            if name in ("--model", "--model-path"):
                argv = (
                    [*head[:2], name, "some/model"]
                    if target == "vllm"
                    else [*head, name, "some/model"]
                )
            else:
                argv = [*head, *([] if target == "vllm" else ["--model-path", M])]
                argv += [name, *_sample(spec)]
            if spec["dest"] == "prefill_context_parallel_size":
                argv.append("--enable-expert-parallel")  # PCP counts only in the EP size
            cmd = parse(argv, release=release)
            touched = [
                k
                for k, s in cmd.settings.items()
                if name in s.flag.split() or s.flag.startswith(name)
            ]
            if not touched and spec.get("const", True) is not False:
                missing.append(f"{name} in {target} {release}")
    assert not missing, missing


@pytest.mark.parametrize(
    ("target", "option"),
    [
        ("vllm", "--linear-backend"),
        ("vllm", "--moe-backend"),
        ("vllm", "--all2all-backend"),
        ("vllm", "--dtype"),
        ("sglang", "--fp4-gemm-backend"),
        ("sglang", "--moe-runner-backend"),
        ("sglang", "--moe-a2a-backend"),
        ("sglang", "--dtype"),
        ("sglang", "--quantization"),
    ],
)
def test_every_choice_of_every_release_is_accepted_as_written(target: str, option: str) -> None:
    data = load(target)
    assert data is not None and data.ranges[option]
    for first, last, spec in data.ranges[option]:
        for release in (first, last):
            flags = flags_for(target, release)
            assert flags is not None and flags.options[option].choices == tuple(spec["choices"])
            for choice in spec["choices"]:
                cmd = (vllm if target == "vllm" else sglang)(option, choice, release=release)
                field = {
                    "--linear-backend": "linear_backend",
                    "--moe-backend": "moe_backend",
                    "--all2all-backend": "all2all_backend",
                    "--dtype": "dtype",
                    "--fp4-gemm-backend": "linear_backend",
                    "--moe-runner-backend": "moe_backend",
                    "--moe-a2a-backend": "all2all_backend",
                    "--quantization": "quantization",
                }[option]
                assert cmd.value(field) == choice


def test_fields_are_documented_once() -> None:
    import fp4doctor.command as command

    doc = command.__doc__ or ""
    for name in FIELDS:
        assert re.search(rf"^- .*\b{name}\b.*\(", doc, re.M), name
    docs = (ROOT / "docs" / "command-line.md").read_text()
    for name in FIELDS:
        assert f"`{name}`" in docs, name


def test_parsing_imports_no_engine_nor_torch() -> None:
    code = (
        "import sys; from fp4doctor.command import parse; "
        "parse(['vllm', 'serve', 'm', '-tp', '2'], release='0.34.0'); "
        "parse(['python', '-m', 'sglang.launch_server', '--model-path', 'm']); "
        "bad = [m for m in ('torch', 'vllm', 'sglang', 'fp4doctor.profile', 'fp4doctor.doctor') "
        "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
