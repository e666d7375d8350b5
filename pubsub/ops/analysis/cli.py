"""The `pubsub analyze` command (also what ``spark-submit pubsub/ops/analysis/submit.py`` runs).

Importing this module does not import pyspark: the rest of the `pubsub` command works
without the ``analysis`` extra, and `analyze` says what is missing when it is.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import click


class AnalysisError(click.ClickException):
    """A problem an operator can fix (missing Java or pyspark, bad paths): one line, exit 1."""


def _positive(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not value > 0:
        raise click.BadParameter("must be a positive number of seconds")
    return value


def _non_negative(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not value >= 0:
        raise click.BadParameter("must be zero or a positive number of seconds")
    return value


def _events_of(run_dir: Path) -> Path:
    """RUN_DIR/events -- or RUN_DIR itself when it holds event files and has no events/
    (the daemons were given ``--events-dir RUN_DIR``)."""
    nested = run_dir / "events"
    if nested.is_dir():
        return nested
    try:
        own = any(run_dir.glob("*.jsonl")) or (run_dir / ".inprogress").is_dir()
    except OSError:
        own = False
    return run_dir if own else nested


def nothing_usable(summary: dict[str, Any]) -> str | None:
    """Why a finished analysis has nothing to report (no usable event among its input), or
    None when it has something."""
    used, unusable = summary["input"]["events_used"], sum(summary["input"]["unusable"].values())
    if used:
        return None
    return f"all {unusable} lines read were unusable" if unusable else "no event was found there"


@click.command("analyze", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--stream", is_flag=True, help="Live mode: keep updating the outputs while event files arrive."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output directory [default: RUN_DIR/analysis].",
)
@click.option(
    "--events-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the daemons' event files are [default: RUN_DIR/events, or RUN_DIR itself "
    "when it holds event files and no events/ directory].",
)
@click.option(
    "--until-idle",
    type=float,
    default=30.0,
    show_default=True,
    callback=_positive,
    help="Live mode: stop after this many seconds without new event files.",
)
@click.option(
    "--trigger",
    type=float,
    default=1.0,
    show_default=True,
    callback=_positive,
    help="Live mode: seconds between micro-batches.",
)
@click.option(
    "--bucket",
    type=float,
    default=0.5,
    show_default=True,
    callback=_positive,
    help="Width of the timeline's time buckets, seconds.",
)
@click.option(
    "--stable",
    type=float,
    default=0.5,
    show_default=True,
    callback=_non_negative,
    help="A topic counts as converged after a marker once it stays legitimate this "
    "long (or until the end of the data); 0 = first legitimate instant.",
)
@click.option(
    "--overlay",
    default=None,
    help="The overlay the run ran, whose legitimacy is measured [default: the default overlay, skipring].",
)
@click.option(
    "--master",
    default=None,
    help="Spark master [default: local[2], or whatever spark-submit was given].",
)
@click.option(
    "--shuffle-partitions",
    type=click.IntRange(1, 1000),
    default=2,
    show_default=True,
    help="spark.sql.shuffle.partitions.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Scratch space (checkpoint, copy of the events) [default: OUT/.work, removed at the end].",
)
def analyze(
    run_dir: Path,
    stream: bool,
    out: Path | None,
    events_dir: Path | None,
    until_idle: float,
    trigger: float,
    bucket: float,
    stable: float,
    overlay: str | None,
    master: str | None,
    shuffle_partitions: int,
    work_dir: Path | None,
) -> None:
    """Convergence analysis of a run's event stream (PySpark): Parquet tables, summary.json
    and an HTML report with plots under OUT.

    Batch mode reads every events/*.jsonl present and exits; --stream follows a run that is
    still going.  RUN_DIR may also be the directory the daemons wrote into (their
    --events-dir).  Progress goes to stderr: a live line on a terminal, otherwise one line
    per phase and a "still ..." line after 10 s without any other.  Needs Java 17+ and the `analysis` extra
    (pyspark, matplotlib, pyarrow).
    """
    from pubsub.kernel import registry
    from pubsub.ops.analysis.timeline import NotMeasured, tracker_factory

    overlay = overlay or registry.DEFAULT_OVERLAY
    try:
        tracker_factory(overlay)
    except (NotMeasured, registry.UnknownMode) as exc:
        raise AnalysisError(str(exc)) from exc
    events = (events_dir or _events_of(run_dir)).absolute()
    target = (out or run_dir / "analysis").absolute()
    if not stream and not events.is_dir():
        raise AnalysisError(
            f"no events directory {events} (daemons write there with --events-dir); "
            "use --stream to wait for a run that has not started yet"
        )
    if not stream and not any(path.stat().st_size for path in events.glob("*.jsonl")):
        raise AnalysisError(  # before Spark starts: nothing could come of it
            f"nothing to analyse in {events}: no event file (*.jsonl) with anything in it; "
            "use --stream to wait for a run that has not started yet"
        )
    if stream:
        try:
            events.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AnalysisError(f"cannot create {events}: {exc.strerror}") from exc
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AnalysisError(f"cannot create the output directory {target}: {exc.strerror}") from exc
    try:
        import matplotlib  # noqa: F401
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise AnalysisError(f"{exc.name} is not installed: pip install -e '.[analysis]'") from exc

    for noisy in ("py4j", "matplotlib"):  # their INFO lines drown the job's own progress
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from pubsub.ops.analysis.javacheck import JavaError
    from pubsub.ops.analysis.job import Options
    from pubsub.ops.analysis.live import run_analysis
    from pubsub.ops.analysis.session import create_session
    from pubsub.ops.progress import Progress

    opts = Options(
        run_dir=run_dir.absolute(),
        out=target,
        events_dir=events,
        stream=stream,
        until_idle=until_idle,
        trigger=trigger,
        bucket=bucket,
        stable=stable,
        work_dir=work_dir.absolute() if work_dir else None,
        overlay=overlay,
    )
    with Progress("pubsub analyze") as progress:
        if events != run_dir.absolute() / "events" and events_dir is None:
            progress.log(f"{run_dir} holds the event files itself: reading them there")
        progress.phase("checking Java and starting Spark")
        try:
            spark = create_session(master=master, shuffle_partitions=shuffle_partitions)
        except JavaError as exc:
            raise AnalysisError(str(exc)) from exc
        try:
            summary = run_analysis(spark, opts, log=progress.log, phase=progress.phase)
        except Exception as exc:  # a failed streaming query, an unwritable output, ...
            logging.getLogger("pubsub.ops.analysis").debug("analysis failed", exc_info=True)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise AnalysisError(
                f"the analysis failed: {first[:500]} "
                "(`pubsub --log-level debug analyze ...` shows the trace)"
            ) from exc
        finally:
            progress.phase("stopping Spark")
            spark.stop()
        progress.close(final=f"done in {time.monotonic() - progress.started:.1f} s")
    for warning in summary.get("warnings", []):
        click.echo(f"warning: {warning}", err=True)
    problem = nothing_usable(summary)
    if problem is not None:
        raise AnalysisError(f"nothing to analyse in {events}: {problem} (the report in {target} is empty)")
    for name, topic in summary.get("topics", {}).items():
        times = [
            f"{c.get('action') or c['marker_id']} "
            + ("not reached" if not c["reached"] else f"{c['time_to_legitimacy']:.3f} s")
            for c in topic.get("convergence", [])
        ]
        members = topic.get("members_at_end", 0)
        click.echo(
            f"{name}: {members} member{'' if members == 1 else 's'}, "
            f"legitimate {100 * (topic.get('legitimate_fraction') or 0):.1f}% of the time"
            + (f"; convergence after markers: {', '.join(times)}" if times else "")
        )
    click.echo(f"report: {target / 'report.html'}")
    sys.stdout.flush()
