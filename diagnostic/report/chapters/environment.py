"""The environment appendix: hardware, software and versions, the bundle's root hash and seals
(and the signature), how each arm's server was started, and the checklists."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from diagnostic.bundle.seal import Root, bundle_root
from diagnostic.bundle.store import Bundle
from diagnostic.checklist.lists import STATE_FILE, checklist_summary
from diagnostic.report import fmt as f
from diagnostic.report import launch
from diagnostic.report.views.base import KeyValue
from diagnostic.report.views.chapters import ChecklistRow
from diagnostic.schema.analysis import Analysis
from diagnostic.schema.bundle import Manifest, RunInfo
from diagnostic.schema.seal import RootSignature

__all__ = ["checklist", "engine_args", "environment", "hardware"]


def _envs(runs: Iterable[RunInfo]) -> list[dict[str, Any]]:
    return [r.environment for r in runs if r.environment]


def hardware(runs: list[RunInfo]) -> str:
    """'1 × NVIDIA H200 (143771 MiB)' or the CPU model when no GPU was seen."""
    for env in _envs(runs):
        gpus = env.get("gpus") or []
        if gpus:
            names: dict[str, int] = {}
            for g in gpus:
                label = f"{g.get('name', 'GPU')} ({g.get('memory_mib', '?')} MiB)"
                names[label] = names.get(label, 0) + 1
            return ", ".join(f"{n} × {label}" for label, n in names.items())
    for env in _envs(runs):
        if env.get("cpu"):
            cores = f", {env['cpu_count']} threads" if env.get("cpu_count") else ""
            return f"CPU: {env['cpu']}{cores}"
    return f.MISSING


def _distinct(runs: list[RunInfo], key: str) -> str:
    values = dict.fromkeys(str(e[key]) for e in _envs(runs) if e.get(key) not in (None, ""))
    return ", ".join(values) or f.MISSING


_NO_SMI = "not found"  # measure/environment.py's nvidia_smi when the machine has none


def _no_gpu(runs: list[RunInfo]) -> str | None:
    """What to print for the GPU driver and CUDA of a server that ran on a machine with no
    GPU (a CPU engine: every run local, no nvidia-smi there), else None."""
    envs = _envs(runs)
    cpu = bool(envs) and all(
        e.get("server_is_local") is True and not e.get("gpus") and e.get("nvidia_smi") == _NO_SMI
        for e in envs
    )
    return "none: the serving machine has no GPU (no nvidia-smi)" if cpu else None


def _recorded_model(runs: list[RunInfo]) -> str | None:
    return next((m for r in runs if (m := launch.recorded_model(r))), None)


def seals(root: Root) -> str:
    """Whether the root hash rests on seals taken as each run ended."""
    n = len(root.runs)
    if root.sealed:
        return f"every run sealed as it ended ({n} of {n}); `diagnose verify` checks each file"
    if len(root.unsealed) == n:
        return "recorded before sealing: integrity not provable, consistency checked"
    return f"{n - len(root.unsealed)} of {n} runs sealed; not sealed: {', '.join(root.unsealed)}"


def environment(
    a: Analysis, bundle: Bundle, runs: list[RunInfo], signature: RootSignature | None = None
) -> list[KeyValue]:
    """Environment appendix: hardware, software, versions and the bundle's fingerprint: its
    root hash over the seals, and the root's signature when the report was signed."""
    from diagnostic import __version__

    engines = dict.fromkeys(f"{r.engine.name} {r.engine.version or ''}".strip() for r in runs)
    no_gpu = _no_gpu(runs)
    rows = [
        ("Hardware", hardware(runs)),
        ("GPU driver", no_gpu or _distinct(runs, "driver")),
        ("CUDA", no_gpu or _distinct(runs, "cuda")),
        ("Host", _distinct(runs, "host")),
        ("Operating system", _distinct(runs, "os")),
        ("Python", _distinct(runs, "python")),
        ("Engine", ", ".join(engines) or f.MISSING),
        ("Server URL", f.text(bundle.manifest.target.base_url, f.NOT_RECORDED)),
        ("Model", f.text(_recorded_model(runs) or a.model or bundle.manifest.target.model)),
        ("Bundle", Path(a.bundle).name),  # as analysed: verify re-renders it under any name
        ("Bundle created", f.text(bundle.manifest.created_at, f.NOT_RECORDED)),
        ("Recorded with", f"diagnose {bundle.manifest.tool_version}"),
        ("Analysed with", f"diagnose {a.tool_version}"),
        ("Report rendered with", f"diagnose {__version__}"),
    ]
    root = bundle_root(bundle, runs)
    if bundle.manifest.bundle_id:
        rows.append(("Bundle id", bundle.manifest.bundle_id))
    rows += [("Bundle root hash (sha256)", root.digest), ("Seals", seals(root))]
    if signature is not None:
        rows.append(("Signature (ed25519)", f"{signature.signature} by {signature.key_id}"))
    if _distinct(runs, "server_is_local") == "False":
        rows.insert(1, ("Note", "hardware describes the measuring machine; the server was remote"))
    return [KeyValue(key=k, value=f.text(v)) for k, v in rows]


def engine_args(manifest: Manifest, runs: list[RunInfo]) -> list[KeyValue]:
    """How each arm's server was started: the launch command (its shell variables expanded
    where the bundle recorded their values), else the server's own args."""
    out = []
    arms = [a.name for a in manifest.plan.arms] or list(dict.fromkeys(r.arm for r in runs))
    for name in arms:
        spec = next((a for a in manifest.plan.arms if a.name == name), None)
        run = next((r for r in runs if r.arm == name), None)
        value = spec.launch if spec and spec.launch else None
        if value is None and run is not None and run.launch is not None:
            value = run.launch.command
        if value is not None:
            value = launch.expand(value, launch.launch_values(run))
        if value is None and run is not None and run.server_args:
            value = json.dumps(run.server_args, sort_keys=True, default=str)
        out.append(KeyValue(key=name, value=f.text(value, f.NOT_RECORDED)))
    return out


def checklist(bundle: Bundle) -> list[ChecklistRow]:
    """The consultant's checklists evaluated on the bundle, when it holds ticks (checklist.json)."""
    if not (bundle.path / STATE_FILE).is_file():
        return []
    return [
        ChecklistRow(
            item=f"{s.list_name}: {s.text}",
            status=s.label,
            status_class=s.status or "none",
            evidence="; ".join(x for x in (s.evidence, s.note or "") if x) or "—",
        )
        for s in checklist_summary(bundle)
    ]
