"""`--model` against checkpoints laid out by an attacker (a corpus generated in tmp_path).

Each case runs the real command line, `check --facts B200 --no-smoke --model DIR`, in a child
process under an audit hook that records every file opened (tests/audited.py). Each must end
in exit 2 with one line on stderr and nothing on stdout, having opened a bounded number of
files (the work is counted, not timed: a wall-clock budget once failed on a busy machine; a
hang still fails at `HANG_GUARD_S`, a guard no correct run comes near), and without opening
any file outside the model directory: a directory `outside/` beside it holds a file that
begins as /etc/shadow does, which cases point at by absolute name, by `../`, and through
links.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "tests" / "fixtures" / "checkpoints" / "llama-3.1-8b-instruct-fp4"
B200 = str(ROOT / "tests" / "fixtures" / "hosts" / "b200.json")
AUDITED = str(Path(__file__).resolve().parent / "audited.py")
INDEX = "model.safetensors.index.json"
SHARD = "model-00001-of-00002.safetensors"
SECRET = b"root:*:20000:0:99999:7:::\n"  # how /etc/shadow begins
SECRET_AS_LENGTH = str(struct.unpack("<Q", SECRET[:8])[0])  # what a header-length error showed
DEEP = b"[" * 100_000 + b"]" * 100_000
HANG_GUARD_S = 120.0  # a hang (a FIFO waited on) fails here; not a budget: runs take well under 1 s
MAX_OPENED = 12  # the files one refusal may open (6 at most today): the facts, a few of the model


def _header(entries: dict[str, object]) -> bytes:
    raw = json.dumps(entries).encode()
    return struct.pack("<Q", len(raw)) + raw


def _copy(model: Path, *, index: bool = True) -> None:
    shutil.copytree(GOOD, model)
    if not index:
        (model / INDEX).unlink()


def _weight_map(model: Path, shard: str) -> None:
    """The index, every tensor in `shard`."""
    index = json.loads((model / INDEX).read_text())
    index["weight_map"] = dict.fromkeys(index["weight_map"], shard)
    (model / INDEX).write_text(json.dumps(index))


def _fifo_no_index(model: Path, outside: Path) -> str:
    _copy(model, index=False)
    for f in model.glob("*.safetensors"):
        f.unlink()
    os.mkfifo(model / "model.safetensors")  # opened blocking, it waits for a writer forever
    return str(model)


def _fifo_shard(model: Path, outside: Path) -> str:
    _copy(model)
    (model / SHARD).unlink()
    os.mkfifo(model / SHARD)
    return str(model)


def _deep(name: str) -> Callable[[Path, Path], str]:
    def make(model: Path, outside: Path) -> str:
        _copy(model)
        (model / name).write_bytes(_header_of(DEEP) if name == SHARD else DEEP)
        return str(model)

    return make


def _header_of(raw: bytes) -> bytes:
    return struct.pack("<Q", len(raw)) + raw


def _long_shape(model: Path, outside: Path) -> str:
    _copy(model)
    shape = b"[" + b"9" * 5000 + b"]"  # over Python's 4,300-digit limit for int()
    raw = b'{"a.q_proj.weight": {"dtype": "U8", "shape": ' + shape + b', "data_offsets": [0, 0]}}'
    (model / SHARD).write_bytes(_header_of(raw))
    return str(model)


def _absolute_shard(model: Path, outside: Path) -> str:
    _copy(model)
    _weight_map(model, str(outside / "secret.safetensors"))
    return str(model)


def _climbing_shard(model: Path, outside: Path) -> str:
    _copy(model)
    _weight_map(model, "../outside/secret.safetensors")
    return str(model)


def _linked_shard(model: Path, outside: Path) -> str:
    _copy(model)
    (model / SHARD).unlink()
    (model / SHARD).symlink_to(outside / "secret.safetensors")
    return str(model)


def _linked_folder(model: Path, outside: Path) -> str:
    _copy(model)
    (model / "sub").symlink_to(outside, target_is_directory=True)
    _weight_map(model, "sub/secret.safetensors")
    return str(model)


def _linked_glob(model: Path, outside: Path) -> str:
    _copy(model, index=False)
    (model / "model-00003-of-00002.safetensors").symlink_to(outside / "secret.safetensors")
    return str(model)


def _linked(name: str) -> Callable[[Path, Path], str]:
    def make(model: Path, outside: Path) -> str:
        _copy(model)
        (outside / name).write_bytes((model / name).read_bytes())  # a good file, but elsewhere
        (model / name).unlink()
        (model / name).symlink_to(outside / name)
        return str(model)

    return make


def _huge_length(model: Path, outside: Path) -> str:
    _copy(model)
    (model / SHARD).write_bytes(b"\xff" * 16)  # inside the directory: its length may be shown
    return str(model)


def _controls_in_the_name(model: Path, outside: Path) -> str:
    odd = model.with_name("bad\nname\x1b[31m")
    odd.mkdir()
    return str(odd)


# case -> (make the model, return the --model argument; a regex the error line must match)
CASES: dict[str, tuple[Callable[[Path, Path], str], str]] = {
    "fifo, no index": (_fifo_no_index, r"model\.safetensors: not a regular file"),
    "fifo shard": (_fifo_shard, r"names 1 shard\(s\) that are not in"),
    "deep header": (_deep(SHARD), r"nested too deeply to be a safetensors header"),
    "deep index": (_deep(INDEX), r"index\.json: JSON nested too deeply to be an index"),
    "deep config.json": (_deep("config.json"), r"config\.json: JSON nested too deeply"),
    "deep hf_quant_config.json": (
        _deep("hf_quant_config.json"),
        r"hf_quant_config\.json: JSON nested too deeply",
    ),
    "5000-digit shape": (_long_shape, r"an integer too long to read \(over 4300 digits\)"),
    "absolute shard": (_absolute_shard, r"names the shard '/.*secret\.safetensors', outside"),
    "../ shard": (_climbing_shard, r"names the shard '\.\./outside/secret\.safetensors'"),
    "shard linked outside": (_linked_shard, r"-of-00002\.safetensors: leads outside the model"),
    "folder linked outside": (_linked_folder, r"sub/secret\.safetensors: leads outside"),
    "no index, shard linked outside": (_linked_glob, r"00003-of-00002\.safetensors: leads out"),
    "config.json linked outside": (_linked("config.json"), r"config\.json: leads outside"),
    "hf_quant_config.json linked outside": (
        _linked("hf_quant_config.json"),
        r"hf_quant_config\.json: leads outside",
    ),
    "index linked outside": (_linked(INDEX), r"index\.json: leads outside"),
    "header length 2**64 - 1": (_huge_length, r"header length \d+ bytes is over"),
    "newline and escape in --model": (
        _controls_in_the_name,
        r"bad\\nname\\e\[31m/config\.json: missing",
    ),
}


def _run(model: str, cwd: Path, log: Path) -> tuple[int, str, str]:
    """The command in the audited child: exit code, stdout after `ready`, stderr."""
    env = {**os.environ, "FP4DOCTOR_CACHE_DIR": ""}
    proc = subprocess.Popen(
        [sys.executable, AUDITED, str(log), "check", "--facts", B200, "--no-smoke",
         "--model", model],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        try:
            out, err = proc.communicate(timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"--model {model!r}: hangs ({HANG_GUARD_S} s after it started)")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def _opened(log: Path) -> list[str]:
    return [p for p in log.read_bytes().decode("utf-8", "surrogateescape").split("\0") if p]


def _corpus(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.safetensors").write_bytes(SECRET)
    return tmp_path / "model", outside


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_checkpoint_is_one_line_exit_2_at_once_and_nothing_outside_read(
    tmp_path: Path, case: str
) -> None:
    model, outside = _corpus(tmp_path)
    make, message = CASES[case]
    log = tmp_path / "opened"
    code, out, err = _run(make(model, outside), tmp_path, log)
    assert code == 2, err
    assert out == ""
    assert err.startswith("fp4doctor: error: ") and err.count("\n") == 1 and err.endswith("\n")
    assert "Traceback" not in err
    assert re.search(message, err), err
    assert "root:" not in err and SECRET_AS_LENGTH not in err  # no byte of the foreign file
    real_outside = os.path.realpath(outside)
    opened = _opened(log)
    assert [p for p in opened if p.startswith(real_outside + os.sep)] == []
    assert len(opened) <= MAX_OPENED, opened  # bounded work: no walk, no retry loop


def test_an_empty_model_is_a_usage_error_not_the_current_directory(tmp_path: Path) -> None:
    """Path("") is `.`: from inside a good checkpoint, `--model ""` once judged it."""
    model, _ = _corpus(tmp_path)
    _copy(model)
    log = tmp_path / "opened"
    code, out, err = _run("", model, log)
    assert (code, out) == (2, "")
    assert err == "fp4doctor: error: --model is empty: give a checkpoint directory or ORG/NAME\n"
    assert [p for p in _opened(log) if p.startswith(os.path.realpath(model))] == []


def test_the_audit_sees_what_a_good_checkpoint_opens(tmp_path: Path) -> None:
    """The check above is not vacuous: a good checkpoint's files are recorded as opened."""
    model, _ = _corpus(tmp_path)
    _copy(model)
    log = tmp_path / "opened"
    code, _, err = _run(str(model), tmp_path, log)
    assert code in (0, 1), err
    opened = _opened(log)
    for name in ("config.json", "hf_quant_config.json", INDEX, SHARD):
        assert os.path.realpath(model / name) in opened


def test_a_hugging_face_cache_snapshot_may_link_into_its_blobs(tmp_path: Path) -> None:
    """huggingface_hub's layout: the snapshot's files are links to ../../blobs/HASH."""
    from fp4doctor import checkpoint

    repo = tmp_path / "models--nvidia--Llama-3.1-8B-Instruct-FP4"
    snapshot = repo / "snapshots" / "0123abcd"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for f in GOOD.iterdir():
        (repo / "blobs" / f.name).write_bytes(f.read_bytes())
        (snapshot / f.name).symlink_to(Path("..", "..", "blobs", f.name))
    assert checkpoint.load(str(snapshot)).shards == 2
    (snapshot / SHARD).unlink()
    (snapshot / SHARD).symlink_to(tmp_path / "elsewhere.safetensors")
    (tmp_path / "elsewhere.safetensors").write_bytes((GOOD / SHARD).read_bytes())
    with pytest.raises(checkpoint.CheckpointError, match="leads outside the model directory"):
        checkpoint.load(str(snapshot))
