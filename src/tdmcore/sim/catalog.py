"""Shipped link scenarios (the paper's snapshots) and loading of user pod files.

The numbers live in ``data/snapshots.json`` with the source of each one; the test
suite re-derives them from the shipped data (:mod:`tdmcore.data`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _validation as v
from ..data import open_data
from ..metronome.link import LinkPod
from ..model import TrafficPattern, priority_value

__all__ = ["LinkScenario", "link_scenarios", "load_link_file", "parse_pod"]


@dataclass(frozen=True)
class LinkScenario:
    name: str
    title: str
    capacity_gbps: float
    pods: tuple[LinkPod, ...]
    sources: dict[str, str]


def _pod_from_mapping(raw: Any, where: str) -> LinkPod:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object with name, period_ms, duty_cycle, "
                         "bandwidth_gbps")
    unknown = set(raw) - {"name", "job", "priority", "period_ms", "duty_cycle",
                          "bandwidth_gbps"}
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}")
    for key in ("period_ms", "duty_cycle", "bandwidth_gbps"):
        if key not in raw:
            raise ValueError(f"{where}.{key}: missing")
    try:
        pattern = TrafficPattern(raw["period_ms"], raw["duty_cycle"], raw["bandwidth_gbps"])
    except ValueError as exc:
        raise ValueError(f"{where}.{exc}") from None
    values = {"period_ms": pattern.period_ms, "duty_cycle": pattern.duty_cycle,
              "bandwidth_gbps": pattern.bandwidth_gbps}
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.name: expected a non-empty string")
    job = raw.get("job")
    if job is not None and (not isinstance(job, str) or not job):
        raise ValueError(f"{where}.job: expected a non-empty string")
    priority = priority_value(raw.get("priority", 0), f"{where}.priority")  # one rule
    return LinkPod(name=name, job=job, priority=priority, **values)


def _parse_link(raw: Any, where: str) -> tuple[float, tuple[LinkPod, ...]]:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object with capacity_gbps and pods")
    if "capacity_gbps" not in raw:
        raise ValueError(f"{where}.capacity_gbps: missing")
    cap = v.capacity(f"{where}.capacity_gbps", raw["capacity_gbps"])
    if "pods" not in raw:
        raise ValueError(f"{where}.pods: missing")
    pods_raw = raw["pods"]
    if not isinstance(pods_raw, list) or not pods_raw:
        raise ValueError(f"{where}.pods: expected a non-empty list")
    pods = tuple(_pod_from_mapping(p, f"{where}.pods[{i}]") for i, p in enumerate(pods_raw))
    return float(cap), pods


def link_scenarios() -> dict[str, LinkScenario]:
    """The shipped link scenarios, by name."""
    with open_data("snapshots.json") as fh:  # TDMCORE_DATA applies, as to every data file
        data = json.load(fh)
    out = {}
    for name, raw in data["links"].items():
        cap, pods = _parse_link(raw, name)
        out[name] = LinkScenario(name, raw["title"], cap, pods, dict(raw.get("sources", {})))
    return out


def load_link_file(path: str | Path) -> tuple[float, tuple[LinkPod, ...]]:
    """Read a link file: ``{"capacity_gbps": B, "pods": [{name, period_ms, ...}]}``.

    JSON, or YAML when the name ends in ``.yaml``/``.yml``, read as scenario files
    are (:func:`tdmcore.sim.scenario_file.parse_document`: duplicate keys refused).
    Errors name the file and the field.
    """
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise ValueError(f"file: cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"file: {path} is not UTF-8 text") from exc
    from .scenario_file import parse_document

    try:
        raw = parse_document(text, path.suffix.lower() in (".yaml", ".yml"))
    except ValueError as exc:  # "file: invalid JSON at line ...": name the file
        raise ValueError(f"file: {path}: {str(exc).removeprefix('file: ')}") from None
    try:
        return _parse_link(raw, "$")
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def parse_pod(text: str, index: int) -> LinkPod:
    """``NAME:PERIOD_MS:DUTY:GBPS[:PRIORITY[:JOB]]`` as given to ``--pod``."""
    parts = text.split(":")
    where = f"--pod[{index + 1}]"
    if not 4 <= len(parts) <= 6:
        raise ValueError(f"{where}: expected NAME:PERIOD_MS:DUTY:GBPS[:PRIORITY[:JOB]], "
                         f"got {text!r}")
    raw: dict[str, Any] = {"name": parts[0]}
    for key, part in zip(("period_ms", "duty_cycle", "bandwidth_gbps"), parts[1:4],
                         strict=True):
        try:
            raw[key] = float(part)
        except ValueError:
            raise ValueError(f"{where}.{key}: expected a number, got {part!r}") from None
    if len(parts) >= 5:
        p = parts[4]
        if p.lower() in ("high", "low"):
            raw["priority"] = p
        else:
            try:
                raw["priority"] = int(p)
            except ValueError:
                raise ValueError(f"{where}.priority: expected an integer or 'high'/'low', "
                                 f"got {p!r}") from None
    if len(parts) == 6:
        raw["job"] = parts[5]
    return _pod_from_mapping(raw, where)
