"""The advisory ledger (tools/advisories/): every candidate commit decided, every id resolvable.

The ledger records, for each FlashInfer commit between releases that touches the FP4 paths
(tools/advisories/walk.py's filter), whether it is encoded in profiles/advisories.yaml, proposed
in tools/advisories/proposed.yaml, or dismissed with a reason. These tests keep the three files in
step: a proposed entry must parse as an advisory once its `trigger`/`symptom` keys (the schema the
lead is adding) are set aside, and the walk must list exactly the ledger's commits where the
FlashInfer snapshot is on this machine.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "tools" / "advisories"
MIRROR = Path("/work/.mirror/flashinfer-ai+flashinfer/repo")
TRIGGER_KEYS = {
    "ep_min",
    "tp_min",
    "experts_min",
    "concurrency_min",
    "model_arch",
    "activation",
    "autotune",
    "cuda_graphs",
    "depends_on",
    "env",
    "flag",
    "established_by",
    "source",
    "unconditional",
    "establishable",
}


def _load(name: str) -> ModuleType:
    path = HERE / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"fp4doctor_advisories_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ledger = _load("ledger")


def test_ledger_rows_are_decided_and_resolve() -> None:
    """Every row has a known decision; encoded/proposed ids exist in their files."""
    rows = ledger.read(HERE / "flashinfer.tsv")
    assert len(rows) > 500
    known = ledger.advisory_ids(ROOT / "profiles" / "advisories.yaml")
    proposed = ledger.advisory_ids(HERE / "proposed.yaml")
    assert ledger.unknown_ids(rows, known, proposed) == []
    assert not known & proposed, "a proposed id must not repeat an existing one"
    every = [r for name in ledger.LEDGERS for r in ledger.read(HERE / name)]
    assert ledger.unknown_ids(every, known, proposed) == []
    used = {r.advisory for r in every if r.decision == "proposed"}
    assert used == proposed, "every proposed advisory comes from a ledger row, and back"
    table = ledger.coverage(rows)
    reviewed = sum(int(str(t["reviewed"])) for t in table)
    assert reviewed <= sum(int(str(t["touching"])) for t in table)


def test_a_malformed_row_is_refused(tmp_path: Path) -> None:
    """A bad decision, or a dismissal without a reason, names the file and line."""
    text = (HERE / "flashinfer.tsv").read_text(encoding="utf-8").splitlines()
    for decision, reason in (("maybe", "a reason"), ("dismissed", "")):
        fields = text[1].split("\t")
        fields[6], fields[10] = decision, reason
        path = tmp_path / "x.tsv"
        path.write_text("\n".join([text[0], "\t".join(fields)]) + "\n", encoding="utf-8")
        with pytest.raises(ValueError, match=r"x\.tsv:2"):
            ledger.read(path)


def test_proposed_entries_parse_as_advisories() -> None:
    """proposed.yaml is advisories.yaml's shape, trigger included, plus `trigger_evidence` (and
    `symptom`), which are dropped on merging."""
    from fp4doctor.profile import advisories

    data = yaml.safe_load((HERE / "proposed.yaml").read_text(encoding="utf-8"))
    for entry in data["advisories"]:
        assert set(entry["trigger_evidence"]) <= TRIGGER_KEYS, entry["id"]
        assert entry["trigger_evidence"].get("established_by"), entry["id"]
    extra = ("trigger_evidence", "symptom")
    plain = [{k: v for k, v in e.items() if k not in extra} for e in data["advisories"]]
    text = yaml.safe_dump({"schema": advisories.SCHEMA, "advisories": plain}, sort_keys=False)
    parsed = advisories.parse(text, "proposed.yaml")
    assert len(parsed) == len(plain)
    known = ledger.advisory_ids(ROOT / "profiles" / "advisories.yaml")
    assert {r["id"] for r in data["revisions"]} <= known


def test_existing_triggers_name_existing_advisories() -> None:
    """triggers_existing.yaml keys are advisory ids, with schema keys and a source each."""
    data = yaml.safe_load((HERE / "triggers_existing.yaml").read_text(encoding="utf-8"))
    known = ledger.advisory_ids(ROOT / "profiles" / "advisories.yaml")
    covered = set(data["triggers"]) | set(data["unconditional_or_structured"])
    assert covered == known, "every advisory has a trigger or is said to need none"
    for ident, trigger in data["triggers"].items():
        assert set(trigger) <= TRIGGER_KEYS, ident
        assert trigger.get("source") and trigger.get("established_by"), ident


@pytest.mark.skipif(not MIRROR.is_dir(), reason="needs the FlashInfer git snapshot (fetch)")
def test_the_walk_and_the_ledger_agree() -> None:
    """walk.py over the snapshot lists exactly the ledger's commits (not its wheel rows)."""
    walk = _load("walk")
    found = {c.sha for c in walk.walk(MIRROR)}
    have = {r.sha for r in ledger.read(HERE / "flashinfer.tsv") if r.sha != "wheel"}
    assert found == have


def test_flashinfer_releases_past_the_snapshot_are_file_level() -> None:
    """After v0.6.18rc7 the FlashInfer ledger goes on from the wheels: `sha` 'wheel', no message."""
    rows = ledger.read(HERE / "flashinfer.tsv")
    wheel = [r for r in rows if r.sha == "wheel"]
    assert wheel and all(r.review != "message" for r in wheel)
    first = next(i for i, r in enumerate(rows) if r.sha == "wheel")
    assert all(r.sha == "wheel" for r in rows[first:]), "wheel rows follow the git rows"
    assert wheel[0].range == "0.6.18rc7..0.6.18" and wheel[-1].range.endswith("..0.7.4")


def test_the_filter_keeps_shipped_fp4_files_only() -> None:
    """walk.topics_of: shipped FP4/MoE/JIT files count; tests, docs and attention do not."""
    walk = _load("walk")
    assert walk.topics_of(["csrc/trtllm_fused_moe_kernel_launcher.cu"]) == ("moe",)
    assert walk.topics_of(["flashinfer/gemm/gemm_base.py", "tests/gemm/test_mm_fp4.py"]) == (
        "fp4-gemm",
    )
    assert walk.topics_of(["flashinfer/jit/core.py"]) == ("jit",)
    assert walk.topics_of(["tests/moe/test_trtllm_gen_fused_moe.py", "docs/index.rst"]) == ()
    assert walk.topics_of(["flashinfer/attention/prefill.py"]) == ()


def test_arch_readers_find_build_lists_and_checks() -> None:
    """archs.py reads supported_major_versions per function and the C++ major checks."""
    archs = _load("archs")
    source = (
        "def gen_x_module():\n"
        "    return gen_jit_spec('x', nvcc_flags=f(supported_major_versions=[10, 12]))\n"
        "def other():\n    return 1\n"
    )
    assert list(archs.module_archs(source)) == [("gen_x_module", "[10, 12]")]
    cpp = 'int a = 1;\n  TVM_FFI_ICHECK_EQ(major, 10) << "needs 10.x";\n// major == 12\n'
    assert list(archs.arch_checks(cpp)) == [(2, 'TVM_FFI_ICHECK_EQ(major, 10) << "needs 10.x";')]


def test_wheel_ledgers_are_file_level() -> None:
    """sglang.tsv and vllm.tsv (wheel_walk.py) hold one row per changed FP4 file, `sha` 'wheel'."""
    for name, rows_min in (("sglang.tsv", 150), ("vllm.tsv", 300)):
        rows = ledger.read(HERE / name)
        assert len(rows) > rows_min, name
        assert {r.sha for r in rows} == {"wheel"}, name
        assert all(r.review != "message" for r in rows), "a wheel has no commit message"
    vllm_rows = ledger.read(HERE / "vllm.tsv")
    assert vllm_rows[0].range.startswith("0.9.0") and vllm_rows[-1].range.endswith("..0.34.0")
    assert any(r.decision == "encoded" for r in vllm_rows)
