"""deploy/: the manifests validated against the Kubernetes API models of the `kubernetes` Python
client (no cluster is reachable here), strictly: a key the model does not have is an error, as
`kubectl apply --validate=strict` would make it; the node-problem-detector plugin config against
NPD's own config rules; and the commands they run against this CLI."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from fp4doctor.cli import main
from fp4doctor.fleet import labels

kubernetes = pytest.importorskip("kubernetes", reason="the kubernetes client is not installed")

DEPLOY = Path(__file__).parent.parent / "deploy"
FLEET = Path(__file__).parent / "fixtures" / "fleet"
MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("v1", "Pod"): "V1Pod",
}
# Older clients spell the container types `list[V1Container]`, `dict(str, str)`; newer ones
# (pydantic models) `List[V1Container]`, `Dict[str, str]`.
_LIST = re.compile(r"[Ll]ist\[(.+)\]")
_DICT = re.compile(r"dict\(str, (.+)\)|Dict\[str, (.+)\]")


def strict(data: Any, type_name: str, where: str) -> None:
    """Walk `data` against the client's model `type_name`: every key must be in the model's
    `attribute_map` (its JSON names), recursively through lists, maps and nested models."""
    if m := _LIST.fullmatch(type_name):
        assert isinstance(data, list), f"{where}: expected a list"
        for i, item in enumerate(data):
            strict(item, m.group(1), f"{where}[{i}]")
        return
    if m := _DICT.fullmatch(type_name):
        assert isinstance(data, dict), f"{where}: expected a map"
        for k, v in data.items():
            strict(v, m.group(1) or m.group(2), f"{where}.{k}")
        return
    model = getattr(kubernetes.client.models, type_name, None)
    if model is None:  # str, int, bool, object, datetime
        scalar = {"str": str, "int": int, "bool": bool, "float": (int, float)}.get(type_name)
        if scalar is not None:
            assert isinstance(data, scalar), f"{where}: expected {type_name}, got {data!r}"
        return
    assert isinstance(data, dict), f"{where}: expected a {type_name} object"
    json_to_attr = {v: k for k, v in model.attribute_map.items()}
    for key, value in data.items():
        assert key in json_to_attr, (
            f"{where}: unknown field {key!r} for {type_name} "
            f"(valid: {', '.join(sorted(json_to_attr))})"
        )
        strict(value, model.openapi_types[json_to_attr[key]], f"{where}.{key}")


def documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            out.append((f"{path.name}#{i}", doc))
    return out


@pytest.mark.parametrize(
    ("where", "doc"), documents(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_manifest_matches_the_api_model(where: str, doc: dict[str, Any]) -> None:
    model = MODELS[(doc["apiVersion"], doc["kind"])]
    strict(doc, model, where)
    client = kubernetes.client.ApiClient()
    obj = client._ApiClient__deserialize(doc, model)  # required fields checked by the models
    assert type(obj).__name__ == model
    for k, v in (obj.metadata.labels or {}).items():
        assert labels.valid_key(k) and labels.valid_value(v), (k, v)


def test_strict_walker_rejects_an_unknown_field() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {
        "containers": [{"name": "c", "image": "i", "comand": ["typo"]}]}}  # fmt: skip
    with pytest.raises(AssertionError, match="unknown field 'comand'"):
        strict(pod, "V1Pod", "pod")


def _daemonset() -> dict[str, Any]:
    return next(d for _, d in documents() if d["kind"] == "DaemonSet")


def test_daemonset_mounts_what_the_node_command_writes() -> None:
    spec = _daemonset()["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert host[mounts["/etc/kubernetes/node-feature-discovery/features.d"]] == (
        "/etc/kubernetes/node-feature-discovery/features.d"  # NFD's local source directory
    )
    script = container["args"][0]
    for path in ("features.d/fp4doctor", "textfile/fp4doctor.prom", "/var/lib/fp4doctor/ready"):
        assert path in script
    assert "fp4doctor.prom" in script  # node-exporter reads *.prom only
    # No GPU requested: serving pods hold them; NVML sees all through the NVIDIA runtime.
    assert "nvidia.com/gpu" not in json.dumps(container.get("resources", {}))


def test_node_command_of_the_daemonset_runs(tmp_path: Path) -> None:
    script = _daemonset()["spec"]["template"]["spec"]["containers"][0]["args"][0]
    line = " ".join(
        part.strip().rstrip("\\") for part in script.split("fp4doctor node", 1)[1].split("\n")[:4]
    )
    args = shlex.split(line.replace('"$NODE_NAME"', "node-1"))
    moved = [str(tmp_path / Path(a).name) if a.startswith("/") else a for a in args]
    result = CliRunner().invoke(main, ["node", *moved, "--facts", str(FLEET / "b200-01.json")])
    assert result.exit_code in (0, 1), result.output
    assert (tmp_path / "fp4doctor").is_file() and (tmp_path / "fp4doctor.prom").is_file()


def test_init_container_gates_on_check_and_selects_ready_nodes() -> None:
    pod = next(d for _, d in documents() if d["kind"] == "Pod")
    (init,) = pod["spec"]["initContainers"]
    assert "fp4doctor check" in init["args"][0]
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    keys = [e["key"] for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"]]
    assert keys == [labels.key(labels.FP4DOCTOR_NAMESPACE, "linear.ready")]


# --- node-problem-detector -------------------------------------------------------------------

# kubernetes/node-problem-detector pkg/custompluginmonitor/types/config.go (CustomPluginConfig,
# pluginGlobalConfig) and types.go (CustomRule); pkg/types Condition.
NPD_TOP = {"plugin", "pluginConfig", "source", "conditions", "rules", "metricsReporting"}
NPD_GLOBAL = {"invoke_interval", "timeout", "max_output_length", "concurrency",
              "enable_message_change_based_condition_update", "skip_initial_status"}  # fmt: skip
NPD_RULE = {"type", "condition", "reason", "path", "args", "timeout", "invoke_interval"}
NPD_CONDITION = {"type", "reason", "message"}
GO_DURATION = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+")


def _seconds(text: str) -> float:
    assert GO_DURATION.fullmatch(text), text
    unit = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(
        float(n) * unit[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    )


def test_npd_plugin_config_follows_npd_rules(tmp_path: Path) -> None:
    config = json.loads((DEPLOY / "npd-plugin.json").read_text())
    assert set(config) <= NPD_TOP and config["plugin"] == "custom"  # Validate(): only "custom"
    assert set(config["pluginConfig"]) <= NPD_GLOBAL
    glob = _seconds(config["pluginConfig"]["timeout"])
    _seconds(config["pluginConfig"]["invoke_interval"])
    conditions = {c["type"] for c in config["conditions"]}
    assert all(set(c) <= NPD_CONDITION for c in config["conditions"])
    for rule in config["rules"]:
        assert set(rule) <= NPD_RULE
        assert _seconds(rule["timeout"]) <= glob  # Validate(): a rule's timeout <= the global one
        if rule["type"] == "permanent":
            assert rule["condition"] in conditions  # Validate(): a default condition exists
        assert Path(rule["path"]).name == "fp4doctor"
        # The plugin's command, as NPD runs it, on a snapshot: a status NPD knows, one line
        # within max_output_length.
        args = [a if a != "/var/lib/fp4doctor/facts.json" else str(FLEET / "b200-04.json")
                for a in rule["args"]]  # fmt: skip
        result = CliRunner().invoke(main, args)
        assert result.exit_code in (0, 1, 2), result.output
        assert len(result.stdout.strip().encode()) <= config["pluginConfig"]["max_output_length"]
