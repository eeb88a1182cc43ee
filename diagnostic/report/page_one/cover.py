"""The cover: title, client, date, and what was measured (engine, model, speculation, hardware)."""

from __future__ import annotations

from pathlib import PurePosixPath

from diagnostic.report import fmt as f
from diagnostic.report import launch
from diagnostic.report.chapters.environment import hardware
from diagnostic.report.inputs import Inputs, served_method
from diagnostic.report.views.page_one import Cover

__all__ = ["DEFAULT_TITLE", "cover"]

DEFAULT_TITLE = "Speculative decoding performance review"


def cover(inputs: Inputs) -> Cover:
    """Cover facts; what the bundle did not record is None (left off the page)."""
    m, a, people = inputs.bundle.manifest, inputs.analysis, inputs.people
    machine = hardware(inputs.runs)
    return Cover(
        title=inputs.title or a.title or DEFAULT_TITLE,
        client=people.client or a.client,
        site=people.site,
        date=f.date(m.created_at),
        consultant=people.consultant,
        engine=_engines(inputs) or None,
        model=_short(_model(inputs)),
        drafter=_drafters(inputs) or None,
        hardware=None if machine == f.MISSING else machine,
    )


def _short(path: str | None) -> str | None:
    """A model or drafter named by its name on page 1, never by a folder of the recording
    machine ('/root/g3/a/mla' is 'mla'; the appendix's launch commands give the path)."""
    if not path or not path.startswith(("/", "~", "./")):
        return path
    return PurePosixPath(path).name or path


def _model(inputs: Inputs) -> str | None:
    """The model path the engine reported, else the id the server answered with (an alias
    such as llama.cpp's -a), else the plan's; None when nothing was recorded."""
    runs = inputs.runs
    values = [*(launch.recorded_model(r) for r in runs), *(r.model for r in runs)]
    return next((v for v in [*values, inputs.bundle.manifest.target.model] if v), None)


def _engines(inputs: Inputs) -> str:
    seen = dict.fromkeys(
        f"{r.engine.name} {r.engine.version}" if r.engine.version else r.engine.name
        for r in inputs.runs
        if r.engine.name != "unknown"
    )
    return ", ".join(seen) or ", ".join(inputs.analysis.engines)


def _drafters(inputs: Inputs) -> str:
    """Speculation methods seen in the logs (with the drafter), else in the plan's params."""
    found: dict[str, None] = {}
    for facts in inputs.log_facts:
        if facts.spec.enabled:
            method = facts.spec.method or served_method(inputs.run_of(facts))
            name = f.method_name(method) if method else "on (method not recorded)"
            drafter = facts.spec.drafter
            if drafter:
                drafter = _short(launch.expand(drafter, launch.launch_values(inputs.run_of(facts))))
            found[f"{name} (drafter {drafter})" if drafter else name] = None
    for arm in inputs.analysis.arms:
        if arm.speculative and not found and arm.params.get("method"):
            found[f.method_name(str(arm.params["method"]))] = None
    return ", ".join(found)
