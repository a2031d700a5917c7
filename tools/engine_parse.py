"""Ask a real engine's own argument parser: run with the engine venv's python (no fp4doctor import).

    python tools/engine_parse.py vllm|sglang < REQUEST.json > ANSWER.json

REQUEST is `{"argvs": [[arg, ...], ...]}`, each the words after `vllm serve` (vLLM) or after
`python -m sglang.launch_server` (SGLang). ANSWER is `{"options": {option string: {"dest",
"nargs", "choices"}}, "parsed": [{"values": {dest: value}} | {"error": message}]}`: the options
the server parser accepts and what each command line parses to (argparse's namespace, before the
engine's own post-processing). vLLM's parser is the `serve` subcommand's
(`ServeSubcommand.subparser_init`: `make_arg_parser` over `FlexibleArgumentParser`, which also
reads `--config`, `-O` and the dotted `--x.y` forms); SGLang's is `ServerArgs.add_cli_args` over
`argparse.ArgumentParser`, with the `--config` YAML merged first as `prepare_server_args` does.
tests/test_engine.py compares fp4doctor.command's reading of the same lines with these answers.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _vllm_parser() -> tuple[argparse.ArgumentParser, list[str]]:
    # FAKE: a CUDA platform on a CPU host (DeviceConfig's "auto" asks the platform for its
    # device type while the parser is built); fp4doctor's oracle stub, on sys.path here.
    from fp4doctor.oracle.vllm_base import stub_platform

    stub_platform()
    from vllm.entrypoints.cli.serve import ServeSubcommand

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # before vllm/utils/argparse_utils.py
        from vllm.utils import FlexibleArgumentParser  # type: ignore[attr-defined,no-redef]

    top = FlexibleArgumentParser(prog="vllm")
    subparsers = top.add_subparsers(dest="subparser")
    ServeSubcommand().subparser_init(subparsers)
    return top, ["serve"]


def _sglang_parser() -> tuple[argparse.ArgumentParser, list[str]]:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return parser, []


def _serve_parser(top: argparse.ArgumentParser) -> argparse.ArgumentParser:
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices["serve"]
    return top


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return _jsonable(value.model_dump())
    return repr(value)


def _options(parser: argparse.ArgumentParser) -> dict[str, dict[str, Any]]:
    # Every option string the parser accepts (some actions register more than they show).
    out: dict[str, dict[str, Any]] = {}
    for option, action in parser._option_string_actions.items():
        nargs = action.nargs
        if nargs is None:
            nargs = 1
        out[option] = {
            "dest": action.dest,
            "nargs": nargs,
            "choices": None if action.choices is None else [str(c) for c in action.choices],
        }
    return out


def _sglang_config(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    # prepare_server_args merges a --config YAML before parsing (0.5.3rc2+; the merger moved
    # from sglang/srt/ to sglang/srt/utils/ later).
    if "--config" not in argv:
        return argv
    try:
        from sglang.srt.server_args_config_parser import ConfigArgumentMerger
    except ImportError:
        from sglang.srt.utils.server_args_config_parser import (  # type: ignore[no-redef]
            ConfigArgumentMerger,
        )
    return list(ConfigArgumentMerger(parser).merge_config_with_args(argv))


def main() -> int:
    engine = sys.argv[1]
    # The engines log to stdout (vLLM's INFO lines): the answer goes to the original stdout only.
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    request = json.load(sys.stdin)
    if engine == "vllm":
        top, head = _vllm_parser()
        serve = _serve_parser(top)
    else:
        top, head = _sglang_parser()
        serve = top
    answers: list[dict[str, Any]] = []
    for argv in request["argvs"]:
        err = io.StringIO()
        try:
            words = _sglang_config(top, argv) if engine == "sglang" else argv
            with redirect_stderr(err):
                ns = top.parse_args(head + words)
            answers.append({"values": {k: _jsonable(v) for k, v in vars(ns).items()}})
        except SystemExit:
            lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
            answers.append({"error": lines[-1] if lines else "exit"})
        except Exception as e:  # the parser's own refusal (vLLM raises ValueError for some)
            answers.append({"error": f"{type(e).__name__}: {e}"})
    sys.stdout.flush()
    json.dump({"options": _options(serve), "parsed": answers}, answer)
    answer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
