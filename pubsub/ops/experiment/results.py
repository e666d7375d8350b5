"""After an experiment: convergence from the status polls, the analysis run over the
events, the two compared marker by marker, and the run directory's leftovers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from functools import partial
from itertools import takewhile
from pathlib import Path
from typing import Any

from pubsub.ops.experiment.records import (
    ANALYSIS_TIMEOUT,
    STABLE_SECONDS,
    ExperimentError,
    MarkerRecord,
    Progress,
    StatusCheck,
)
from pubsub.telemetry.events import INPROGRESS, SUFFIX


def _within(limit: float, check: StatusCheck) -> bool:
    return check.ts <= limit


def status_convergence(
    markers: Iterable[MarkerRecord],
    checks: list[StatusCheck],
    topics: Iterable[str],
    stable: float = STABLE_SECONDS,
) -> list[dict[str, Any]]:
    """Per marker and topic: seconds from the marker to the first poll that found the topic
    legitimate and after which every poll of the next `stable` seconds agreed (None if
    there is none) -- the same rule as the analysis' ``--stable``."""
    rows = []
    for marker in markers:
        for topic in [marker.topic] if marker.topic else list(topics):
            series = [c for c in checks if c.topic == topic and c.ts >= marker.ts]
            first = next(
                (
                    c.ts
                    for k, c in enumerate(series)
                    if all(d.legitimate for d in takewhile(partial(_within, c.ts + stable), series[k:]))
                ),
                None,
            )
            rows.append(
                {
                    "marker_id": marker.id,
                    "action": marker.action,
                    "topic": topic,
                    "time_to_legitimacy": None if first is None else first - marker.ts,
                }
            )
    return rows


def move_leftovers(events_dir: Path) -> int:
    """Move files still in ``.inprogress`` (from crashed daemons) into the events directory."""
    moved = 0
    folder = events_dir / INPROGRESS
    if not folder.is_dir():
        return 0
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        if path.stat().st_size == 0:
            path.unlink()
            continue
        path.replace(events_dir / path.name)
        moved += 1
    return moved


def run_analysis(run_dir: Path, progress: Progress, python: str | None = None) -> tuple[dict[str, Any], str]:
    """Run `pubsub analyze RUN_DIR` in its own process (its progress goes to our stderr);
    its summary.json and what it printed on stdout (a line per topic and the report's path),
    for the caller to print after its own table."""
    command = [python or sys.executable, "-m", "pubsub.cli.main", "analyze", str(run_dir)]
    progress(f"running the analysis: pubsub analyze {run_dir} (its own progress, with its own clock)")
    try:
        done = subprocess.run(
            command, stdout=subprocess.PIPE, text=True, timeout=ANALYSIS_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ExperimentError(f"the analysis did not finish within {ANALYSIS_TIMEOUT:g} s") from exc
    if done.returncode != 0:
        if done.stdout:
            progress(done.stdout.rstrip("\n"))
        raise ExperimentError(f"the analysis failed (exit {done.returncode}); see its output above")
    summary_path = run_dir / "analysis" / "summary.json"
    try:
        return dict(json.loads(summary_path.read_text(encoding="utf-8"))), done.stdout
    except (OSError, ValueError) as exc:
        raise ExperimentError(f"the analysis wrote no readable {summary_path}: {exc}") from exc


def compare(
    record: Mapping[str, Any], summary: Mapping[str, Any], tolerance: float
) -> list[dict[str, Any]]:
    """Join the analysis' convergence times with the status-based ones, marker by marker."""
    by_status = {
        (r["marker_id"], r["topic"]): r["time_to_legitimacy"] for r in record["status_convergence"]
    }
    rows = []
    for topic, data in (summary.get("topics") or {}).items():
        for conv in data.get("convergence", []):
            key = (conv["marker_id"], topic)
            if key not in by_status:
                continue
            analysed = conv.get("time_to_legitimacy") if conv.get("reached") else None
            seen = by_status[key]
            agree = (
                analysed is not None and seen is not None and abs(analysed - seen) <= tolerance
            ) or (analysed is None and seen is None)
            rows.append(
                {
                    "marker_id": conv["marker_id"],
                    "action": conv.get("action"),
                    "topic": topic,
                    "analysis": analysed,
                    "status": seen,
                    "agree": agree,
                }
            )
    return rows


def remove_run_dir(run_dir: Path) -> None:
    """Remove a previous run's directory (for --force)."""
    shutil.rmtree(run_dir, ignore_errors=True)
