"""Time fp4doctor's pre-flight commands against the tools a user would otherwise run.

    python benchmarks/bench_preflight.py [--runs N] [--json PATH] [--check] [--timeout S]

In one run, each command as a subprocess, one warm-up then N timed runs (see timing.py), after
the bytecode of fp4doctor and of what it imports is compiled, as after a pip install
(`timing.compile_bytecode`; with the live checks, torch's and FlashInfer's too):

- `fp4doctor probe --json` (no profile, no rules): target at most 0.10 s on a host without a GPU
  (issue 9, set for the 2-core CPU host);
- `fp4doctor check --no-smoke --json` against `python -m torch.utils.collect_env` and
  `flashinfer collect-env --json` (information: how much faster the static check is); the
  warm-up fills the parsed-profile cache (fp4doctor/cache.py, in a temporary directory
  of this benchmark's own), and the same check with the cache off (`FP4DOCTOR_CACHE_DIR=`)
  times a first run, as in a fresh container;
- `fp4doctor env --shell bash` (no smoke): target at or under 0.25 s on a host without a GPU;
  on a host with a GPU, this and `check --no-smoke` at or under 0.20 s (issue 9, the H200);
- on a host with an NVIDIA GPU (found through NVML or `nvidia-smi -L`; torch is never imported
  here): `fp4doctor check --smoke --json` with `CUDA_VISIBLE_DEVICES=0` against its floor,
  `python -c "import torch; torch.zeros(1, device='cuda')"` on the same GPU: target at most
  1.05x (issue 9); `fp4doctor check --target flashinfer --smoke --force --json` (the live GEMM
  of each FlashInfer backend, dense and MoE, the rejected ones too) against the same floor:
  target at most 1.15x (issue 9); with two GPUs or more, the check with `CUDA_VISIBLE_DEVICES=0,1`
  against `=0`: target at most 1.2x; and vLLM's `check --smoke --force` for information;
- on a host without a GPU, when torch is installed: `fp4doctor check --smoke --json` (the CPU
  pipeline check) against `python -c "import torch"`, for information.

Every fp4doctor command but the FlashInfer one gets `--target vllm`, so the figures do not depend on
which engine is installed. fp4doctor runs as the console script next to this interpreter, else as
`python -m fp4doctor` (a checkout on PYTHONPATH). Its exit code 1 (not ready) is a verdict, not a
failure; exit codes from 2 up, signals and timeouts are failures. A tool that is not installed is
reported as absent.

`--no-smoke` measures only the commands that run no live GEMM, and the collectors (a quick
start-up comparison). `--interleave` runs the commands round-robin, run i of each in turn, so a
machine shared with other work loads them all alike (the default runs each command's runs in a
row). The table goes to stdout, progress to stderr. `--json PATH` writes every raw run, the medians,
the ratios, the machine and the target verdicts. `--check` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from timing import (
    Result,
    Spec,
    compile_bytecode,
    flashinfer_command,
    measure,
    measure_interleaved,
    ratio,
    table,
    verdict_lines,
)

TARGET_ENV_S = 0.25
TARGET_PROBE_S = 0.10  # issue 9, on a host without a GPU (the 2-core CPU host)
TARGET_STATIC_GPU_S = 0.20  # issue 9: check --no-smoke and env on a GPU host (the H200)
TARGET_SMOKE_VS_FLOOR = 1.05  # issue 9, the H200
TARGET_FORCE_FLASHINFER_VS_FLOOR = 1.15  # issue 9, the H200
TARGET_TWO_VS_ONE = 1.2
FLOOR_CUDA = "import torch; torch.zeros(1, device='cuda')"
FLOOR_CPU = "import torch"

PROBE = "fp4doctor probe --json"
STATIC = "fp4doctor check --no-smoke"
STATIC_COLD = "fp4doctor check --no-smoke, cold"  # the profile parsed, not read from the cache
NO_CACHE = {"FP4DOCTOR_CACHE_DIR": ""}
TORCH_ENV = "torch collect_env"
FLASHINFER_ENV = "flashinfer collect-env"
ENV = "fp4doctor env --shell bash"
FLOOR_1 = "floor: torch cuda init (1 GPU)"
SMOKE_1 = "fp4doctor check --smoke (1 GPU)"
SMOKE_2 = "fp4doctor check --smoke (2 GPUs)"
FORCE_1 = "fp4doctor check --force (1 GPU)"
FORCE_FLASHINFER = "fp4doctor check --target flashinfer --force (1 GPU)"
FLOOR_CPU_NAME = "floor: import torch"
SMOKE_CPU = "fp4doctor check --smoke (CPU)"

ONE_GPU = {"CUDA_VISIBLE_DEVICES": "0"}
TWO_GPUS = {"CUDA_VISIBLE_DEVICES": "0,1"}


@dataclass
class Job:
    tool: str
    command: list[str] | None
    why_absent: str | None = None
    env: Mapping[str, str] | None = None
    fp4doctor: bool = False  # exit 1 is a verdict; the output is inspected


@dataclass
class Comparison:
    name: str
    subject: str
    baseline: str
    target_max: float | None = None  # None: for information

    def value(self, results: Mapping[str, Result]) -> float | None:
        subject, baseline = results.get(self.subject), results.get(self.baseline)
        if subject is None or baseline is None:
            return None
        return ratio(subject, baseline)

    def verdict(self, results: Mapping[str, Result]) -> bool | None:
        """None when not measured here (a tool absent); False when missed or failed."""
        if self.target_max is None:
            return None
        pair = [results.get(self.subject), results.get(self.baseline)]
        if any(r is None or r.status == "absent" for r in pair):
            return None
        found = self.value(results)
        return found is not None and found <= self.target_max


# --- the machine ----------------------------------------------------------------------------


def version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def gpu_names() -> tuple[list[str], str]:
    """Names of the NVIDIA GPUs on this host (all of them: NVML and nvidia-smi ignore
    CUDA_VISIBLE_DEVICES) and where the answer came from."""
    why = []
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            names = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                names.append(name.decode() if isinstance(name, bytes) else str(name))
            return names, "nvml"
        finally:
            pynvml.nvmlShutdown()
    except Exception as error:  # no pynvml, no driver, no GPU: try nvidia-smi
        why.append(f"nvml: {type(error).__name__}")
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as error:
            why.append(f"nvidia-smi: {type(error).__name__}")
        else:
            if listed.returncode == 0:
                names = [
                    line.split(":", 1)[1].split("(UUID")[0].strip()
                    for line in listed.stdout.splitlines()
                    if line.startswith("GPU ")
                ]
                return names, "nvidia-smi -L"
            why.append(f"nvidia-smi: exit {listed.returncode}")
    else:
        why.append("nvidia-smi: not found")
    return [], "none (" + "; ".join(why) + ")"


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine(gpus: list[str], gpu_source: str, fp4doctor: list[str]) -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model(),
        "gpus": gpus,
        "gpu_source": gpu_source,
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "fp4doctor_command": fp4doctor,
        "versions": {
            p: version(p)
            for p in (
                "fp4doctor",
                "torch",
                "flashinfer-python",
                "nvidia-cudnn-frontend",
                "nvidia-cudnn-cu12",
                "nvidia-ml-py",
            )
        },
        "cuda_visible_devices_outside": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


# --- the commands ---------------------------------------------------------------------------


def fp4doctor_command() -> list[str]:
    """The console script next to this interpreter, else `python -m fp4doctor`."""
    beside = os.path.join(os.path.dirname(sys.executable), "fp4doctor")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return [beside]
    return [sys.executable, "-m", "fp4doctor"]


def fp4doctor_works(base: list[str]) -> str | None:
    """Why `base --version` does not run, or None. Guards against reading `python -m
    fp4doctor`'s "No module named fp4doctor" (exit 1) as a not-ready verdict."""
    try:
        done = subprocess.run([*base, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        return f"{' '.join(base)} --version: {error}"
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [""])[-1]
        return f"{' '.join(base)} --version: exit {done.returncode}: {tail[:200]}"
    return None


def jobs(fp4doctor: list[str], gpus: list[str], smoke: bool = True) -> list[Job]:
    torch = version("torch") is not None
    no_torch = "torch is not installed"
    flashinfer = flashinfer_command()
    target = ["--target", "vllm"]
    found = [
        Job(PROBE, [*fp4doctor, "probe", "--json"], fp4doctor=True),
        Job(STATIC, [*fp4doctor, "check", "--no-smoke", "--json", *target], fp4doctor=True),
        Job(
            STATIC_COLD,
            [*fp4doctor, "check", "--no-smoke", "--json", *target],
            env=NO_CACHE,
            fp4doctor=True,
        ),
        Job(
            TORCH_ENV,
            [sys.executable, "-m", "torch.utils.collect_env"] if torch else None,
            no_torch,
        ),
        Job(
            FLASHINFER_ENV,
            [*flashinfer, "collect-env", "--json"] if flashinfer else None,
            "flashinfer is not installed",
        ),
        Job(ENV, [*fp4doctor, "env", "--shell", "bash", *target], fp4doctor=True),
    ]
    if not smoke:
        return found
    smoke_run = [*fp4doctor, "check", "--smoke", "--json", *target]
    if gpus:
        floor = [sys.executable, "-c", FLOOR_CUDA] if torch else None
        found += [
            Job(FLOOR_1, floor, no_torch, ONE_GPU),
            Job(SMOKE_1, smoke_run if torch else None, no_torch, ONE_GPU, fp4doctor=True),
        ]
        if len(gpus) >= 2:
            found.append(
                Job(SMOKE_2, smoke_run if torch else None, no_torch, TWO_GPUS, fp4doctor=True)
            )
        force = [*fp4doctor, "check", "--smoke", "--force", "--json"]
        force_vllm, force_flashinfer = [*force, *target], [*force, "--target", "flashinfer"]
        found += [
            Job(FORCE_1, force_vllm if torch else None, no_torch, ONE_GPU, fp4doctor=True),
            Job(
                FORCE_FLASHINFER,
                force_flashinfer if torch else None,
                no_torch,
                ONE_GPU,
                fp4doctor=True,
            ),
        ]
    elif torch:
        found += [
            Job(FLOOR_CPU_NAME, [sys.executable, "-c", FLOOR_CPU]),
            Job(SMOKE_CPU, smoke_run, fp4doctor=True),
        ]
    return found


def inspect_report(stdout: bytes) -> dict[str, Any]:
    """What a `check --json` report, a `probe --json` snapshot or an `env` output says about
    the run it came from."""
    text = stdout.decode(errors="replace")
    if not text.lstrip().startswith("{"):  # env: eval-safe statements, possibly none
        return {"stdout_lines": len(text.splitlines())}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not a JSON report ({error})") from None
    if isinstance(doc, dict) and "findings" not in doc and "fp4doctor_version" in doc:
        return {"gpus_seen": len(doc.get("gpus") or []), "probe_errors": doc.get("probe_errors")}
    if not isinstance(doc, dict) or "findings" not in doc:
        raise ValueError("not an fp4doctor report")
    found_host = doc.get("host")
    host: dict[str, Any] = found_host if isinstance(found_host, dict) else {}
    smoke: dict[str, Any] = {}
    _smoke_findings(doc, smoke)
    return {
        "ready": doc.get("ready"),
        "exit_code": doc.get("exit_code"),
        "gpus_seen": len(host.get("gpus") or []),
        "smoke_note": doc.get("smoke_note"),
        "smoke_findings": smoke,
    }


def _smoke_findings(node: Any, found: dict[str, Any]) -> None:
    """Every finding with a `smoke.` id, wherever the report nests it: id -> status."""
    if isinstance(node, dict):
        ident = node.get("id")
        if isinstance(ident, str) and ident.startswith("smoke.") and "status" in node:
            found[ident] = node["status"]
        for value in node.values():
            _smoke_findings(value, found)
    elif isinstance(node, list):
        for value in node:
            _smoke_findings(value, found)


def comparisons(gpus: list[str], smoke: bool = True) -> list[Comparison]:
    found = [
        Comparison(f"{PROBE} / {TORCH_ENV}", PROBE, TORCH_ENV),
        Comparison(f"{STATIC} / {TORCH_ENV}", STATIC, TORCH_ENV),
        Comparison(f"{ENV} / {TORCH_ENV}", ENV, TORCH_ENV),
        Comparison(f"{STATIC} / {FLASHINFER_ENV}", STATIC, FLASHINFER_ENV),
    ]
    if not smoke:
        return found
    if gpus:
        found.append(Comparison(f"{SMOKE_1} / {FLOOR_1}", SMOKE_1, FLOOR_1, TARGET_SMOKE_VS_FLOOR))
        if len(gpus) >= 2:
            found.append(Comparison(f"{SMOKE_2} / {SMOKE_1}", SMOKE_2, SMOKE_1, TARGET_TWO_VS_ONE))
        found.append(Comparison(f"{FORCE_1} / {FLOOR_1}", FORCE_1, FLOOR_1))
        found.append(
            Comparison(
                f"{FORCE_FLASHINFER} / {FLOOR_1}",
                FORCE_FLASHINFER,
                FLOOR_1,
                TARGET_FORCE_FLASHINFER_VS_FLOOR,
            )
        )
    else:
        found.append(Comparison(f"{SMOKE_CPU} / {FLOOR_CPU_NAME}", SMOKE_CPU, FLOOR_CPU_NAME))
    return found


def verdicts(
    results: Mapping[str, Result], compared: list[Comparison], gpus: list[str], broken: list[str]
) -> list[dict[str, Any]]:
    """Each target: its name, the measured value, the limit, and whether it was met (None: not
    measured here, a tool being absent)."""
    found: list[dict[str, Any]] = []

    def wall_target(tool: str, limit: float) -> None:
        measured = results.get(tool)
        wall = measured.wall_s if measured else None
        found.append(
            {
                "name": f"{tool} median wall",
                "value": wall,
                "limit": limit,
                "unit": "s",
                "met": wall is not None and wall <= limit,
            }
        )

    if gpus:  # issue 9's start-up targets for the H200
        wall_target(STATIC, TARGET_STATIC_GPU_S)
        wall_target(ENV, TARGET_STATIC_GPU_S)
    else:  # the 0.10 s and 0.25 s targets are set for a host without a GPU
        wall_target(PROBE, TARGET_PROBE_S)
        wall_target(ENV, TARGET_ENV_S)
    for c in compared:
        if c.target_max is not None:
            found.append(
                {
                    "name": c.name,
                    "value": c.value(results),
                    "limit": c.target_max,
                    "unit": "x",
                    "met": c.verdict(results),
                }
            )
    found.append(
        {
            "name": "every fp4doctor command ran (exit 0 or 1)",
            "value": broken,
            "limit": [],
            "unit": None,
            "met": not broken,
        }
    )
    return found


def verdict_table(targets: list[dict[str, Any]]) -> dict[str, bool | None]:
    shown: dict[str, bool | None] = {}
    for t in targets:
        if t["unit"] is None:
            name = t["name"] + (f": {', '.join(t['value'])} failed" if t["value"] else "")
        elif t["value"] is None:
            name = f"{t['name']}: not measured (target <= {t['limit']}{t['unit']})"
        else:
            value = f"{t['value']:.3f} s" if t["unit"] == "s" else f"{t['value']:.2f}x"
            name = f"{t['name']}: {value} <= {t['limit']}{' s' if t['unit'] == 's' else 'x'}"
        shown[name] = t["met"]
    return shown


def render(
    results: list[Result],
    compared: list[Comparison],
    checks: list[dict[str, Any]],
    host: Mapping[str, Any],
    runs: int,
    loads: tuple[list[float] | None, list[float] | None],
) -> str:
    by_tool = {r.tool: r for r in results}
    gpus = host["gpus"]
    lines = [
        f"{host['platform']}, {host['cpu_count']} CPUs ({host['cpu_model']}), "
        f"python {host['python']}, torch {host['versions']['torch'] or 'absent'}",
        f"GPUs: {', '.join(gpus) if gpus else 'none'} [{host['gpu_source']}]",
        f"load average before {loads[0]}, after {loads[1]}",
        f"fp4doctor: {' '.join(host['fp4doctor_command'])} ... --target vllm",
        "",
    ]
    lines += table(
        results,
        title=f"median of {runs} runs after one warm-up",
        ratio_label=None,
        ratios={},
        show_env=True,
        show_codes=True,
    )
    lines += ["", "ratios of median wall times"]
    width = max(len(c.name) for c in compared)
    for c in compared:
        value = c.value(by_tool)
        if value is None:
            missing = [
                f"{t} {by_tool[t].status}" if t in by_tool else f"{t} not run"
                for t in (c.subject, c.baseline)
                if t not in by_tool or not by_tool[t].ok
            ]
            shown = "n/a (" + ", ".join(missing) + ")"
        else:
            shown = f"{value:6.2f}x"
            if value < 0.5:
                shown += f"  ({1 / value:.1f}x faster)"
        goal = f"target <= {c.target_max}x" if c.target_max is not None else "info"
        lines.append(f"  {c.name:<{width}}  {shown:<24} {goal}")
    notes = [r for r in results if r.ok and "smoke_findings" in r.info]
    if notes:
        lines += ["", "what the warm-up report of each check said"]
        for r in notes:
            live = r.info["smoke_findings"]
            said = ", ".join(f"{k}={v}" for k, v in sorted(live.items())) or "none"
            lines.append(
                f"  {r.tool}: ready={r.info.get('ready')}, {r.info.get('gpus_seen')} GPU(s) seen, "
                f"live GEMMs: {said}"
                + (f" ({r.info['smoke_note']})" if r.info.get("smoke_note") else "")
            )
    lines += ["", *verdict_lines(verdict_table(checks))]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command (default 5)")
    parser.add_argument("--json", metavar="PATH", help="write every run and verdict to PATH")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds one run may take before it is killed (default 300)",
    )
    parser.add_argument(
        "--no-smoke",
        dest="smoke",
        action="store_false",
        help="only the commands that run no live GEMM (probe, check --no-smoke, env) and the "
        "collectors",
    )
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="run the commands round-robin (run i of each in turn), for a shared machine",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")

    compile_bytecode(live=args.smoke)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    load_before = load()
    gpus, gpu_source = gpu_names()
    fp4doctor = fp4doctor_command()
    host = machine(gpus, gpu_source, fp4doctor)
    unusable = fp4doctor_works(fp4doctor)
    if unusable:
        print(f"fp4doctor cannot run: {unusable}", file=sys.stderr)

    # The parsed-profile cache: this benchmark's own, filled by each command's warm-up run.
    cache = tempfile.TemporaryDirectory(prefix="fp4doctor-bench-cache-")
    os.environ["FP4DOCTOR_CACHE_DIR"] = cache.name
    planned = jobs(fp4doctor, gpus, args.smoke)
    specs = {
        job.tool: Spec(
            job.tool,
            job.command,
            job.why_absent,
            ok_codes=(0, 1) if job.fp4doctor else (0,),
            env=job.env,
            inspect=inspect_report if job.fp4doctor else None,
        )
        for job in planned
        if not (job.fp4doctor and unusable)
    }
    if args.interleave:
        measured = measure_interleaved(list(specs.values()), args.runs, timeout_s=args.timeout)
    else:
        measured = [
            measure(
                spec.tool,
                spec.command,
                spec.why_absent,
                args.runs,
                ok_codes=spec.ok_codes,
                env=spec.env,
                timeout_s=args.timeout,
                inspect=spec.inspect,
            )
            for spec in specs.values()
        ]
    done = {r.tool: r for r in measured}
    results = [
        done.get(job.tool)
        or Result(job.tool, job.command, "failed", unusable, env=dict(job.env or {}))
        for job in planned
    ]
    load_after = load()

    by_tool = {r.tool: r for r in results}
    compared = comparisons(gpus, args.smoke)
    fp4doctor_tools = {j.tool for j in planned if j.fp4doctor}
    broken = [r.tool for r in results if r.tool in fp4doctor_tools and r.status == "failed"]
    checks = verdicts(by_tool, compared, gpus, broken)
    print(render(results, compared, checks, host, args.runs, (load_before, load_after)))

    if args.json:
        document = {
            "benchmark": "bench_preflight",
            "schema_version": 1,
            "started": started,
            "runs": args.runs,
            "warmups": 1,
            "interleaved": args.interleave,
            "smoke": args.smoke,
            "machine": {**host, "loadavg_before": load_before, "loadavg_after": load_after},
            "results": [r.to_json() for r in results],
            "ratios": [
                {
                    "name": c.name,
                    "subject": c.subject,
                    "baseline": c.baseline,
                    "value": c.value(by_tool),
                    "target_max": c.target_max,
                    "met": c.verdict(by_tool),
                }
                for c in compared
            ],
            "targets": checks,
        }
        tmp = f"{args.json}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=2)
            out.write("\n")
        os.replace(tmp, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    missed = any(t["met"] is False for t in checks)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
