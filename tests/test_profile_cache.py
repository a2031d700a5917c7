"""The parsed-profile cache (fp4doctor/cache.py): used while current, ignored otherwise,
never trusted from a directory or file another user could write, never in the way."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fp4doctor
from fp4doctor import cache, profile
from fp4doctor.profile.yamlnode import ProfileError


class Builds:
    """A build function for `cache.cached` that counts its calls (what a parse would cost)."""

    def __init__(self, value: object, read: list[str] | None = None) -> None:
        self.value, self.read, self.calls = value, read or [], 0

    def __call__(self) -> tuple[object, list[str]]:
        self.calls += 1
        return self.value, self.read


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(where))
    return where


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text("schema: 1\n", encoding="utf-8")
    return path


def entries(where: Path) -> list[Path]:
    return sorted(p for p in where.iterdir() if not p.name.startswith("."))


def test_a_current_entry_is_read_instead_of_built(cache_dir: Path, source: Path) -> None:
    build = Builds({"parsed": [1, 2, 3]})
    assert cache.cached("profile", str(source), build) == {"parsed": [1, 2, 3]}
    assert cache.cached("profile", str(source), build) == {"parsed": [1, 2, 3]}
    assert build.calls == 1
    [entry] = entries(cache_dir)
    assert entry.stat().st_mode & 0o777 == 0o600
    assert cache_dir.stat().st_mode & 0o777 == 0o700


def test_a_changed_source_is_built_again_even_at_the_same_size_and_time(
    cache_dir: Path, source: Path
) -> None:
    """Content decides: a file rewritten within one tick of the file system's clock, at the
    same size (here: its modification time put back as it was), is still a new file."""
    build = Builds("first")
    cache.cached("profile", str(source), build)
    before = source.stat()
    source.write_text("schema: 2\n", encoding="utf-8")
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    build.value = "second"
    assert cache.cached("profile", str(source), build) == "second"
    assert build.calls == 2


def test_an_entry_under_another_sources_name_is_not_read(
    cache_dir: Path, source: Path, tmp_path: Path
) -> None:
    """An entry's name is a checksum of its source's path; the entry keeps the path itself, so
    one that two sources would name alike is read for its own source only."""
    other = tmp_path / "other.yaml"
    other.write_text("schema: 1\n", encoding="utf-8")  # the same content as `source`
    cache.cached("profile", str(source), Builds("source's"))
    [mine] = entries(cache_dir)
    cache.cached("profile", str(other), Builds("other's"))
    [theirs] = [p for p in entries(cache_dir) if p != mine]
    theirs.write_bytes(mine.read_bytes())  # as if the two names were one
    build = Builds("other's, again")
    assert cache.cached("profile", str(other), build) == "other's, again"
    assert build.calls == 1


def test_a_changed_included_file_is_built_again(
    cache_dir: Path, source: Path, tmp_path: Path
) -> None:
    module = tmp_path / "module.yaml"
    module.write_text("a: 1\n", encoding="utf-8")
    build = Builds("first", [str(module)])
    cache.cached("profile", str(source), build)
    module.write_text("a: 2\n", encoding="utf-8")
    build.value = "second"
    assert cache.cached("profile", str(source), build) == "second"
    module.unlink()  # a file read that is gone: built again (and then not kept)
    build.value = "third"
    assert cache.cached("profile", str(source), build) == "third"
    assert build.calls == 3


def test_other_code_is_built_again(
    cache_dir: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry written by other code (another fp4doctor, an edited kind, another PyYAML) is
    not read: the code's fingerprint is part of the entry."""
    build = Builds("old code")
    cache.cached("profile", str(source), build)
    monkeypatch.setattr(cache, "_code", lambda: ("another fp4doctor",))
    build.value = "new code"
    assert cache.cached("profile", str(source), build) == "new code"
    assert build.calls == 2


@pytest.mark.parametrize(
    "damage", [b"", b"not a pickle", pickle.dumps(("wrong", "shape")), pickle.dumps(None)]
)
def test_a_damaged_entry_is_built_again_and_replaced(
    cache_dir: Path, source: Path, damage: bytes
) -> None:
    build = Builds("value")
    cache.cached("profile", str(source), build)
    [entry] = entries(cache_dir)
    entry.write_bytes(damage)
    assert cache.cached("profile", str(source), build) == "value"
    assert cache.cached("profile", str(source), build) == "value"
    assert build.calls == 2  # the second build replaced the damaged entry


def test_an_entry_another_user_could_write_is_not_read(cache_dir: Path, source: Path) -> None:
    """A pickle runs code when loaded: a group- or world-writable entry or directory is not
    trusted, and nothing is written into such a directory."""
    build = Builds("value")
    cache.cached("profile", str(source), build)
    [entry] = entries(cache_dir)
    entry.chmod(0o622)
    cache.cached("profile", str(source), build)
    assert build.calls == 2
    entry.unlink()
    cache_dir.chmod(0o777)
    cache.cached("profile", str(source), build)
    cache.cached("profile", str(source), build)
    assert build.calls == 4
    assert entries(cache_dir) == []


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_an_entry_another_user_owns_is_not_read(cache_dir: Path, source: Path) -> None:
    build = Builds("value")
    cache.cached("profile", str(source), build)
    [entry] = entries(cache_dir)
    os.chown(entry, 65534, 65534)
    cache.cached("profile", str(source), build)
    assert build.calls == 2


@pytest.mark.parametrize("what", ["directory", "symlink", "fifo"])
def test_a_name_that_is_not_a_regular_file_is_never_replaced(
    cache_dir: Path, source: Path, tmp_path: Path, what: str
) -> None:
    build = Builds("value")
    cache.cached("profile", str(source), build)
    [entry] = entries(cache_dir)
    entry.unlink()
    target = tmp_path / "elsewhere"
    target.write_text("keep me\n", encoding="utf-8")
    if what == "directory":
        entry.mkdir()
    elif what == "symlink":
        entry.symlink_to(target)
    else:
        os.mkfifo(entry)
    assert cache.cached("profile", str(source), build) == "value"
    assert cache.cached("profile", str(source), build) == "value"
    assert build.calls == 3
    assert entry.is_symlink() if what == "symlink" else not entry.is_file()
    assert target.read_text(encoding="utf-8") == "keep me\n"


def test_an_empty_cache_dir_setting_turns_the_cache_off(
    tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.CACHE_DIR_ENV, "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    build = Builds("value")
    cache.cached("profile", str(source), build)
    cache.cached("profile", str(source), build)
    assert build.calls == 2
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


def test_the_default_directory_follows_xdg_then_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(cache.CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.directory() == tmp_path / "xdg" / "fp4doctor"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.directory() == tmp_path / "home" / ".cache" / "fp4doctor"


def test_a_cache_that_cannot_be_made_is_no_cache(
    tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(blocker / "cache"))
    build = Builds("value")
    assert cache.cached("profile", str(source), build) == "value"
    assert cache.cached("profile", str(source), build) == "value"
    assert build.calls == 2


def test_what_the_build_raises_is_raised_and_not_kept(cache_dir: Path, source: Path) -> None:
    def broken() -> tuple[object, list[str]]:
        raise ProfileError(f"{source}:1: 'schema' is 9; this fp4doctor reads schema 1")

    for _ in range(2):
        with pytest.raises(ProfileError, match="schema"):
            cache.cached("profile", str(source), broken)
    assert not cache_dir.exists() or entries(cache_dir) == []


def test_a_cached_shipped_profile_equals_a_fresh_parse(cache_dir: Path) -> None:
    """The real thing: every shipped profile and the advisories, parsed, kept, read back."""
    for target in profile.builtin_names():
        path = str(profile.builtin_dir() / f"{target}.yaml")
        fresh, included = profile._parse(path)
        kept = cache.cached("profile", path, lambda: profile._parse(path))  # noqa: B023
        read = cache.cached("profile", path, lambda: pytest.fail("parsed again"))  # type: ignore[arg-type,return-value]
        assert kept == fresh and read == fresh, target
        assert all(Path(p).is_file() for p in included)
    assert len(entries(cache_dir)) == len(profile.builtin_names())


def run_check(where: str) -> subprocess.CompletedProcess[str]:
    """`fp4doctor check --no-smoke --target vllm` in a fresh interpreter with the cache in
    `where` ("": off), then whether it imported the YAML library (on stderr)."""
    code = (
        "import sys\n"
        "from fp4doctor import cli\n"
        "try:\n"
        "    cli.main(['check', '--no-smoke', '--target', 'vllm'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('yaml imported:', 'yaml' in sys.modules, file=sys.stderr)\n"
    )
    env = {**os.environ, cache.CACHE_DIR_ENV: where}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_check_reads_the_profile_from_the_cache_on_its_second_run(tmp_path: Path) -> None:
    """End to end: the second run's report is the first's, and it never imports PyYAML."""
    first, second = run_check(str(tmp_path / "c")), run_check(str(tmp_path / "c"))
    assert "yaml imported: True" in first.stderr
    assert "yaml imported: False" in second.stderr, second.stderr
    assert second.stdout == first.stdout and second.stdout
    off = run_check("")  # FP4DOCTOR_CACHE_DIR= : the cache is off
    assert off.stdout == first.stdout and "yaml imported: True" in off.stderr


def test_a_source_that_is_not_a_regular_file_is_not_read_for_the_cache(
    cache_dir: Path, tmp_path: Path
) -> None:
    """A FIFO with no writer (reading it would hang) or a device: the cache reads nothing from
    it and keeps nothing for it; what the build says about it stands."""
    fifo = tmp_path / "rules.yaml"
    os.mkfifo(fifo)
    for source in (str(fifo), "/dev/zero"):
        build = Builds("the parser's own refusal")
        assert cache.cached("profile", source, build) == "the parser's own refusal"
    assert not cache_dir.exists() or entries(cache_dir) == []


# --- what the code's fingerprint covers ------------------------------------------------------

PARSE_EVERY_SHIPPED_FILE = """
import json, sys
import fp4doctor
from fp4doctor import profile
for name in profile.builtin_names():
    profile._parse(str(profile.builtin_dir() / f"{name}.yaml"))
path = str(profile.builtin_dir() / "advisories.yaml")
profile.advisories.parse(profile._read(path), path)
print(json.dumps(sorted(
    m.__file__ for n, m in sys.modules.items()
    if (n == "fp4doctor" or n.startswith("fp4doctor.")) and getattr(m, "__file__", None)
)))
"""


def test_the_fingerprint_covers_every_module_a_parse_imports(tmp_path: Path) -> None:
    """Each fp4doctor module that parsing every shipped profile and the advisories imports (in a
    fresh interpreter, the cache off) is in the fingerprint: versions.py's ranges, facts.py's
    types and the text reader shape the parsed objects as much as profile/ does."""
    env = {**os.environ, cache.CACHE_DIR_ENV: ""}
    p = subprocess.run(
        [sys.executable, "-c", PARSE_EVERY_SHIPPED_FILE],
        capture_output=True, text=True, env=env, timeout=120, check=True, cwd=tmp_path,
    )  # fmt: skip
    imported = {Path(f).resolve() for f in json.loads(p.stdout)}
    fingerprinted = set(cache.code_files())
    assert {Path(fp4doctor.__file__).resolve().parent / "versions.py"} <= imported
    assert sorted(imported - fingerprinted) == []


def test_an_edit_outside_the_profile_package_is_built_again(tmp_path: Path) -> None:
    """End to end, in a copy of the checkout: an edit of versions.py, fp4doctor's version
    unchanged, makes the next run parse again (a new entry: a new inode) rather than reuse
    what the old code built. A first version fingerprinted only fp4doctor/profile/."""
    package = Path(fp4doctor.__file__).resolve().parent
    tree = tmp_path / "tree"
    shutil.copytree(package, tree / "fp4doctor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(profile.builtin_dir(), tree / "profiles")
    where = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(tree), cache.CACHE_DIR_ENV: str(where)}
    load = "from fp4doctor import profile; profile.load('vllm')"

    def entry_inode() -> int:
        subprocess.run([sys.executable, "-c", load], env=env, timeout=120, check=True, cwd=tmp_path)
        [entry] = where.glob("profile-*.pickle")
        return entry.stat().st_ino

    first = entry_inode()
    assert entry_inode() == first  # a hit: the entry is not rewritten
    with (tree / "fp4doctor" / "versions.py").open("a", encoding="utf-8") as f:
        f.write("\n# an edit that changes what a range means would look the same from here\n")
    assert entry_inode() != first


# --- sudo -E: another user's home ------------------------------------------------------------


@pytest.mark.parametrize("how", ["geteuid", "chown"])
def test_no_directory_is_made_in_another_users_home(
    tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """`sudo -E fp4doctor check` runs as root with the user's HOME: a root-owned ~/.cache there
    would lock the user out of their own cache. fake (geteuid): this process is made to look
    like another user to the cache; real (chown, as root): the home belongs to nobody."""
    home = tmp_path / "home"
    home.mkdir()
    if how == "geteuid":
        monkeypatch.setattr(cache.os, "geteuid", lambda: os.getuid() + 1)
    elif os.getuid() != 0:
        pytest.skip("only root can give a directory to another user")
    else:
        os.chown(home, 65534, 65534)
    monkeypatch.delenv(cache.CACHE_DIR_ENV)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    build = Builds("value")
    assert cache.cached("profile", str(source), build) == "value"
    assert cache.cached("profile", str(source), build) == "value"
    assert build.calls == 2  # no cache, and no error
    assert list(home.iterdir()) == []
