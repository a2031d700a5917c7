"""The files fp4doctor writes for pipelines and reads from them, checked on real files with the
real readers.

- dotenv (``fp4doctor config`` for env-only engines, ``env --shell dotenv``): every value that
  is written must read back the same in dash and bash (``set -a; . FILE; set +a``, as
  docs/pipelines.md says), in python-dotenv, and under ``docker run --env-file``; a value
  with no common form is refused with a message that says why and what to use instead.
  docker's rules run twice: as the tiny reference reader below, always, and through the real
  docker client when it is installed (its env-file parser runs client side; a fake daemon on
  a unix socket records the container it is asked to create, so no daemon is needed).
- write_atomic never replaces anything but a regular file: FIFOs, sockets, device nodes
  (``/dev/full`` as root), directories and links that do not lead to a regular file are
  refused and left as they were; a link to a regular file is written through.
- read_text reads only regular files, and at most a capped number of bytes: ``/dev/zero`` and
  a FIFO with no writer end at once with a one-line error.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import socketserver
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fp4doctor.atomic import NotRegularFile, write_atomic
from fp4doctor.emit import EmitError, Exports, emit
from fp4doctor.textfile import DEFAULT_LIMIT, UnreadableText, read_text

REPO = Path(__file__).resolve().parent.parent
HOSTS = Path(__file__).parent / "fixtures" / "hosts"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

# =============================================================================================
# dotenv: one file, four readers

# Values the tool emits: engine values, one-word flags, paths and the empty value.
ONE_WORD = (
    "flashinfer-cudnn",
    "marlin",
    "--linear-backend=flashinfer_cudnn",
    "--moe-backend=flashinfer_cutlass",
    "",
    "a=b",
    "/opt/cuda/lib64:/usr/lib,x",
    "x+y@z%1_2.3",
)

# Values that at least one reader would change, or run as a command. Only the ones the emitter
# accepts are written; the rest must be refused. CANARY is created by any that runs a command.
HOSTILE = (
    "--linear-backend flashinfer_cudnn",
    "--linear-backend=flashinfer_cudnn --moe-backend=marlin",
    "a'b\"c",
    "'quoted'",
    '"quoted"',
    "\\",
    "a\\",
    "é €",
    "é",
    "a\tb",
    "a\u00a0",
    "a#b",
    "#x",
    "a #b",
    "a;touch CANARY",
    "a&&touch CANARY",
    "a|touch CANARY",
    "$(touch CANARY)",
    "`touch CANARY`",
    ">CANARY",
    "(x)",
    "~",
    "~/x",
    "a:~/x",
    "${HOME}",
    "$HOME",
    "*",
    "?",
    "[a]",
    "{a,b}",
    "!x",
    "\x1b[31m",
    " lead",
    "trail ",
)

NAMES = tuple(f"FP4_V{i}" for i in range(len(ONE_WORD) + len(HOSTILE)))
SH_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


def written(values: tuple[str, ...] | list[str]) -> dict[str, str]:
    """The name/value pairs among `values` that the dotenv emitter accepts, one name each."""
    accepted: dict[str, str] = {}
    for name, value in zip(NAMES, values, strict=False):
        try:
            emit("dotenv", Exports(set=((name, value),)))
        except EmitError:
            continue
        accepted[name] = value
    return accepted


def write_dotenv(directory: Path, values: dict[str, str], unset: tuple[str, ...] = ()) -> Path:
    path = directory / "fp4.env"
    write_atomic(
        path, emit("dotenv", Exports(set=tuple(values.items()), unset=unset)), overwrite=True
    )
    return path


Reader = Callable[[Path, list[str]], dict[str, str]]


def sh_reader(shell: str) -> Reader:
    def read(path: Path, names: list[str]) -> dict[str, str]:
        binary = shutil.which(shell, path=SH_ENV["PATH"])
        assert binary is not None
        script = 'set -a; . "$1"; set +a; exec env -0'
        proc = subprocess.run(
            [binary, "-c", script, shell, str(path)],
            cwd=path.parent,
            env=SH_ENV,
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert not (path.parent / "CANARY").exists(), f"{shell} ran a value as a command"
        assert proc.stderr == b"", proc.stderr.decode(errors="replace")
        assert proc.returncode == 0
        env = dict(e.partition(b"=")[::2] for e in proc.stdout.split(b"\0") if e)
        return {n: env[n.encode()].decode() for n in names if n.encode() in env}

    return read


def python_dotenv_reader(path: Path, names: list[str]) -> dict[str, str]:
    import dotenv  # type: ignore[import-not-found,unused-ignore]

    values = dotenv.dotenv_values(path)
    return {n: v for n, v in values.items() if n in names and v is not None}


def docker_reference_reader(path: Path, names: list[str]) -> dict[str, str]:
    """``docker run --env-file`` as docker/cli (opts/file.go, parseKeyValueFile) reads a file:

    - lines are split at ``\\n`` (a trailing ``\\r`` is dropped), each at most 64 KiB;
    - leading whitespace is trimmed from the line, so from the name;
    - a line that is empty or whitespace only is skipped, and so is one starting with ``#``;
    - the first ``=`` splits the name from the value; the value is everything after it,
      literally: no quotes removed, no escapes, no comments, no trailing whitespace trimmed;
    - a name holding whitespace is an error; a line without ``=`` takes the value from
      docker's own environment (we never write one, so it is an error here).
    """
    values: dict[str, str] = {}
    for raw in path.read_bytes().split(b"\n"):
        assert len(raw) < 64 * 1024, "docker: bufio.Scanner: token too long"
        line = raw.removesuffix(b"\r").decode("utf-8").lstrip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        assert sep, f"docker would take {name!r} from its own environment"
        assert not any(c.isspace() for c in name), f"docker: variable {name!r} has whitespace"
        values[name] = value
    return {n: v for n, v in values.items() if n in names}


class _FakeDockerDaemon(BaseHTTPRequestHandler):
    """Answers the docker client's ping and records the body of ``POST .../containers/create``
    (which holds the Env the client parsed from --env-file), then fails the request."""

    captured: list[bytes] = []  # noqa: RUF012 (one recorder per test module)

    def _reply(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Api-Version", "1.41")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self._reply(200, b"")

    def do_GET(self) -> None:
        self._reply(200 if self.path.endswith("/_ping") else 404, b'{"message":"fake"}')

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if "/containers/create" in self.path:
            self.captured.append(body)
        self._reply(500, b'{"message":"fake daemon: request recorded"}')

    def address_string(self) -> str:
        return "fake-docker"

    def log_message(self, format: str, *args: object) -> None:
        pass


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture(scope="module")
def fake_docker() -> Iterator[Path]:
    if shutil.which("docker") is None:
        pytest.skip("the docker client is not installed on this host")
    with tempfile.TemporaryDirectory(prefix="fp4doctor-docker-") as tmp:
        server = _UnixServer(os.path.join(tmp, "docker.sock"), _FakeDockerDaemon)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield Path(tmp)
        finally:
            server.shutdown()
            server.server_close()


def real_docker_reader(home: Path, path: Path, names: list[str]) -> dict[str, str]:
    """The real docker client parses --env-file and sends the result to the (fake) daemon."""
    _FakeDockerDaemon.captured.clear()
    proc = subprocess.run(
        ["docker", "run", "--rm", "--pull", "never", "--env-file", str(path), "fp4doctor:none"],
        env={
            **SH_ENV,
            "DOCKER_HOST": f"unix://{home / 'docker.sock'}",
            "DOCKER_CONFIG": str(home / "config"),
        },
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert _FakeDockerDaemon.captured, proc.stderr.decode(errors="replace")
    env = json.loads(_FakeDockerDaemon.captured[-1])["Env"] or []
    values = dict(entry.partition("=")[::2] for entry in env)
    return {n: v for n, v in values.items() if n in names}


READERS: dict[str, Reader] = {
    "dash": sh_reader("dash"),
    "bash": sh_reader("bash"),
    "python-dotenv": python_dotenv_reader,
    "docker-reference": docker_reference_reader,
}


def missing(reader: str) -> str | None:
    """Why `reader` cannot run on this host, or None."""
    if reader in ("dash", "bash") and shutil.which(reader, path=SH_ENV["PATH"]) is None:
        return f"{reader} is not installed on this host"
    if reader == "python-dotenv" and importlib.util.find_spec("dotenv") is None:
        return "python-dotenv is not installed (it is in the 'test' extra)"
    return None


def read_with(reader: str, path: Path, names: list[str]) -> dict[str, str]:
    if reader == "python-dotenv":
        pytest.importorskip("dotenv", reason="python-dotenv is in the 'test' extra")
    why = missing(reader)
    if why is not None:
        pytest.skip(why)
    return READERS[reader](path, names)


@pytest.mark.parametrize("reader", READERS)
def test_every_written_value_reads_the_same_in_each_reader(reader: str, tmp_path: Path) -> None:
    values = written(ONE_WORD + HOSTILE)
    assert set(values.values()) >= set(ONE_WORD), "a one-word value was refused"
    path = write_dotenv(tmp_path, values, unset=("FP4_OTHER",))
    assert read_with(reader, path, list(values)) == values


def test_every_written_value_reads_the_same_in_the_real_docker_client(
    fake_docker: Path, tmp_path: Path
) -> None:
    values = written(ONE_WORD + HOSTILE)
    path = write_dotenv(tmp_path, values, unset=("FP4_OTHER",))
    assert real_docker_reader(fake_docker, path, list(values)) == values


def test_the_docker_reference_reader_agrees_with_the_real_docker_client(
    fake_docker: Path, tmp_path: Path
) -> None:
    """The reference reader's rules, checked against docker itself on what we never write."""
    path = tmp_path / "rules.env"
    path.write_bytes(
        b"A=a b \n  B=x#y\n\tC=\"q\" 'r' \\n $HOME\n# comment\n   \n\nD=\nE==x=\nF=cr\r\n"
    )
    names = list("ABCDEF")
    expected = docker_reference_reader(path, names)
    assert expected == {
        "A": "a b ",
        "B": "x#y",
        "C": "\"q\" 'r' \\n $HOME",
        "D": "",
        "E": "=x=",
        "F": "cr",
    }
    assert real_docker_reader(fake_docker, path, names) == expected


@pytest.mark.parametrize(
    "value",
    ["--linear-backend flashinfer_cudnn", "--linear-backend=flashinfer_cudnn --moe-backend=marlin"],
)
def test_two_flags_in_one_value_are_refused_with_the_reason_and_what_to_use(value: str) -> None:
    with pytest.raises(EmitError) as info:
        emit("dotenv", Exports(set=(("FP4DOCTOR_VLLM_ARGS", value),)))
    message = str(info.value)
    assert message.startswith("cannot emit FP4DOCTOR_VLLM_ARGS for dotenv: the value holds ' '")
    assert "two flags in one value" in message and "docker" in message
    assert "--shell bash" in message and "--shell json" in message
    assert "\n" not in message


def test_every_refused_value_has_a_one_line_reason() -> None:
    refused = [v for v in HOSTILE if v not in written([v]).values()]
    assert len(refused) == len(HOSTILE), "a hostile value was written"
    for value in refused:
        with pytest.raises(EmitError, match=r"^cannot emit FP4_V0 for dotenv: the value holds "):
            emit("dotenv", Exports(set=(("FP4_V0", value),)))


AVAILABLE = [reader for reader in READERS if missing(reader) is None]


@pytest.mark.skipif(not {"dash", "bash"} & set(AVAILABLE), reason="neither dash nor bash here")
@settings(
    max_examples=int(os.environ.get("FP4DOCTOR_SHELL_EXAMPLES", "15")),
    database=None,
    # replaces the suite's list (tests/conftest.py), so it names too_slow again
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    values=st.lists(
        st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=12)
        | st.text("ab-=:,./_+@%#'\"\\$ ;~", max_size=12),
        min_size=1,
        max_size=20,
    )
)
def test_any_accepted_value_reads_the_same_everywhere(
    values: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    accepted = written(values)
    directory = tmp_path_factory.mktemp("dotenv")
    path = write_dotenv(directory, accepted)
    for reader in AVAILABLE:
        assert READERS[reader](path, list(accepted)) == accepted, reader


# =============================================================================================
# write_atomic: only a regular file is ever replaced


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def node(path: Path) -> tuple[int, int, int]:
    st = os.lstat(path)
    return st.st_mode, st.st_ino, st.st_rdev


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_fifo_is_never_replaced(tmp_path: Path, overwrite: bool) -> None:
    fifo = tmp_path / "fp4.env"
    os.mkfifo(fifo)
    before = node(fifo)
    with pytest.raises(NotRegularFile) as info:
        write_atomic(fifo, "A=x\n", overwrite=overwrite)
    assert info.value.strerror == (
        "is a FIFO (named pipe), not a regular file: only a regular file is replaced"
    )
    assert info.value.filename == str(fifo)
    assert node(fifo) == before
    assert listing(tmp_path) == ["fp4.env"]


def test_a_socket_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        before = node(path)
        with pytest.raises(NotRegularFile, match="is a socket, not a regular file"):
            write_atomic(path, "x", overwrite=True)
        assert node(path) == before
    assert listing(tmp_path) == ["s"]


@pytest.mark.skipif(not IS_ROOT, reason="only root can make a device node")
def test_a_device_node_is_never_replaced(tmp_path: Path) -> None:
    """A real character device node (the numbers of /dev/null), made in the test's directory."""
    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    before = node(device)
    with pytest.raises(NotRegularFile, match="is a character device, not a regular file"):
        write_atomic(device, "x", overwrite=True)
    assert node(device) == before
    assert listing(tmp_path) == ["null"]


@pytest.mark.skipif(not IS_ROOT, reason="as another user /dev cannot be written at all")
@pytest.mark.parametrize("device", ["/dev/full", "/dev/null"])
def test_dev_full_and_dev_null_are_never_replaced_as_root(device: str) -> None:
    path = Path(device)
    if not path.is_char_device():
        pytest.skip(f"{device} is not a character device here")
    before = node(path)
    try:
        with pytest.raises(NotRegularFile, match="is a character device, not a regular file"):
            write_atomic(path, "A=x\n", overwrite=True)
    finally:
        if not stat.S_ISCHR(os.lstat(path).st_mode):  # put the device back before failing
            spare = path.with_name(f".{path.name}.restore")
            os.mknod(spare, 0o666 | stat.S_IFCHR, before[2])
            os.replace(spare, path)
    assert node(path) == before
    assert not list(path.parent.glob(f".{path.name}.*.tmp"))


def test_a_symlink_to_a_file_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "conf" / "fp4.env"
    real.parent.mkdir()
    real.write_text("A=old\n")
    link = tmp_path / "fp4.env"
    link.symlink_to(Path("conf") / "fp4.env")
    chain = tmp_path / "chain.env"
    chain.symlink_to("fp4.env")
    write_atomic(link, "A=new\n", overwrite=True)
    assert os.readlink(link) == str(Path("conf") / "fp4.env")
    assert real.read_text() == "A=new\n"
    write_atomic(chain, "A=newer\n", overwrite=True)
    assert chain.is_symlink() and link.is_symlink()
    assert real.read_text() == "A=newer\n"
    assert listing(tmp_path) == ["chain.env", "conf", "fp4.env"]
    assert listing(real.parent) == ["fp4.env"]


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_dangling_symlink_is_refused_and_nothing_is_created(
    tmp_path: Path, overwrite: bool
) -> None:
    link = tmp_path / "fp4.env"
    link.symlink_to(tmp_path / "planted")
    with pytest.raises(NotRegularFile) as info:
        write_atomic(link, "A=x\n", overwrite=overwrite)
    assert info.value.filename == str(link)
    assert str(info.value.strerror).startswith(
        f"is a symbolic link to {tmp_path / 'planted'}, which does not exist"
    )
    assert os.readlink(link) == str(tmp_path / "planted")
    assert listing(tmp_path) == ["fp4.env"]


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_symlink_to_a_directory_is_refused(tmp_path: Path, overwrite: bool) -> None:
    directory = tmp_path / "d"
    directory.mkdir()
    link = tmp_path / "fp4.env"
    link.symlink_to("d")
    with pytest.raises(NotRegularFile, match="symbolic link to d, which is a directory"):
        write_atomic(link, "A=x\n", overwrite=overwrite)
    assert os.readlink(link) == "d"
    assert listing(tmp_path) == ["d", "fp4.env"] and listing(directory) == []


def test_a_symlink_to_a_fifo_and_a_loop_of_links_are_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "to-fifo").symlink_to("fifo")
    (tmp_path / "loop-a").symlink_to("loop-b")
    (tmp_path / "loop-b").symlink_to("loop-a")
    with pytest.raises(NotRegularFile, match="link to fifo, which is a FIFO"):
        write_atomic(tmp_path / "to-fifo", "x", overwrite=True)
    with pytest.raises(NotRegularFile, match="in a loop of links"):
        write_atomic(tmp_path / "loop-a", "x", overwrite=True)
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)
    assert listing(tmp_path) == ["fifo", "loop-a", "loop-b", "to-fifo"]


@pytest.mark.skipif(not IS_ROOT, reason="needs root to make a link owned by another user")
def test_another_users_link_in_a_shared_sticky_directory_is_not_followed(tmp_path: Path) -> None:
    """The /tmp attack: a link planted by nobody must not make root overwrite its target."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0\n")
    planted = shared / "fp4.env"
    planted.symlink_to(victim)
    os.lchown(planted, 65534, 65534)
    with pytest.raises(NotRegularFile, match=r"owned by another user \(uid 65534\) in the shared"):
        write_atomic(planted, "A=x\n", overwrite=True)
    assert victim.read_text() == "root:x:0:0\n"
    assert planted.is_symlink()
    assert listing(shared) == ["fp4.env"]


def test_an_empty_name_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="the file name is empty"):
        write_atomic("", "x", overwrite=True)
    assert listing(tmp_path) == []


@pytest.mark.parametrize("name", ["missing/dir/", "existing/", "."])
def test_a_name_that_names_a_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "existing").mkdir()
    with pytest.raises(IsADirectoryError, match="directory, not a file") as info:
        write_atomic(name, "x", overwrite=True)
    assert info.value.filename == name
    assert listing(tmp_path) == ["existing"] and listing(tmp_path / "existing") == []


def test_a_missing_directory_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        write_atomic("missing/dir/fp4.env", "x", overwrite=True)
    assert info.value.strerror == "directory missing/dir does not exist"
    assert info.value.filename == "missing/dir/fp4.env"
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="file is not a directory"):
        write_atomic("file/fp4.env", "x", overwrite=True)


@pytest.mark.parametrize("overwrite", [False, True])
def test_proc_version_is_not_a_regular_file_that_can_be_replaced(overwrite: bool) -> None:
    path = Path("/proc/version")
    if not path.is_file():
        pytest.skip("/proc is not mounted here")
    before = path.read_text()
    with pytest.raises(OSError) as info:
        write_atomic(path, "x", overwrite=overwrite)
    assert info.value.filename == str(path)
    if overwrite:
        assert isinstance(info.value, NotRegularFile)
        assert str(info.value.strerror).startswith("not a regular file that can be replaced: /proc")
        assert "No such file" not in str(info.value)
    else:
        assert isinstance(info.value, FileExistsError)
    assert path.read_text() == before
    with pytest.raises(OSError, match="special file system") as new:
        write_atomic("/proc/fp4doctor-new-file", "x", overwrite=overwrite)
    assert "No such file" not in str(new.value)


# =============================================================================================
# read_text: regular files only, and capped


def _in_child(code: str, timeout: float = 10) -> dict[str, object]:
    """Run `code` in a fresh interpreter whose memory is capped (2 GiB address space), so an
    unbounded read fails there instead of filling this machine; it prints one JSON object. The
    work is counted, not timed: `bytes_read` is what every `os.read` of the attempt returned
    (the `timeout` is a hang guard, which no correct read comes near)."""
    prelude = textwrap.dedent(
        """
        import json, os, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from fp4doctor.textfile import UnreadableText, read_text

        _read, _count = os.read, [0]

        def _counted(fd, n):
            data = _read(fd, n)
            _count[0] += len(data)
            return data

        def attempt(call):
            _count[0] = 0
            os.read = _counted
            try:
                text = call()
            except Exception as exc:  # report every kind, so a test can tell them apart
                result = {"error": type(exc).__name__, "message": str(exc)}
            else:
                result = {"error": None, "length": len(text)}
            finally:
                os.read = _read
            result["bytes_read"] = _count[0]
            print(json.dumps(result))
        """
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", prelude + textwrap.dedent(code)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the read did not end within {timeout} s")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert isinstance(result, dict)
    return result


def test_dev_zero_is_refused_without_reading_a_byte() -> None:
    result = _in_child("attempt(lambda: read_text('/dev/zero'))")
    assert result["error"] == "UnreadableText"
    assert result["message"] == (
        "/dev/zero: not a regular file (a character device); pipes, devices and /dev/stdin are "
        "not read: save the content to a file and name that"
    )
    assert result["bytes_read"] == 0  # once a read until memory ran out


@pytest.mark.parametrize(
    ("loader", "error"),
    [("fp4doctor.facts:load", "FactsError"), ("fp4doctor.profile:load_file", "ProfileError")],
)
def test_facts_and_profile_from_dev_zero_end_at_once(loader: str, error: str) -> None:
    module, function = loader.split(":")
    result = _in_child(f"from {module} import {function}\nattempt(lambda: {function}('/dev/zero'))")
    assert result["error"] == error
    assert str(result["message"]).startswith("/dev/zero: not a regular file")
    assert result["bytes_read"] == 0


def test_a_fifo_with_no_writer_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "facts.json"
    os.mkfifo(fifo)
    result = _in_child(f"attempt(lambda: read_text({str(fifo)!r}))")
    assert result["error"] == "UnreadableText"
    assert str(result["message"]).startswith(f"{fifo}: not a regular file (a FIFO or pipe)")
    assert result["bytes_read"] == 0


def test_dev_stdin_from_a_pipe_is_refused() -> None:
    """``probe --json | check --facts /dev/stdin`` is refused: /dev/stdin is then a pipe."""
    proc = subprocess.run(
        [sys.executable, "-c", "from fp4doctor.textfile import read_text\nread_text('/dev/stdin')"],
        cwd=REPO,
        input="{}",
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert proc.returncode == 1
    assert "UnreadableText: /dev/stdin: not a regular file (a FIFO or pipe)" in proc.stderr


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnreadableText) as info:
        read_text(tmp_path)
    assert str(info.value) == f"{tmp_path}: is a directory, not a file"


def test_a_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "facts.json"
    big.write_bytes(b" " * (5 * 1024 * 1024))
    with pytest.raises(UnreadableText) as info:
        read_text(big)
    assert str(info.value).startswith(f"{big}: larger than {DEFAULT_LIMIT} bytes; ")
    assert DEFAULT_LIMIT == 4 * 1024 * 1024


def test_a_huge_sparse_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    sparse = tmp_path / "profile.yaml"
    with open(sparse, "wb") as f:
        f.truncate(1 << 40)  # 1 TiB of holes: st_size says 1 TiB, reading it all would not end
    result = _in_child(f"attempt(lambda: read_text({str(sparse)!r}))")
    assert result["error"] == "UnreadableText"
    assert str(result["message"]).startswith(f"{sparse}: larger than {DEFAULT_LIMIT} bytes")
    assert result["bytes_read"] == DEFAULT_LIMIT + 1  # what tells it is over the limit, no more


def test_the_limit_is_a_parameter(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("0123456789")
    assert read_text(path, limit=10) == "0123456789"
    with pytest.raises(UnreadableText, match=r"^.*/f: larger than 9 bytes; "):
        read_text(path, limit=9)


def test_a_normal_file_is_read_exactly(tmp_path: Path) -> None:
    snapshot = HOSTS / "b200.json"
    assert read_text(snapshot) == snapshot.read_bytes().decode("utf-8")
    text = "schema_version: 1\nname: é\n"
    (tmp_path / "p.yaml").write_text(text, encoding="utf-8")
    assert read_text(tmp_path / "p.yaml") == text
    (tmp_path / "empty").write_bytes(b"")
    assert read_text(tmp_path / "empty") == ""
