"""`pubsub publish` reading standard input: one publication per line, a graceful stop.

Each acknowledgement is printed as soon as it (and every line before it) is acknowledged --
never held back until the next line is read, so ``tail -F log | pubsub publish ...`` shows
every acknowledgement as it happens (a closed stdout, ``| head -1``, ends the printing, not
the publishing).  SIGINT or SIGTERM stops reading at once; the
publications in flight get `pubsub.client.run.ACK_GRACE` seconds to be acknowledged; then a
summary goes to stderr: how many were acknowledged, and each line that was sent but not
acknowledged (*unknown*: the node may or may not have stored it).  A publication that
fails stops the reading too; the ones in flight then are awaited, and the error names the
failed line and the later lines that were acknowledged all the same.  Exit status: 0 when
nothing is unknown, 1 when something is (or a publication failed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from pubsub.cli.common import silence_stdout
from pubsub.cli.formats import format_ack
from pubsub.client.library import Ack, Client, ClientError, PublishError
from pubsub.client.run import ACK_GRACE, Outcome, Stopping, publish_window, stdin_lines
from pubsub.kernel.message import Ref

#: Characters of an unknown line shown in the summary.
PREVIEW = 60

T = TypeVar("T")


def preview(payload: bytes) -> str:
    return shorten(payload.decode("utf-8", errors="replace"))


def shorten(text: str) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= PREVIEW else text[: PREVIEW - 3] + "..."


async def publish_stdin(
    stopping: Stopping,
    topic: str,
    node_ref: Ref,
    *,
    quiet: bool,
    as_json: bool,
    timeout: float,
    retries: int,
) -> None:
    """Publish every line of stdin on `topic` through `node_ref` (see the module docstring)."""

    printer = AckPrinter(quiet)

    def show(number: int, ack: Ack) -> None:
        printer(format_ack(ack, as_json))

    async with Client(node_ref, publish_timeout=timeout) as client:
        outcome = await publish_window(
            stdin_lines(), lambda payload: client.publish(topic, payload, retries=retries), show, PublishError, stopping
        )
    report(outcome, topic, node_ref, quiet)


def report(outcome: Outcome[bytes, Ack, PublishError], topic: str, node_ref: Ref, quiet: bool) -> None:
    """The summary on stderr; ClientError (exit 1) when something failed or is unknown.
    Input that ended without a line is said so (stderr, exit 0): nothing was sent, so the
    node was not even asked."""
    summarize(outcome, "acknowledged", preview)
    if outcome.stopped_by is None and not outcome.acknowledged and outcome.failure is None:
        click.echo(f"nothing published: stdin ended without a line (the node {node_ref} was not contacted)", err=True)
    if quiet:
        click.echo(f"published {outcome.acknowledged} to {topic} through {node_ref}")


def line_ranges(numbers: list[int]) -> str:
    """Ascending line numbers as ranges: [3, 4, 5, 9] -> "lines 3-5, 9"."""
    parts: list[str] = []
    start = prev = numbers[0]
    for number in [*numbers[1:], None]:
        if number is not None and number == prev + 1:
            prev = number
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        if number is not None:
            start = prev = number
    return ("lines " if len(numbers) > 1 else "line ") + ", ".join(parts)


class AckPrinter:
    """Prints one line per acknowledgement on stdout, until stdout is closed (``| head -1``):
    then it says so once on stderr and prints no more, while the publishing goes on -- the
    input decides what is published, not whoever reads the acknowledgements."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.closed = False

    def __call__(self, line: str) -> None:
        if self.quiet or self.closed:
            return
        try:
            click.echo(line)
        except BrokenPipeError:
            self.closed = True
            silence_stdout()
            click.echo("stdout was closed: acknowledgements are no longer printed; publishing the rest", err=True)


def summarize(outcome: Outcome[T, Any, Any], done_word: str, show: Callable[[T], str]) -> None:
    """Print what a `publish_window` run that was stopped or failed leaves behind (stderr):
    how many were `done_word` and each unknown item (`show`-n); ClientError (exit 1) when a
    publication failed or some are unknown."""
    done = outcome.acknowledged
    if outcome.stopped_by is not None:
        unknown = outcome.unknown
        click.echo(
            f"stopped by {outcome.stopped_by}: {done} publication(s) {done_word}"
            + (
                f", {len(unknown)} unknown (sent, not {done_word} within {ACK_GRACE:g} s: "
                "they may or may not be stored)"
                if unknown
                else ", none unknown"
            ),
            err=True,
        )
        for number, item in unknown:
            click.echo(f"unknown: line {number}: {show(item)}", err=True)
    for number, error in outcome.also_failed:
        click.echo(f"also failed: line {number}: {error}", err=True)
    if outcome.failure is not None:
        failure, after = outcome.failure, outcome.acknowledged_after_failure
        where = f"line {outcome.failed_number}: " if outcome.failed_number is not None else ""
        told = f" ({done - len(after)} {done_word} before it" if done else ""
        if after:
            told += (
                f"; {len(after)} line(s) after it, already sent when it failed, were {done_word} too: "
                f"{line_ranges(after)} -- do not send them again"
            )
        raise ClientError(getattr(failure, "code", "failed"), f"{where}{failure}{told}{')' if done else ''}")
    if outcome.unknown:
        raise ClientError(
            "unknown", f"{len(outcome.unknown)} publication(s) unknown after {outcome.stopped_by}"
        )
