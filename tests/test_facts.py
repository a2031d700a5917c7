"""Facts as data: every fixture round-trips, bad files fail clearly, redaction removes identity."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import HOSTS_DIR, fixture_host_names, load_fixture_host
from hypothesis import given
from hypothesis import strategies as st

from fp4doctor import facts
from fp4doctor.facts import FactsError


def real_fixture_names() -> set[str]:
    """Fixtures the README's table marks **real** (captured on a real host)."""
    readme = (HOSTS_DIR / "README.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([^`]+)\.json` \| \*\*real\*\* \|", readme, re.M))


# --- the fixture hosts -------------------------------------------------------------------------


def test_all_required_fixture_hosts_exist() -> None:
    required = {
        "b200", "b200-vllm-0.33", "gb200", "b300", "thor", "rtx5090", "gb10", "h100", "l40s",
        "a100", "cpu", "nvml-mismatch", "mixed", "b200-no-flashinfer", "b200-old-cudnn",
        "b200-no-nvcc-no-cubin",
    }  # fmt: skip
    assert required <= set(fixture_host_names())


@pytest.mark.parametrize("name", fixture_host_names())
def test_fixture_round_trips_byte_for_byte(name: str) -> None:
    path = HOSTS_DIR / f"{name}.json"
    host = facts.load(path)
    assert facts.loads(facts.dumps(host)) == host
    assert facts.dumps(host) == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", fixture_host_names())
def test_fixture_says_whether_it_is_synthetic(name: str) -> None:
    host = load_fixture_host(name)
    if name in real_fixture_names():
        assert host.synthetic is None
    else:
        assert host.synthetic and len(host.synthetic) > 40


@pytest.mark.parametrize("name", fixture_host_names())
def test_fixture_is_consistent(name: str) -> None:
    host = load_fixture_host(name)
    assert [gpu.index for gpu in host.gpus] == list(range(len(host.gpus)))
    if host.gpus:
        assert host.nvml.status == facts.NVML_OK
        assert host.nvml.driver_version and host.nvml.cuda_driver_version
    else:
        assert host.nvml.status != facts.NVML_OK and host.nvml.fix
    assert all(key == facts.canonical_name(key) for key in host.packages.versions)
    if "torch" not in host.packages.versions:
        assert host.packages.torch_cuda is None


def test_fixture_readme_lists_every_fixture() -> None:
    readme = (HOSTS_DIR / "README.md").read_text(encoding="utf-8")
    for name in fixture_host_names():
        assert f"`{name}.json`" in readme
    assert "cpu" in real_fixture_names()


def test_fixture_host_helper(fixture_host: Any) -> None:
    b200 = fixture_host("b200")
    assert {gpu.cc for gpu in b200.gpus} == {100}
    assert b200.packages.version("flashinfer-python") == "0.6.1"
    assert b200.cudnn.frontend.version_text == "9.14.0"
    assert [gpu.cc for gpu in fixture_host("mixed").gpus] == [100, 90]
    assert fixture_host("nvml-mismatch").nvml.status == facts.NVML_DRIVER_MISMATCH
    assert fixture_host("cpu").nvml.status == facts.NVML_LIBRARY_NOT_FOUND


# --- bad files ---------------------------------------------------------------------------------


def write(tmp_path: Path, data: Any, raw: str | None = None) -> Path:
    path = tmp_path / "host.json"
    path.write_text(raw if raw is not None else json.dumps(data), encoding="utf-8")
    return path


def b200_data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HOSTS_DIR / "b200.json").read_text(encoding="utf-8"))
    return data


def test_malformed_json_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, None, raw='{"schema_version": 1,\n  "gpus": [}')
    with pytest.raises(FactsError, match=r"host\.json: not valid JSON: .* \(line 2\)") as info:
        facts.load(path)
    assert str(path) in str(info.value)


def test_unknown_key_names_the_file_and_the_key(tmp_path: Path) -> None:
    data = b200_data()
    data["nvml"]["temperature"] = 40
    path = write(tmp_path, data)
    with pytest.raises(FactsError, match=r"unknown key 'nvml\.temperature'") as info:
        facts.load(path)
    assert str(path) in str(info.value)


def test_unknown_top_level_key(tmp_path: Path) -> None:
    data = b200_data()
    data["gpu_count"] = 8
    with pytest.raises(FactsError, match=r"unknown key 'gpu_count'"):
        facts.load(write(tmp_path, data))


@pytest.mark.parametrize(
    ("edit", "key", "wanted"),
    [
        (lambda d: d["gpus"][3].__setitem__("cc_major", "10"), "gpus[3].cc_major", "an integer"),
        (lambda d: d["gpus"][0].__setitem__("cc_minor", True), "gpus[0].cc_minor", "an integer"),
        (lambda d: d.__setitem__("gpus", {}), "gpus", "an array"),
        (
            lambda d: d["packages"]["versions"].__setitem__("torch", 2.9),
            "packages.versions.torch",
            "a string",
        ),
        (lambda d: d["cudnn"].__setitem__("frontend", "9.14"), "cudnn.frontend", "an object"),
        (lambda d: d["nvml"].__setitem__("status", None), "nvml.status", "a string"),
    ],
)
def test_wrong_type_names_the_file_and_the_key(
    tmp_path: Path, edit: Any, key: str, wanted: str
) -> None:
    data = b200_data()
    edit(data)
    path = write(tmp_path, data)
    with pytest.raises(FactsError) as info:
        facts.load(path)
    message = str(info.value)
    assert str(path) in message
    assert f"'{key}' should be {wanted}" in message


def test_future_schema_version_asks_for_an_upgrade(tmp_path: Path) -> None:
    data = b200_data()
    data["schema_version"] = facts.SCHEMA_VERSION + 1
    path = write(tmp_path, data)
    with pytest.raises(FactsError, match="schema_version 2 is newer") as info:
        facts.load(path)
    assert str(path) in str(info.value)
    assert "upgrade fp4doctor" in str(info.value)


@pytest.mark.parametrize("version", [None, "1", 0, True])
def test_bad_schema_version(tmp_path: Path, version: Any) -> None:
    data = b200_data()
    data["schema_version"] = version
    with pytest.raises(FactsError, match="schema_version"):
        facts.load(write(tmp_path, data))


def test_top_level_must_be_an_object(tmp_path: Path) -> None:
    with pytest.raises(FactsError, match="expected a JSON object at the top, got an array"):
        facts.load(write(tmp_path, [1, 2]))


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(FactsError, match="cannot read"):
        facts.load(tmp_path / "absent.json")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(FactsError, match=r"binary\.json: not UTF-8"):
        facts.load(binary)


def test_missing_keys_take_their_defaults() -> None:
    host = facts.loads('{"schema_version": 1}')
    assert host == facts.HostFacts()


# --- redaction ---------------------------------------------------------------------------------


def test_redact_removes_uuid_hostname_and_home() -> None:
    host = load_fixture_host("rtx5090")
    assert host.hostname and host.gpus[0].uuid and "/home/alice" in facts.dumps(host)
    clean = facts.redact(host)
    text = facts.dumps(clean)
    assert clean.hostname is None
    assert all(gpu.uuid is None for gpu in clean.gpus)
    assert "/home/alice" not in text
    assert "GPU-" not in text
    assert (
        clean.cudnn.frontend.path
        == "~/venvs/vllm/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9"
    )
    assert clean.gpus[0].cc == host.gpus[0].cc  # everything else is kept


def test_redact_removes_the_given_home_and_uuids_in_cuda_visible_devices() -> None:
    host = facts.HostFacts(
        hostname="node-7",
        cuda_visible_devices="GPU-8d0d2a3c-1a2b,GPU-11112222",
        env={
            "CUDA_VISIBLE_DEVICES": "GPU-8d0d2a3c-1a2b,GPU-11112222",
            "LD_LIBRARY_PATH": "/srv/users/bob/cuda/lib64",
        },
        toolchain=facts.ToolchainFacts(nvcc_path="/srv/users/bob/cuda/bin/nvcc"),
    )
    clean = facts.redact(host, home="/srv/users/bob")
    assert clean.cuda_visible_devices == "GPU-<redacted>,GPU-<redacted>"
    assert clean.env["CUDA_VISIBLE_DEVICES"] == clean.cuda_visible_devices
    assert clean.env["LD_LIBRARY_PATH"] == "~/cuda/lib64"
    assert clean.toolchain.nvcc_path == "~/cuda/bin/nvcc"
    assert "bob" not in facts.dumps(clean) and "node-7" not in facts.dumps(clean)


@pytest.mark.parametrize("name", fixture_host_names())
def test_redacted_fixture_is_still_valid_facts(name: str) -> None:
    clean = facts.redact(load_fixture_host(name))
    assert facts.loads(facts.dumps(clean)) == clean
    assert clean.hostname is None


# --- the model's small helpers -----------------------------------------------------------------


def test_version_helpers() -> None:
    assert facts.CudnnLibrary(version=91002).version_text == "9.10.2"
    assert facts.CudnnLibrary(version=92800).version_text == "9.28.0"
    assert facts.CudnnLibrary().version_text is None
    gpu = facts.Gpu(index=0, name="NVIDIA GB10", cc_major=12, cc_minor=1)
    assert (gpu.cc, gpu.cc_text) == (121, "12.1")
    assert facts.canonical_name("Flashinfer_Python") == "flashinfer-python"
    assert facts.PackageFacts(versions={"tensorrt-llm": "1.2"}).version("tensorrt_llm") == "1.2"


text = st.text(max_size=12)
optional_text = st.none() | text
gpus = st.builds(
    facts.Gpu,
    index=st.integers(0, 7),
    name=text,
    cc_major=st.integers(0, 12),
    cc_minor=st.integers(0, 9),
    memory_total_mib=st.none() | st.integers(0, 300_000),
    uuid=optional_text,
    nvml_index=st.none() | st.integers(0, 7),
)
libraries = st.builds(
    facts.CudnnLibrary,
    path=optional_text,
    version=st.none() | st.integers(0, 99999),
    origin=optional_text,
    error=optional_text,
)
hosts = st.builds(
    facts.HostFacts,
    hostname=optional_text,
    synthetic=optional_text,
    nvml=st.builds(facts.NvmlFacts, status=text, error=optional_text, driver_version=optional_text),
    gpus=st.lists(gpus, max_size=3),
    cuda_visible_devices=optional_text,
    packages=st.builds(
        facts.PackageFacts,
        versions=st.dictionaries(text, text, max_size=3),
        torch_cuda=optional_text,
        errors=st.dictionaries(text, text, max_size=2),
    ),
    cudnn=st.builds(facts.CudnnFacts, frontend=libraries, torch=st.none() | libraries),
    toolchain=st.builds(
        facts.ToolchainFacts,
        nvcc_path=optional_text,
        errors=st.dictionaries(text, text, max_size=2),
    ),
    env=st.dictionaries(text, text, max_size=3),
    probe_errors=st.dictionaries(text, text, max_size=2),
)


@given(hosts)
def test_any_facts_round_trip(host: facts.HostFacts) -> None:
    assert facts.loads(facts.dumps(host)) == host


@pytest.mark.parametrize(
    ("encoded", "text"), [(91002, "9.10.2"), (92800, "9.28.0"), (8907, "8.9.7"), (8600, "8.6.0")]
)
def test_cudnn_versions_decode_in_their_own_encoding(encoded: int, text: str) -> None:
    from fp4doctor.facts import cudnn_version_text

    assert cudnn_version_text(encoded) == text


def test_a_check_report_given_as_facts_says_what_it_is(tmp_path: Path) -> None:
    # Once answered "schema_version 2 is newer than this fp4doctor understands; upgrade".
    from click.testing import CliRunner

    from fp4doctor.cli import main

    runner = CliRunner()
    report = runner.invoke(main, ["check", "--facts", str(HOSTS_DIR / "b200.json"), "--no-engine",
                                  "--json"])  # fmt: skip
    path = write(tmp_path, None, report.stdout)
    result = runner.invoke(main, ["check", "--facts", str(path), "--no-engine"])
    assert result.exit_code == 3
    (line,) = result.stderr.strip().splitlines()
    assert "a report (`fp4doctor check --json`), not a facts snapshot" in line
    assert "upgrade" not in line
