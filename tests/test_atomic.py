"""write_atomic: the target is always the old file or the new one, complete; never a mixture.

Faults that a test cannot cause for real (a failing fsync, a full disk, a file system without
hard links) are injected by replacing the os function with a fake, and labelled so.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fp4doctor.atomic import NotRegularFile, write_atomic


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_writes_a_new_file(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "vllm.yaml"
    write_atomic(target, "linear-backend: flashinfer_cudnn\né\n", overwrite=False)
    assert target.read_bytes() == "linear-backend: flashinfer_cudnn\né\n".encode()
    assert listing(tmp_path) == ["vllm.yaml"]


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_file_mode_respects_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        write_atomic(tmp_path / "f", "x", overwrite=False)
        write_atomic(tmp_path / "g", "x", overwrite=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "f").st_mode) == mode
    assert stat.S_IMODE(os.stat(tmp_path / "g").st_mode) == mode


def test_overwrite_keeps_the_permission_bits(tmp_path: Path, umask_022: None) -> None:
    target = tmp_path / "knobs.env"
    target.write_text("old\n")
    target.chmod(0o600)
    write_atomic(target, "new\n", overwrite=True)
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600


def test_refuses_an_existing_file_without_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "knobs.env"
    target.write_text("old\n")
    with pytest.raises(FileExistsError) as info:
        write_atomic(target, "new\n", overwrite=False)
    assert info.value.filename == str(target)
    assert target.read_text() == "old\n"
    assert listing(tmp_path) == ["knobs.env"]


@pytest.mark.parametrize("overwrite", [False, True])
def test_refuses_a_dangling_symlink(tmp_path: Path, overwrite: bool) -> None:
    """A file is never created through a link: that is how a planted link redirects a write."""
    target = tmp_path / "link"
    target.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(NotRegularFile, match=r"symbolic link to .*elsewhere, which does not exist"):
        write_atomic(target, "new\n", overwrite=overwrite)
    assert not (tmp_path / "elsewhere").exists()
    assert os.readlink(target) == str(tmp_path / "elsewhere")


def test_overwrite_follows_a_symlink_to_a_file_and_keeps_the_link(tmp_path: Path) -> None:
    """The file the link names is replaced atomically; the link itself stays a link."""
    victim = tmp_path / "real.env"
    victim.write_text("old\n")
    victim.chmod(0o640)
    target = tmp_path / "link"
    target.symlink_to("real.env")
    write_atomic(target, "new\n", overwrite=True)
    assert target.is_symlink() and os.readlink(target) == "real.env"
    assert victim.read_text() == "new\n"
    assert stat.S_IMODE(os.stat(victim).st_mode) == 0o640
    assert listing(tmp_path) == ["link", "real.env"]


def test_a_symlink_to_a_file_is_an_existing_file_without_overwrite(tmp_path: Path) -> None:
    (tmp_path / "real.env").write_text("old\n")
    (tmp_path / "link").symlink_to("real.env")
    with pytest.raises(FileExistsError):
        write_atomic(tmp_path / "link", "new\n", overwrite=False)
    assert (tmp_path / "real.env").read_text() == "old\n"


def test_missing_directory_names_the_target(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "f"
    with pytest.raises(FileNotFoundError) as info:
        write_atomic(target, "x", overwrite=False)
    assert info.value.filename == str(target)
    assert info.value.strerror == f"directory {target.parent} does not exist"


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_directory_at_the_target_is_an_error(tmp_path: Path, overwrite: bool) -> None:
    target = tmp_path / "d"
    target.mkdir()
    with pytest.raises(OSError) as info:
        write_atomic(target, "x", overwrite=overwrite)
    assert info.value.filename == str(target)
    assert isinstance(info.value, (FileExistsError, IsADirectoryError))
    assert listing(tmp_path) == ["d"]


# ---------------------------------------------------------------------------------------------
# Faults: nothing partial is ever left


def _fake_fsync_failure(fd: int) -> None:
    raise OSError(errno.EIO, "fake: fsync failed")


def _fake_disk_full_after_half(fd: int, data: bytes) -> int:
    # fake: the first write reaches the disk halfway (a short write), then the disk is full
    if not _fake_disk_full_after_half.calls:  # type: ignore[attr-defined]
        _fake_disk_full_after_half.calls.append(fd)  # type: ignore[attr-defined]
        return _REAL_WRITE(fd, bytes(data[: len(data) // 2]))
    raise OSError(errno.ENOSPC, "fake: No space left on device")


_REAL_WRITE = os.write


def _fake_interrupt(fd: int) -> None:
    raise KeyboardInterrupt


FAULTS = {
    "fsync-fails": ("fsync", _fake_fsync_failure, OSError),
    "disk-full-mid-write": ("write", _fake_disk_full_after_half, OSError),
    "ctrl-c-before-fsync": ("fsync", _fake_interrupt, KeyboardInterrupt),
}


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
@pytest.mark.parametrize(
    ("existing", "overwrite"),
    [(None, False), (None, True), ("old complete file\n", True)],
    ids=["new-file", "new-file-overwrite", "replace-existing"],
)
def test_a_failed_write_leaves_the_target_as_it_was(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    existing: str | None,
    overwrite: bool,
) -> None:
    target = tmp_path / "vllm.yaml"
    if existing is not None:
        target.write_text(existing)
    before = listing(tmp_path)
    name, fake, error = FAULTS[fault]
    _fake_disk_full_after_half.calls = []  # type: ignore[attr-defined]
    monkeypatch.setattr(os, name, fake)
    with pytest.raises(error) as info:
        write_atomic(target, "new content\n" * 10_000, overwrite=overwrite)
    monkeypatch.undo()
    if isinstance(info.value, OSError):
        assert info.value.filename == str(target)
    assert listing(tmp_path) == before
    if existing is not None:
        assert target.read_text() == existing


def test_without_hard_links_the_new_file_is_still_created_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EPERM, "fake: this file system has no hard links")

    monkeypatch.setattr(os, "link", no_links)
    target = tmp_path / "f"
    write_atomic(target, "first\n", overwrite=False)
    assert target.read_text() == "first\n"
    with pytest.raises(FileExistsError):
        write_atomic(target, "second\n", overwrite=False)
    assert target.read_text() == "first\n"
    assert listing(tmp_path) == ["f"]


def test_without_hard_links_a_failed_write_removes_the_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EOPNOTSUPP, "fake: this file system has no hard links")

    real_fsync = os.fsync
    calls = []

    def second_fsync_fails(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:  # fake: the temp file synced, the in-place copy does not
            raise OSError(errno.EIO, "fake: fsync failed")
        real_fsync(fd)

    monkeypatch.setattr(os, "link", no_links)
    monkeypatch.setattr(os, "fsync", second_fsync_fails)
    with pytest.raises(OSError):
        write_atomic(tmp_path / "f", "x" * 100_000, overwrite=False)
    assert listing(tmp_path) == []


def test_read_only_file_system_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def erofs(*args: object, **kwargs: object) -> int:
        raise OSError(errno.EROFS, "fake: Read-only file system")

    monkeypatch.setattr(os, "open", erofs)
    target = tmp_path / "f"
    with pytest.raises(OSError) as info:
        write_atomic(target, "x", overwrite=True)
    assert info.value.errno == errno.EROFS
    assert info.value.filename == str(target)
    monkeypatch.undo()
    assert listing(tmp_path) == []


def _write_as_nobody(target: str, overwrite: bool, results: multiprocessing.queues.Queue) -> None:
    """In a forked child: drop root, then write (the code is already loaded, nothing to exec)."""
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
    try:
        write_atomic(Path(target), "new\n", overwrite=overwrite)
    except PermissionError as exc:
        results.put(("PermissionError", exc.filename))
    else:
        results.put(("written", None))


@pytest.mark.parametrize("overwrite", [False, True])
def test_read_only_directory_gives_an_error_and_leaves_nothing(
    tmp_path: Path, overwrite: bool
) -> None:
    """A real read-only directory. Root ignores directory permissions, so as root the write is
    made by a forked child that has dropped to the nobody user."""
    directory = tmp_path / "ro"
    directory.mkdir()
    target = directory / "vllm.yaml"
    if overwrite:
        target.write_text("old\n")
    directory.chmod(0o555)
    try:
        if os.geteuid() != 0:
            with pytest.raises(PermissionError) as info:
                write_atomic(target, "new\n", overwrite=overwrite)
            assert info.value.filename == str(target)
        else:
            if "fork" not in multiprocessing.get_all_start_methods():
                pytest.skip("needs fork to drop root privileges in a child")
            tmp_path.chmod(0o755)  # let nobody reach the directory
            ctx = multiprocessing.get_context("fork")
            results = ctx.Queue()
            child = ctx.Process(target=_write_as_nobody, args=(str(target), overwrite, results))
            child.start()
            child.join(timeout=60)
            assert child.exitcode == 0
            assert results.get(timeout=10) == ("PermissionError", str(target))
        assert listing(directory) == (["vllm.yaml"] if overwrite else [])
        if overwrite:
            assert target.read_text() == "old\n"
    finally:
        directory.chmod(0o755)


# ---------------------------------------------------------------------------------------------
# Concurrency

SIZE = 512 * 1024  # large enough that a torn write would be visible


def _content(writer: int) -> str:
    return f"writer {writer}\n" + chr(ord("a") + writer) * SIZE + "\nend\n"


def _overwriter(target: str, writer: int, rounds: int) -> None:
    for _ in range(rounds):
        write_atomic(Path(target), _content(writer), overwrite=True)


def _creator(target: str, writer: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait()
    try:
        write_atomic(Path(target), _content(writer), overwrite=False)
    except FileExistsError:
        sys.exit(17)
    sys.exit(0)


def _context() -> multiprocessing.context.BaseContext:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def test_concurrent_overwriters_leave_old_or_new_complete(tmp_path: Path) -> None:
    target = tmp_path / "knobs.env"
    old = "old complete file\n" * 1000
    target.write_text(old)
    complete = {old} | {_content(w) for w in range(4)}
    ctx = _context()
    writers = [ctx.Process(target=_overwriter, args=(str(target), w, 25)) for w in range(4)]
    for p in writers:
        p.start()
    seen = 0
    while any(p.is_alive() for p in writers):
        with open(target, encoding="utf-8") as f:
            text = f.read()
        assert text in complete, f"torn read: {len(text)} chars, starts {text[:20]!r}"
        seen += 1
    for p in writers:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert target.read_text() in complete
    assert listing(tmp_path) == ["knobs.env"], "temporary files left behind"
    assert seen > 0


@pytest.mark.parametrize("round_", range(10))
def test_racing_creators_exactly_one_wins(tmp_path: Path, round_: int) -> None:
    target = tmp_path / "vllm.yaml"
    ctx = _context()
    barrier = ctx.Barrier(6)
    writers = [ctx.Process(target=_creator, args=(str(target), w, barrier)) for w in range(6)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(timeout=60)
    codes = [p.exitcode for p in writers]
    assert sorted(codes) == [0] + [17] * 5, codes
    winner = codes.index(0)
    assert target.read_text() == _content(winner)
    assert listing(tmp_path) == ["vllm.yaml"], "temporary files left behind"


def test_threads_racing_to_create(tmp_path: Path) -> None:
    import threading

    target = tmp_path / "f"
    barrier = threading.Barrier(8)
    results: list[str] = []

    def create(writer: int) -> None:
        barrier.wait()
        try:
            write_atomic(target, _content(writer), overwrite=False)
            results.append(f"won {writer}")
        except FileExistsError:
            results.append("lost")

    threads = [threading.Thread(target=create, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if r.startswith("won")]
    assert len(winners) == 1 and results.count("lost") == 7
    assert target.read_text() == _content(int(winners[0].split()[1]))
    assert listing(tmp_path) == ["f"]
