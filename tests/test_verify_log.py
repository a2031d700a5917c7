"""verify-log as users feed it: files, stdin, docker/kubectl output, prefixes, interleaved
ranks, a traceback alone, hostile files (FIFO, /dev/zero, binaries, megabyte words), and the
exit codes: never 0 for what was not verified."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fp4doctor.logs import failures, layers, lines, signatures, source
from fp4doctor.logs.reading import Reading, read_lines, read_text
from fp4doctor.oracle import startup_log

try:
    import re._parser as sre  # type: ignore[import-not-found]
except ImportError:  # Python 3.10
    import sre_parse as sre  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
HOSTS = ROOT / "tests" / "fixtures" / "hosts"
LINEAR = "Using MarlinNvFp4LinearKernel for NVFP4 GEMM"


def run(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FP4DOCTOR_CACHE_DIR": ""}
    return subprocess.run(
        [sys.executable, "-m", "fp4doctor", "verify-log", *args, "--no-engine"],
        capture_output=True,
        text=stdin is None,
        input=stdin,
        env=env,
        timeout=300,
    )


def verify(tmp_path: Path, text: str | bytes, *args: str) -> subprocess.CompletedProcess[str]:
    log = tmp_path / "server.log"
    if isinstance(text, bytes):
        log.write_bytes(text)
    else:
        log.write_text(text)
    return run([str(log), "--facts", str(HOSTS / "h200.json"), "--engine-version", "0.33.0", *args])


# --- prefixes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "text", "source_"),
    [
        ("2026-01-05T10:00:00.123456789Z INFO 01-05 10:00:00 [x.py:1] hi", "hi", ""),
        ("(EngineCore pid=12) INFO 01-05 10:00:00 [x.py:1] hi", "hi", "EngineCore pid=12"),
        ("(EngineCore_DP0 pid=7) hi", "hi", "EngineCore_DP0 pid=7"),
        ("(VllmWorker TP0 pid=13) hi", "hi", "VllmWorker TP0 pid=13"),
        ("(RayWorkerWrapper pid=9, ip=10.0.0.2) hi", "hi", "RayWorkerWrapper pid=9"),
        ("[TP0] hi", "hi", "TP0"),
        ("[2026-01-01 00:00:00 TP0] hi", "hi", "TP0"),
        ("[2026-01-01 00:00:00 DP0 TP1 EP1] hi", "hi", "DP0 TP1 EP1"),
        ("[2026-01-01 00:00:00] hi", "hi", ""),
        ("[rank3]: RuntimeError: x", "RuntimeError: x", "rank3"),
        ("[pod/vllm-0/server] 2026-01-05T10:00:00Z hi", "hi", "pod/vllm-0/server"),
        ("\x1b[32mINFO\x1b[0m 01-05 10:00:00 [x.py:1] hi", "hi", ""),
        ("INFO 01-21 11:04:55 llm_engine.py:174] hi", "hi", ""),
        ("progress 10%\rprogress 100%\r", "progress 10% progress 100%", ""),
    ],
)
def test_prefixes_come_off(raw: str, text: str, source_: str) -> None:
    line = lines.parse(1, raw)
    assert (line.text, line.source) == (text, source_)


def test_the_level_is_kept() -> None:
    warned = lines.parse(1, "(EngineCore pid=1) WARNING 01-05 10:00:00 [x.py:1] w")
    assert warned.level == "WARNING"
    assert lines.parse(1, "[2026-01-01 00:00:00 TP0] w").level is None


# --- errors -------------------------------------------------------------------------------

_W0 = "(VllmWorker TP0 pid=13) ERROR 01-05 10:00:01 [core.py:700] "
_W1 = "(VllmWorker TP1 pid=14) ERROR 01-05 10:00:01 [core.py:700] "
_SITE = "/v/site-packages/vllm/model_executor/layers"
INTERLEAVED = (
    f"{_W0}Traceback (most recent call last):\n"
    f"{_W1}Traceback (most recent call last):\n"
    f'{_W0}  File "{_SITE}/fused_moe/cutlass_moe.py", line 120, in apply\n'
    f'{_W1}  File "{_SITE}/quantization/modelopt.py", line 9, in apply\n'
    f"{_W0}    assert x.is_contiguous()\n"
    f'{_W0}  File "/v/site-packages/torch/nn/modules/module.py", line 12, in _call\n'
    f"{_W1}ValueError: rank one's own error\n"
    f"{_W0}RuntimeError: CUDA error: an illegal memory access was encountered\n"
)


def test_interleaved_ranks_keep_their_own_frames() -> None:
    found = read_text(INTERLEAVED).failures
    assert [(f.cause, str(f.frame), f.first.number) for f in found] == [
        ("exception", "vllm/model_executor/layers/quantization/modelopt.py:9 in apply", 7),
        ("illegal_address", "vllm/model_executor/layers/fused_moe/cutlass_moe.py:120 in apply", 8),
    ]  # the quoted `assert` source line is no error of its own


def test_one_finding_per_cause_with_a_count() -> None:
    text = (
        "".join(
            f"[2026-01-01 00:00:00 TP{r}] RuntimeError: CUDA error: misaligned address 0x{r:x}0\n"
            for r in range(8)
        )
        * 100
    )
    (f,) = read_text(text).failures
    assert f.count == 800 and len(f.sources) == 8


def test_a_traceback_alone_exits_1_quoting_the_line_and_the_fp4_frame(tmp_path: Path) -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/site-packages/sglang/srt/server_args.py", line 10, in x\n'
        '  File "/usr/lib/python3/site-packages/flashinfer/fused_moe/core.py", line 77, in run\n'
        "    raise KeyError(k)\n"
        '  File "/usr/lib/python3/site-packages/torch/_ops.py", line 5, in __call__\n'
        "KeyError: 'w13_weight_scale_2'\n"
    )
    done = verify(tmp_path, text)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "log line 6: \"KeyError: 'w13_weight_scale_2'\"" in done.stdout
    assert "at flashinfer/fused_moe/core.py:77 in run" in done.stdout


@pytest.mark.parametrize(
    "line",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "unhandled cuda error",
        "/tmp/x.cu:77: void k(): block: [0,0,0], thread: [0,0,0] Assertion `idx < n` failed.",
        "AssertionError",
        "terminate called after throwing an instance of 'c10::Error'",
        "Fatal Python error: Segmentation fault",
        "ERROR 01-05 10:00:01 [core.py:700] EngineCore failed to start.",
        "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.",
    ],
)
def test_every_error_is_flagged_even_when_unknown(line: str) -> None:
    (f,) = read_text(f"INFO 01-05 10:00:00 [a.py:1] starting\n{line}\n").failures
    assert f.first.number == 2


def test_warnings_and_info_are_no_errors() -> None:
    text = (
        "WARNING 01-05 10:00:00 [a.py:1] The error rate of the tokenizer may be higher\n"
        "INFO 01-05 10:00:00 [a.py:1] Exception handling is enabled for the API server\n"
    )
    assert read_text(text).failures == []


# --- never 0 for what was not verified ---------------------------------------------------


def test_an_empty_log_is_no_verdict(tmp_path: Path) -> None:
    done = verify(tmp_path, "")
    assert done.returncode == 3 and "the log is empty" in done.stdout


@pytest.mark.parametrize("binary", ["/usr/bin/dash", sys.executable])
def test_a_binary_is_no_verdict(binary: str) -> None:
    if not Path(binary).is_file():
        pytest.skip(f"{binary} is not on this host")
    done = run([binary, "--facts", str(HOSTS / "h200.json")])
    assert done.returncode == 3, done.stdout + done.stderr
    assert "not a text log" in done.stdout or "name no NVFP4 kernel" in done.stdout


def test_a_warning_level_vllm_log_is_no_verdict_and_says_what_to_set(tmp_path: Path) -> None:
    text = (
        "(APIServer pid=1) WARNING 01-05 10:00:00 [arg_utils.py:1] --max-num-seqs is large\n"
        "(EngineCore pid=2) WARNING 01-05 10:00:09 [x.py:1] Not enough SMs to use max_autotune\n"
    )
    done = verify(tmp_path, text)
    assert done.returncode == 3
    assert "VLLM_LOGGING_LEVEL=INFO" in done.stdout


def test_another_programs_log_is_no_verdict_and_names_the_log_levels(tmp_path: Path) -> None:
    done = verify(tmp_path, "hello\nworld\n")
    assert done.returncode == 3
    assert "VLLM_LOGGING_LEVEL" in done.stdout and "--log-level" in done.stdout


def test_a_kernel_line_that_agrees_exits_0(tmp_path: Path) -> None:
    done = verify(tmp_path, f"(EngineCore pid=1) INFO 01-05 10:00:00 [a.py:1] {LINEAR}\n")
    assert done.returncode == 0, done.stdout + done.stderr


# --- inputs as users have them -----------------------------------------------------------


def test_stdin_is_read_with_a_dash() -> None:
    text = f"2026-01-05T10:00:00Z (EngineCore pid=1) INFO 01-05 10:00:00 [a.py:1] {LINEAR}\n"
    done = run(["-", "--facts", str(HOSTS / "h200.json"), "--engine-version", "0.33.0"],
               stdin=text.encode())  # fmt: skip
    assert done.returncode == 0, done.stdout


def test_a_fifo_and_dev_zero_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        done = run([path])
        assert done.returncode == 2, done.stderr
        assert "not a regular file" in done.stderr and "Traceback" not in done.stderr


def test_carriage_returns_do_not_shift_line_numbers() -> None:
    text = "Loading 10%\rLoading 50%\rLoading 100%\nRuntimeError: CUDA error: x\n"
    (f,) = read_text(text).failures
    assert f.first.number == 2


def test_a_long_line_is_read_in_part_and_counted(tmp_path: Path) -> None:
    text = "x" * (source.LINE_CAP * 3) + "\nRuntimeError: CUDA error: boom\n"
    done = verify(tmp_path, text)
    assert done.returncode == 1 and "log line 2" in done.stdout
    assert "1 lines longer than 64 KiB were read in part" in done.stderr


def test_the_line_count_is_capped(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_text("INFO 01-05 10:00:00 [a.py:1] x\n" * 50)
    reading = Reading()
    fd = source.open_log(str(log))
    try:
        read_lines(source.lines(fd, reading.tally, max_lines=10), reading)
    finally:
        os.close(fd)
    assert reading.tally.stopped and reading.tally.lines == 10


def test_a_line_split_across_reads_is_one_line(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"a" * (300 * 1024) + b" tail\nsecond\n")
    tally = source.Tally()
    fd = source.open_log(str(log))
    try:
        got = list(source.lines(fd, tally, cap=1024 * 1024))
    finally:
        os.close(fd)
    assert [(n, len(b)) for n, b in got] == [(1, 300 * 1024 + 5), (2, 6)]


# --- every pattern over input is linear ----------------------------------------------------

MEGABYTE = 1024 * 1024


def _patterns() -> list[re.Pattern[str]]:
    import fp4doctor.logs.failures as fm
    import fp4doctor.logs.layers as ym
    import fp4doctor.logs.lines as lm
    import fp4doctor.logs.reading as rm

    found = [v for m in (fm, lm, rm, ym, startup_log) for v in vars(m).values()
             if isinstance(v, re.Pattern)]  # fmt: skip
    found += [p for m in (startup_log._VLLM_LINEAR, startup_log._VLLM_MOE) for p in m
              if isinstance(p, re.Pattern)]  # fmt: skip
    found += [g[1] for g in rm._VLLM_VERSION]
    found += [m.pattern for s in signatures.shipped() for m in s.matchers if m.pattern]
    return found


def _unbounded(parsed: object) -> bool:
    for op, av in parsed:  # type: ignore[attr-defined]
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and av[1] == sre.MAXREPEAT:
            return True
        for sub in av if isinstance(av, (tuple, list)) else ():
            if isinstance(sub, sre.SubPattern) and _unbounded(sub):
                return True
            if isinstance(sub, list) and any(isinstance(x, sre.SubPattern) and _unbounded(x)
                                             for x in sub):  # fmt: skip
                return True
    return False


def test_no_pattern_over_log_text_repeats_without_bound() -> None:
    pats = _patterns()
    assert len(pats) > 10
    bad = [p.pattern for p in pats if _unbounded(sre.parse(p.pattern))]
    assert bad == []


@pytest.mark.parametrize(
    "word",
    [
        "a" * MEGABYTE,
        "f0" * (MEGABYTE // 2),
        "1" * MEGABYTE,
        "(" * MEGABYTE,
        "[" * MEGABYTE,
        " " * MEGABYTE + "x",
        "Using " * (MEGABYTE // 6),
        "a" * MEGABYTE + " NvFp4 MoE backend for NVFP4 GEMM server_args libcudart.so",
        "File " + '"' * MEGABYTE,
    ],
    ids=["letters", "hex", "digits", "parens", "brackets", "spaces", "using", "guards", "quotes"],
)
def test_a_megabyte_word_goes_through_every_pattern(word: str) -> None:
    # Every compiled pattern searched and matched over the word, then the whole reader: a
    # quadratic pattern would take hours here (the 0.2 reader took 41 s on 100 KB).
    for p in _patterns():
        p.search(word)
        p.match(word)
    for prefix in ("", "Traceback (most recent call last):\n", "(EngineCore pid=1) ERROR "):
        reading = read_text(prefix + word + "\n" + word, signatures.shipped())
        assert reading.text_lines >= 1
    tracker = failures.Tracker()
    tracker.classify(lines.Line(1, word, "", None))
    tree = layers.Tree(1)
    tree.feed(word, 1)
    tree = layers.Tree(1)
    tree.feed("  (qkv_proj): QKVParallelLinear(quant=" + word, 1)


def test_a_mostly_binary_file_is_no_verdict_whatever_its_text_lines_say(tmp_path: Path) -> None:
    blob = b"".join(b"\x7fELF\0\x02\x01" + bytes([i % 256]) + b"\n" for i in range(50))
    done = verify(tmp_path, blob + b"Segmentation fault\n")
    assert done.returncode == 3 and "not a text log" in done.stdout


def test_a_kernel_line_repeated_is_kept_once() -> None:
    reading = read_text(f"INFO 01-05 10:00:00 [a.py:1] {LINEAR}\n" * 1000)
    assert len(reading.ran) == 1


def test_the_module_tree_is_capped() -> None:
    tree = layers.Tree(1)
    tree.feed("M()(", 1)
    for i in range(layers.MAX_MODULES + 5):
        tree.feed(f"  (q{i}): QKVParallelLinear(quant=X, in_features=1)", i)
    assert len(tree.modules) == layers.MAX_MODULES and tree.done
