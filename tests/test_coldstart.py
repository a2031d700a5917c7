"""Cold start (fp4doctor/coldstart, profiles/coldstart.yaml): will the first start-up compile
FlashInfer kernels or autotune the chosen backend?

The three RTX 5090 fixtures carry flashinfer#4110's stack (vLLM 0.26.0, FlashInfer 0.6.14):
with flashinfer-jit-cache (JIT ready), without it and with nvcc (will-build, naming the
modules), with FLASHINFER_DISABLE_JIT=1 (cannot-build). The autotune state is checked against
each vLLM release's rule and the variables set; the probe reads real directories in tmp_path.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from fp4doctor import facts, profile
from fp4doctor.cli import main
from fp4doctor.coldstart import rules
from fp4doctor.coldstart import verdict as coldstart
from fp4doctor.coldstart.probe import autotune_root, probe_cold_start, rule_modules
from fp4doctor.doctor import Question, diagnose
from fp4doctor.fleet import metrics, node, view
from fp4doctor.fleet.group import build

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
FLASHINFER_DATA = Path(__file__).parents[1] / "tools" / "extract" / "data" / "flashinfer.json"


# The rtx5090 fixtures' FlashInfer 0.6.14 MoE kernels have autotuner bugs whose trigger nothing
# settles here, so the choice would avoid them; these tests are about FlashInfer's MoE module.
FI_MOE = "moe:flashinfer-cutlass-moe"


def report(name: str, **question: object):  # type: ignore[no-untyped-def]
    return diagnose(Question(facts_file=str(HOSTS / f"{name}.json"), **question))  # type: ignore[arg-type]


def cold(name: str, family: str = "linear", **question: object) -> coldstart.ColdStart:
    part = next(p for p in report(name, **question).families if p.family == family)
    assert part.cold_start is not None
    return part.cold_start


def judge(h: facts.HostFacts, **kw: object) -> coldstart.ColdStart:
    """The judgement for the fixtures' stack (vLLM 0.26.0, the dense GEMM on flashinfer-cutlass)
    unless `kw` says otherwise."""
    args: dict[str, object] = {"target": "vllm", "engine_version": "0.26.0", "family": "linear",
                               "backend": "flashinfer-cutlass", **kw}  # fmt: skip
    return coldstart.judge(h, **args)  # type: ignore[arg-type]


def env_command(host_name: str, *args: str) -> tuple[int, str, str]:
    out = CliRunner().invoke(main, ["env", "--facts", str(HOSTS / f"{host_name}.json"), *args])
    return out.exit_code, out.stdout, out.stderr


def host(name: str, **env: str) -> facts.HostFacts:
    h = facts.load(HOSTS / f"{name}.json")
    return dataclasses.replace(h, env={**h.env, **env})


# --- the three hosts of the issue --------------------------------------------------------------


def test_a_jit_cache_matching_cuda_and_arch_is_ready() -> None:
    for family, module in (("linear", "fp4_gemm_cutlass_sm120"), ("moe", "fused_moe_120")):
        c = cold("rtx5090-jit-cache", family, prefer=FI_MOE)
        assert c.jit.state == "ready", c.jit
        assert c.jit.modules == (f"{module} (prebuilt in flashinfer-jit-cache 0.6.14+cu130)",)


def test_without_jit_cache_and_with_nvcc_the_modules_are_named_and_built() -> None:
    for family, module in (("linear", "fp4_gemm_cutlass_sm120"), ("moe", "fused_moe_120")):
        c = cold("rtx5090-cold", family, prefer=FI_MOE)
        assert (c.jit.state, c.jit.modules) == ("will-build", (module,))
        assert "nvcc 13.0" in c.jit.reason


def test_disable_jit_with_the_modules_missing_cannot_build() -> None:
    c = cold("rtx5090-no-jit")
    assert (c.jit.state, c.jit.modules) == ("cannot-build", ("fp4_gemm_cutlass_sm120",))
    assert "FLASHINFER_DISABLE_JIT" in c.jit.reason and "MissingJITCacheError" in c.jit.reason


def test_disable_jit_does_not_matter_when_the_modules_are_prebuilt() -> None:
    h = host("rtx5090-jit-cache", FLASHINFER_DISABLE_JIT="1")
    c = judge(h)
    assert c.jit.state == "ready"


def test_flashinfer_reads_any_non_empty_value_as_disabled() -> None:
    """core.py tests `os.environ.get("FLASHINFER_DISABLE_JIT")`: "0" disables too."""
    h = host("rtx5090-cold", FLASHINFER_DISABLE_JIT="0")
    c = judge(h)
    assert c.jit.state == "cannot-build"


def test_a_jit_cache_for_another_arch_or_cuda_does_not_count() -> None:
    base = facts.load(HOSTS / "rtx5090-jit-cache.json")
    assert base.cold_start is not None
    package = base.cold_start.prebuilt[0]
    sm100 = dataclasses.replace(
        package,
        archs={m: dataclasses.replace(a, sass=["sm_100a"]) for m, a in package.archs.items()},
    )
    cu129 = dataclasses.replace(package, version="0.6.14+cu129")
    for other, words in ((sm100, "no GPU code for SM 120"), (cu129, "another CUDA")):
        h = dataclasses.replace(
            base, cold_start=dataclasses.replace(base.cold_start, prebuilt=[other])
        )
        c = judge(h)
        assert c.jit.state == "will-build" and words in c.jit.reason, c.jit


def test_a_module_built_in_the_workspace_for_this_version_and_arch_is_ready() -> None:
    base = facts.load(HOSTS / "rtx5090-cold.json")
    assert base.cold_start is not None
    for key, state in (("0.6.14/120f", "ready"), ("0.6.13/120f", "will-build"),
                       ("0.6.14/100a", "will-build")):  # fmt: skip
        built = {key: ["fp4_gemm_cutlass_sm120"]}
        h = dataclasses.replace(base, cold_start=dataclasses.replace(base.cold_start, built=built))
        c = judge(h)
        assert c.jit.state == state, key


def test_no_nvcc_means_cannot_build() -> None:
    h = facts.load(HOSTS / "rtx5090-cold.json")
    h = dataclasses.replace(h, toolchain=dataclasses.replace(h.toolchain, nvcc_path=None))
    c = judge(h)
    assert c.jit.state == "cannot-build" and "no nvcc" in c.jit.reason


def test_a_snapshot_from_before_the_cold_start_probe_loads_and_says_unknown() -> None:
    c = cold("rtx5090")  # no cold_start key: an older snapshot
    assert c.jit.state == "unknown" and "before fp4doctor probed" in c.jit.reason
    assert facts.load(HOSTS / "rtx5090.json").cold_start is None


def test_backends_that_compile_nothing_and_cute_dsl() -> None:
    h = facts.load(HOSTS / "b200-vllm-0.33.json")
    for backend, state in (("marlin", "ready"), ("flashinfer-cudnn", "ready"),
                           ("flashinfer-cutedsl", "will-build")):  # fmt: skip
        c = judge(h, engine_version="0.33.0", backend=backend)
        assert c.jit.state == state, backend


# --- autotune, release by release -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "state"),
    [
        ("0.10.0", "off"),  # no kernel_warmup.flashinfer_autotune
        ("0.10.1", "off"),  # SM 10.0 only: the RTX 5090 is 12.0
        ("0.15.1", "will-tune"),  # every start, no knob, no cache
        ("0.23.0", "will-tune"),  # the persistent cache switched off
        ("0.26.0", "will-tune"),  # a cache, but none written yet
    ],
)
def test_autotune_follows_the_engine_release(version: str, state: str) -> None:
    c = judge(host("rtx5090-cold"), engine_version=version)
    assert c.autotune.state == state, c.autotune


def test_an_autotune_cache_for_this_flashinfer_and_gpu_is_found() -> None:
    c = cold("rtx5090-jit-cache")
    assert c.autotune.state == "cached"
    assert c.autotune.cache and c.autotune.cache.endswith("/autotune_configs.json")


def test_the_single_rank_cache_of_0_26_is_not_kept_with_two_ranks() -> None:
    c = judge(host("rtx5090-jit-cache"), ranks=2)
    assert c.autotune.state == "will-tune" and "2 ranks" in c.autotune.reason


def test_an_autotune_cache_for_another_gpu_or_flashinfer_is_not_taken() -> None:
    base = facts.load(HOSTS / "rtx5090-jit-cache.json")
    assert base.cold_start is not None
    (f,) = base.cold_start.autotune_files
    for meta in ({"gpu": "NVIDIA B200"}, {"flashinfer_version": "0.6.13"}):
        other = dataclasses.replace(f, metadata={**f.metadata, **meta})
        h = dataclasses.replace(
            base, cold_start=dataclasses.replace(base.cold_start, autotune_files=[other])
        )
        c = judge(h)
        assert c.autotune.state == "will-tune", meta


def _b200_033(files: list[facts.AutotuneFile], stores: list[facts.AutotuneFile]) -> facts.HostFacts:
    h = facts.load(HOSTS / "b200-vllm-0.33.json")  # FlashInfer 0.7.2.post1: it has autotune_v2
    cold = facts.ColdStartFacts(autotune_root="/c/vllm", autotune_files=files,
                                managed_root="/c/fi", managed_stores=stores)  # fmt: skip
    return dataclasses.replace(h, cold_start=cold)


def test_vllm_0_33_uses_flashinfer_s_managed_store_on_one_rank_and_per_rank_files_on_more() -> None:
    meta = {"flashinfer_version": "0.7.2.post1", "gpu": "NVIDIA B200"}
    store = facts.AutotuneFile("v2/0123456789abcdef/manifest.json", meta, 3)
    per_rank = facts.AutotuneFile("0.7.2.post1/100a/h/autotune_configs_dp0_rank0.json", meta, 9)
    shared = dataclasses.replace(per_rank, path="0.7.2.post1/100a/h/autotune_configs.json")

    def state(h: facts.HostFacts, ranks: int) -> coldstart.Autotune:
        return judge(
            h, engine_version="0.33.0", family="moe", backend="flashinfer-trtllm-moe", ranks=ranks
        ).autotune

    one = state(_b200_033([], []), 1)
    assert one.state == "will-tune" and "managed autotune store" in one.reason
    assert state(_b200_033([], [store]), 1).state == "cached"
    assert state(_b200_033([], [store]), 8).state == "will-tune"  # 8 ranks: the per-rank files
    assert state(_b200_033([per_rank], []), 8).state == "cached"
    assert state(_b200_033([shared], []), 8).state == "will-tune"  # 0.33 reads per-rank names


def test_the_skip_variable_and_the_default_skip_list() -> None:
    def state(backend: str, version: str = "0.26.0", **env: str) -> str:
        c = judge(host("rtx5090-cold", **env), engine_version=version, backend=backend)
        return c.autotune.state

    assert state("flashinfer-cutlass", VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS="fp4_gemm") == "skipped"
    assert state("flashinfer-cutlass", VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS="other_op") == "will-tune"
    # Unset: vLLM skips fp4_gemm for its CuTe-DSL kernel; set empty: it skips nothing.
    assert state("flashinfer-cutedsl") == "skipped"
    assert state("flashinfer-cutedsl", VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS="") == "will-tune"
    # 0.25 has no skip list: the variable means nothing there.
    assert state("flashinfer-cutlass", "0.25.0", VLLM_FLASHINFER_AUTOTUNE_SKIP_OPS="fp4_gemm") == (
        "will-tune"
    )


def test_engine_kernels_and_flashinfer_used_directly_are_not_autotuned() -> None:
    h = host("rtx5090-cold")
    mine = judge(h, backend="cutlass")
    assert mine.autotune.state == "off"
    direct = judge(h, target="flashinfer", engine_version="0.6.14")
    assert direct.autotune.state == "off" and "flashinfer.autotune()" in direct.autotune.reason


def test_estimates_only_where_a_reported_figure_matches() -> None:
    c = cold("rtx5090-cold")
    assert c.jit.estimate is not None and c.jit.estimate.seconds == 780
    assert "flashinfer/issues/4110" in c.jit.estimate.source
    assert c.autotune.estimate is not None and c.autotune.estimate.seconds is None
    # Another FlashInfer release, another GPU: no figure, so no estimate.
    other = judge(host("rtx5090-cold"), family="moe", backend="flashinfer-cutlass-moe")
    assert other.jit.estimate is None


# --- the report, the schema, the text ------------------------------------------------------------


def test_json_has_cold_start_per_family_and_matches_the_schema() -> None:
    from fp4doctor import render

    doc = render.document(report("rtx5090-cold", prefer=FI_MOE))
    for family in ("linear", "moe"):
        assert doc["families"][family]["cold_start"]["jit"]["state"] == "will-build"
    from fp4doctor.schemas import load as load_schema

    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(
        json.loads(json.dumps(doc)), load_schema("report", render.REPORT_SCHEMA_VERSION)
    )


def test_check_text_has_the_cold_start_section() -> None:
    host = str(HOSTS / "rtx5090-no-jit.json")
    out = CliRunner().invoke(main, ["check", "--facts", host, "-v"])
    assert "Cold start (first start-up)" in out.stdout
    assert "JIT cannot-build [fp4_gemm_cutlass_sm120]" in out.stdout


# --- env --cold-start ----------------------------------------------------------------------------


def test_env_cold_start_fast_emits_the_release_knobs_and_says_what_it_trades() -> None:
    code, out, err = env_command("rtx5090-cold", "--cold-start", "fast", "--cache-dir", "/m")
    assert code == 0, err
    assert "export FP4DOCTOR_VLLM_ARGS='--no-enable-flashinfer-autotune'" in out
    assert "export FLASHINFER_WORKSPACE_BASE='/m'" in out
    assert "trades the fastest measured tactics" in err


def test_env_cold_start_persist_sets_the_cache_directory_where_the_release_has_one() -> None:
    persist = ("--cold-start", "persist", "--cache-dir", "/m")
    _, out, _ = env_command("rtx5090-cold", *persist)
    assert "VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR='/m/flashinfer-autotune'" in out
    _, old, err = env_command("rtx5090-cold", *persist, "--engine-version", "0.23.0")
    assert "VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR" not in old and "keeps no autotune cache" in err


def test_cache_dir_without_cold_start_is_a_usage_error() -> None:
    code, _, err = env_command("rtx5090-cold", "--cache-dir", "/x")
    assert code == 2 and "--cold-start" in err


# --- fleets ---------------------------------------------------------------------------------------


def test_node_exports_the_cold_start_as_labels_and_gauges() -> None:
    v = view.of("n1", report("rtx5090-cold", prefer=FI_MOE))
    labels = node.node_labels(v, "fp4doctor.io")
    assert labels["fp4doctor.io/linear.jit"] == "will-build"
    assert labels["fp4doctor.io/moe.autotune"] == "will-tune"
    text = metrics.textfile(v, now=0.0)
    samples = {
        (s.name, s.labels.get("family"), s.labels.get("state")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    assert samples[("fp4doctor_cold_start_jit", "linear", "will-build")] == 1
    assert samples[("fp4doctor_cold_start_jit", "linear", "ready")] == 0
    assert view.NodeView.from_dict(v.to_dict()).families["linear"].jit == "will-build"


def test_fleet_counts_the_nodes_that_will_jit_or_autotune() -> None:
    views = [view.of(n, report(n)) for n in ("rtx5090-jit-cache", "rtx5090-cold", "rtx5090-no-jit")]
    counts = build(views).cold_start
    assert counts["linear"] == {"will JIT": 1, "cannot JIT": 1, "will autotune": 2}


# --- the probe, on real directories ---------------------------------------------------------------


def test_the_probe_reads_the_workspace_the_jit_cache_and_the_autotune_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "ws"
    ops = base / ".cache" / "flashinfer" / "0.6.14" / "120f" / "cached_ops"
    (ops / "fp4_gemm_cutlass_sm120").mkdir(parents=True)
    (ops / "fp4_gemm_cutlass_sm120" / "fp4_gemm_cutlass_sm120.so").write_bytes(b"\x7fELF")
    (ops / "half_built").mkdir()  # a build that did not finish: no library
    site = tmp_path / "site"
    module = site / "flashinfer_jit_cache" / "jit_cache" / "fused_moe_120"
    module.mkdir(parents=True)
    (module / "fused_moe_120.so").write_bytes(b"not an ELF file")
    info = site / "flashinfer_jit_cache-0.6.14+cu130.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: flashinfer-jit-cache\nVersion: 0.6.14+cu130\n"
    )
    (info / "RECORD").write_text(
        "flashinfer_jit_cache/jit_cache/fused_moe_120/fused_moe_120.so,,\n"
        "flashinfer_jit_cache/__init__.py,,\n"
    )
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    tune = tmp_path / "vllm" / "flashinfer_autotune_cache" / "0.6.14" / "120f" / "abc"
    tune.mkdir(parents=True)
    (tune / "autotune_configs.json").write_text(
        json.dumps({"_metadata": {"flashinfer_version": "0.6.14", "gpu": "G"}, "k1": 1, "k2": 2})
    )
    (tune / "autotune_configs_dp0_rank1.json").write_text("{not json")
    packages = facts.PackageFacts(versions={"flashinfer-jit-cache": "0.6.14+cu130"})
    env = {"HOME": str(tmp_path / "home"), "FLASHINFER_WORKSPACE_BASE": str(base),
           "VLLM_CACHE_ROOT": str(tmp_path / "vllm")}  # fmt: skip
    found = probe_cold_start(env, packages, ["fused_moe_120"])
    assert found.built == {"0.6.14/120f": ["fp4_gemm_cutlass_sm120"]}
    (pkg,) = found.prebuilt
    assert pkg.modules == ["fused_moe_120"] and pkg.archs["fused_moe_120"].error
    by_name = {f.path.rsplit("/", 1)[1]: f for f in found.autotune_files}
    assert by_name["autotune_configs.json"].entries == 2
    assert by_name["autotune_configs.json"].metadata["flashinfer_version"] == "0.6.14"
    assert by_name["autotune_configs_dp0_rank1.json"].error
    assert found.errors == {}
    assert found.managed_stores == []
    store = base / ".cache" / "flashinfer" / "autotune" / "v2" / "0123456789abcdef"
    (store / "entries").mkdir(parents=True)
    (store / "manifest.json").write_text(json.dumps({"flashinfer_version": "0.7.4", "gpu": "G"}))
    for i in range(3):
        (store / "entries" / f"{i}.json").write_text("{}")
    found = probe_cold_start(env, packages, ["fused_moe_120"])
    (managed,) = found.managed_stores
    assert (managed.path, managed.entries) == ("v2/0123456789abcdef/manifest.json", 3)
    assert managed.metadata["flashinfer_version"] == "0.7.4"
    # The facts round-trip through JSON and the schema's loader.
    h = dataclasses.replace(facts.HostFacts(), cold_start=found)
    assert facts.loads(facts.dumps(h)).cold_start == found


def test_the_autotune_root_follows_vllm_s_variables() -> None:
    assert autotune_root({}, "/h") == Path("/h/.cache/vllm/flashinfer_autotune_cache")
    assert autotune_root({"XDG_CACHE_HOME": "/x"}, "/h") == Path(
        "/x/vllm/flashinfer_autotune_cache"
    )
    assert autotune_root({"VLLM_CACHE_ROOT": "~/v"}, "/h") == Path("/h/v/flashinfer_autotune_cache")
    assert autotune_root({"VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR": "/o"}, "/h") == Path("/o")


def test_a_missing_home_cache_is_empty_not_an_error(tmp_path: Path) -> None:
    found = probe_cold_start({"HOME": str(tmp_path)}, facts.PackageFacts())
    assert (found.built, found.prebuilt, found.autotune_files, found.errors) == ({}, [], [], {})


# --- the rules file -------------------------------------------------------------------------------


def test_every_rule_cites_a_source_and_names_backends_that_exist() -> None:
    r = rules.load()
    known = {name for target in profile.builtin_names() for name in profile.load(target).backends}
    for k in r.kernels:
        assert k.source.strip(), k.id
        assert set(k.backends) <= known, (k.id, set(k.backends) - known)
    for a in r.autotune:
        assert a.source.strip() and a.reason.strip(), a.id
    for e in r.estimates:
        assert e.source.startswith("https://"), e.id


def test_the_probe_scans_the_modules_the_rules_name() -> None:
    """The probe reads the names from the file's text, without the parser: the same names."""
    assert set(rule_modules()) == set(rules.load().module_names()) | {
        e.module for e in rules.load().estimates if e.module
    }


def test_the_moe_modules_follow_flashinfer_s_arch_dispatch_release_by_release() -> None:
    """tools/extract/data/flashinfer.json reads get_cutlass_fused_moe_module's dispatch from each
    wheel; the module for a builder gen_cutlass_fused_moe_smXXX_module is fused_moe_XXX."""
    data = json.loads(FLASHINFER_DATA.read_text())
    r = rules.load()
    checked = 0
    for version in data["covers"]:
        moe = (data["releases"][version].get("moe") or {}).get("cutlass_fused_moe") or {}
        k = r.kernels_for("moe", "flashinfer-cutlass-moe", version)
        if k is None or not moe.get("arch_dispatch"):
            continue
        for cc, builder in moe["arch_dispatch"].items():
            expected = "fused_moe_" + builder.removeprefix("gen_cutlass_fused_moe_sm").removesuffix(
                "_module"
            )
            if int(cc) >= 100:
                assert k.module_for(int(cc)) in (expected, None), (version, cc)
                checked += 1
    assert checked > 100


HEAD = (
    "schema: 1\nsource: s\njit: {workspace: '>=0.4', workspace_source: s, disable_variable: V,"
    " disable_source: s, providers_from: '0.7.0', providers_source: s}\n"
)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("schema: 2\n", "coldstart.yaml:1: 'schema'"),
        ("schema: 1\nsource: s\njit: {}\n", "coldstart.yaml:3: 'jit' is missing"),
        (
            HEAD + "kernels:\n"
            "  - id: k\n    family: linear\n    backends: [b]\n    flashinfer: '>=0'\n"
            "    build: gcc\n    source: s\n",
            "coldstart.yaml:9: 'kernels[0].build' is 'gcc'",
        ),
        (
            HEAD + "estimates:\n"
            "  - {id: e, what: jit, flashinfer: '>=0', compute_capability: [120], seconds: -1,"
            " source: s}\n",
            "coldstart.yaml:5: 'estimates[0].seconds'",
        ),
    ],
)
def test_a_malformed_rules_file_names_file_line_and_key(
    text: str, where: str, tmp_path: Path
) -> None:
    path = tmp_path / "coldstart.yaml"
    path.write_text(text)
    with pytest.raises(profile.ProfileError, match=where.replace("[", r"\[").replace("]", r"\]")):
        rules.parse(text, str(path))


# --- prewarm -------------------------------------------------------------------------------------


def prewarm(host_name: str, *args: str) -> tuple[int, str, str]:
    command = ["prewarm", "--facts", str(HOSTS / f"{host_name}.json"), *args]
    out = CliRunner().invoke(main, command)
    return out.exit_code, out.stdout, out.stderr


def test_prewarm_plans_the_modules_the_first_start_would_build() -> None:
    code, out, _ = prewarm("rtx5090-cold", "--dry-run", "--prefer", FI_MOE)
    assert code == 0
    assert out.splitlines() == [
        "would build fp4_gemm_cutlass_sm120"
        " (flashinfer.jit.gemm:gen_gemm_sm120_module_cutlass_fp4)",
        "would build fused_moe_120 (flashinfer.jit.fused_moe:gen_cutlass_fused_moe_sm120_module)",
    ]
    code, out, err = prewarm("rtx5090-jit-cache", "--dry-run")
    assert (code, out) == (0, "") and "nothing to build (JIT ready" in err


def test_prewarm_refuses_what_cannot_be_built_and_a_native_backend_on_sm90() -> None:
    code, out, err = prewarm("rtx5090-no-jit", "--dry-run")
    assert (code, out) == (1, "") and "FLASHINFER_DISABLE_JIT" in err
    code, out, err = prewarm("h200", "--dry-run", "--prefer", "flashinfer-cutlass")
    assert (code, out) == (1, "")
    assert "compute capability 9.0" in err and "nothing to prewarm" in err
    code, _, err = prewarm("h200", "--dry-run", "--require", "native")
    assert code == 1 and "no native FP4 backend is usable here" in err


def test_prewarm_builds_on_this_host_only() -> None:
    code, _, err = prewarm("rtx5090-cold")
    assert code == 2 and "--facts only with --dry-run" in err


def test_a_build_step_calls_the_generator_and_reports_its_failure(tmp_path: Path) -> None:
    """A stand-in `flashinfer.jit.gemm` (no GPU and no nvcc here): the step imports the module
    the rules name and calls build_and_load() on what the generator returns."""
    from fp4doctor.coldstart.prewarm import Step, build

    package = tmp_path / "flashinfer" / "jit"
    package.mkdir(parents=True)
    (tmp_path / "flashinfer" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    marker = tmp_path / "built"
    (package / "gemm.py").write_text(
        "import pathlib\n"
        "class Spec:\n"
        f"    def build_and_load(self): pathlib.Path({str(marker)!r}).write_text('ok')\n"
        "def gen_ok(): return Spec()\n"
        "def gen_broken(): raise RuntimeError('nvcc failed')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}
    ok = Step("linear", "flashinfer-cutlass", "m", "flashinfer.jit.gemm:gen_ok")
    assert build(ok, env) is None and marker.read_text() == "ok"
    broken = dataclasses.replace(ok, builder="flashinfer.jit.gemm:gen_broken")
    assert "exited with 1" in (build(broken, env) or "")
    assert build(dataclasses.replace(ok, builder=None), env) == "no generator is known for m"


def test_cold_start_fast_judges_the_autotuner_bugs_with_the_autotune_it_switches_off() -> None:
    # b200: FlashInfer 0.6.1, whose CuTe-DSL MoE has autotuner bugs (not established without
    # --autotune). --cold-start fast writes --no-enable-flashinfer-autotune, which rules them out.
    args = ("--engine-version", "0.24.0", "--shell", "json")
    _, fast, err = env_command("b200", *args, "--cold-start", "fast")
    flags = json.loads(fast)["set"]["FP4DOCTOR_VLLM_ARGS"]
    # The engine's own MoE pick stays (no flag for it); the autotune switch is written.
    assert "--no-enable-flashinfer-autotune" in flags and "--moe-backend" not in flags
    assert "passing over flashinfer-trtllm-moe" not in err


def _hostile(name: str, where: Path, kind: str) -> None:
    """A name in a shared cache that is not a regular file: a FIFO with no writer, or a link
    to /dev/zero (endless)."""
    if kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no mkfifo on this platform")
        os.mkfifo(where / name)
    else:
        os.symlink("/dev/zero", where / name)


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_fifo_or_dev_zero_in_the_caches_is_a_value_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # vLLM's autotune cache and FlashInfer's managed store are often shared volumes: a FIFO
    # there once hung every check, a link to /dev/zero read until memory ran out.
    tune = tmp_path / "vllm" / "flashinfer_autotune_cache" / "0.6.14" / "120f" / "abc"
    tune.mkdir(parents=True)
    _hostile("autotune_configs.json", tune, kind)
    store = tmp_path / "ws" / ".cache" / "flashinfer" / "autotune" / "v2" / "0123456789abcdef"
    store.mkdir(parents=True)
    _hostile("manifest.json", store, kind)
    # A prebuilt module that is not a regular file (its fatbin headers are read).
    site = tmp_path / "site"
    module = site / "flashinfer_jit_cache" / "jit_cache" / "fused_moe_120"
    module.mkdir(parents=True)
    _hostile("fused_moe_120.so", module, kind)
    info = site / "flashinfer_jit_cache-0.6.14.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: flashinfer-jit-cache\nVersion: 0.6.14\n"
    )
    (info / "RECORD").write_text(
        "flashinfer_jit_cache/jit_cache/fused_moe_120/fused_moe_120.so,,\n"
    )
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    env = {"HOME": str(tmp_path / "home"), "FLASHINFER_WORKSPACE_BASE": str(tmp_path / "ws"),
           "VLLM_CACHE_ROOT": str(tmp_path / "vllm")}  # fmt: skip
    packages = facts.PackageFacts(versions={"flashinfer-jit-cache": "0.6.14"})
    found = probe_cold_start(env, packages, ["fused_moe_120"])
    (tuned,) = found.autotune_files
    (managed,) = found.managed_stores
    for got in (tuned, managed):
        assert got.error is not None and "not a regular file" in got.error, got
    (pkg,) = found.prebuilt
    error = pkg.archs["fused_moe_120"].error
    assert error is not None and "not a regular file" in error
    assert found.errors == {}


def test_prewarm_builds_with_the_installed_flashinfer_not_a_decoy_in_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A `flashinfer/` in the working directory once ran as the user (root in a container) and
    # was reported as built. The installed FlashInfer here is a FAKE one on PYTHONPATH (the real
    # one's import takes seconds), whose generator builds nothing.
    from fp4doctor.coldstart.prewarm import Step, build

    work = tmp_path / "work"
    (work / "flashinfer").mkdir(parents=True)
    ran = tmp_path / "decoy-ran"
    (work / "flashinfer" / "__init__.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    installed = tmp_path / "site" / "flashinfer"
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text(
        "class _Spec:\n    def build_and_load(self):\n        pass\n\n\n"
        "def gen():\n    return _Spec()\n"
    )
    monkeypatch.chdir(work)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    assert build(Step("linear", "flashinfer-cutlass", "m", "flashinfer:gen"), env) is None
    assert not ran.exists()


def test_the_autotune_of_no_backend_and_of_a_native_one_read_as_sentences() -> None:
    h = facts.load(HOSTS / "rtx5090-cold.json")
    none = judge(h, backend=None).autotune
    assert none.state == "off" and "no backend is chosen" in none.reason
    assert "is not a FlashInfer kernel" not in none.reason  # once "no backend is not a ..."
    marlin = judge(h, backend="marlin").autotune
    assert marlin.reason.startswith("marlin is not a FlashInfer kernel")


def test_prewarm_dry_run_says_it_would_build_into_the_directory(tmp_path: Path) -> None:
    code, out, err = prewarm("rtx5090-cold", "--dry-run", "--prefer", FI_MOE, "--cache-dir",
                           str(tmp_path))  # fmt: skip
    assert code == 0 and "would build" in out
    assert f"would build into {tmp_path}" in err
    assert "building into" not in err  # once said with --dry-run too
