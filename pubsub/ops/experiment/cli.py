"""The `pubsub experiment` command group: `run` a scenario, `list` the shipped ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from pubsub.ops.experiment.scenario import (
    ScenarioError,
    load_scenario,
    resolve_scenario,
    shipped_scenarios,
)


@click.group("experiment", context_settings={"help_option_names": ["-h", "--help"]})
def experiment() -> None:
    """Scripted experiments on a local cluster of real processes, with analysis."""


class _BadScenario(click.ClickException):
    """A scenario that cannot be loaded: bad usage, exit code 2 (one line)."""

    exit_code = 2


@experiment.command("list")
def list_scenarios() -> None:
    """The scenarios shipped with pubsub (pass a name or a file to `run`)."""
    for name, path in shipped_scenarios().items():
        scenario = load_scenario(path)
        summary = " ".join(scenario.description.split())
        click.echo(f"{name:14} {scenario.nodes:3} nodes, {len(scenario.steps):2} steps  {summary}")


@experiment.command("run")
@click.argument("scenario")
@click.option(
    "--out",
    "run_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory (created; must not hold events of an earlier run).",
)
@click.option(
    "--analyze/--no-analyze",
    "analyze",
    default=True,
    show_default=True,
    help="Run the PySpark analysis over the events when the run is over.",
)
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0),
    default=1.5,
    show_default=True,
    help="Seconds by which the analysis and the status polls may disagree on a convergence time.",
)
def run(scenario: str, run_dir: Path, analyze: bool, tolerance: float) -> None:
    """Play SCENARIO (a YAML file, or the name of a shipped scenario) on a local cluster.

    Starts a supervisor and the scenario's nodes on 127.0.0.1, plays the timed steps
    (joins, leaves, publications, crashes, corruption, partitions, message loss), records
    every daemon's event stream under RUN_DIR/events, waits until every topic is
    legitimate again, stops every process, then runs `pubsub analyze RUN_DIR` and prints
    the convergence times next to what the nodes' own status showed.  The report is
    RUN_DIR/analysis/report.html.  Progress goes to stderr (a live line on a terminal,
    otherwise one line per phase on the run's clock, one per step and every 5 s the
    topics' state on the script's clock, and a "still ..." line after 10 s without any
    other); the table, the analysis' line per topic and the report's path to stdout.
    Exit status 1 if a topic never converged or the two measurements disagree, 2 if
    SCENARIO cannot be loaded (no such file, not YAML, not a valid scenario).
    """
    from pubsub.ops.experiment.records import ExperimentError
    from pubsub.ops.experiment.results import compare, run_analysis
    from pubsub.ops.experiment.runner import Experiment
    from pubsub.ops.processes import ClusterError, sigterm_unwinds
    from pubsub.ops.progress import Progress

    try:
        loaded = load_scenario(resolve_scenario(scenario))
    except ScenarioError as exc:
        raise _BadScenario(str(exc)) from None
    try:
        with sigterm_unwinds():  # SIGTERM stops the cluster (and the analysis) as Ctrl-C does
            with Progress("pubsub experiment") as progress:
                record = Experiment(loaded, run_dir, progress=progress.log, phase=progress.phase).play()
            if not analyze:
                click.echo(f"events in {run_dir / 'events'}; analysis skipped")
                _exit_unsettled(record)
                return
            # `pubsub analyze` shows its own progress on the same stderr
            summary, printed = run_analysis(run_dir.resolve(), lambda line: click.echo(line, err=True))
    except (ExperimentError, ClusterError) as exc:
        raise click.ClickException(str(exc)) from None
    rows = compare(record, summary, tolerance)
    (run_dir / "comparison.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    click.echo(format_comparison(rows))
    click.echo(printed, nl=False)  # the analysis' line per topic and the report's path
    _exit_unsettled(record)
    if not rows or not all(r["agree"] and r["analysis"] is not None for r in rows):
        raise click.ClickException(
            "a convergence time is missing or the analysis and status disagree (see above)"
        )


def _exit_unsettled(record: dict[str, Any]) -> None:
    if record["settled_after_script"] is None:
        raise click.ClickException(
            "the cluster did not become legitimate within the scenario's settle time"
        )


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f} s"


def format_comparison(rows: list[dict[str, Any]]) -> str:
    """The convergence table: marker, topic, analysis, status, agreement."""
    header = f"{'marker':36} {'topic':10} {'analysis':>10} {'status':>10}  agree"
    lines = ["time to legitimacy after each step of the script:", header]
    for r in rows:
        lines.append(
            f"{r['marker_id'][:36]:36} {r['topic'][:10]:10} {_seconds(r['analysis']):>10} "
            f"{_seconds(r['status']):>10}  {'yes' if r['agree'] else 'NO'}"
        )
    return "\n".join(lines)
