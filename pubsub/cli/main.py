"""The `pubsub` command: run the daemons, and talk to them as a client.

    pubsub [--version] [--log-level L] [--log-format text|json] COMMAND ...
    pubsub supervisor --listen HOST:PORT --data DIR [--interval S] [--config-budget N]
    pubsub node --listen HOST:PORT --supervisor HOST:PORT [--data DIR] [--interval S]
                [--no-flooding]
    (both daemons: [--config FILE] [--metrics-port PORT] [--metrics-host HOST]
                   [--events-dir DIR] [--admin-listen HOST:PORT [--admin-allow-remote]])
    pubsub subscribe TOPIC... --node HOST:PORT [--since N | --new-only] [--json] [--detach]
                     [--literal]          (TOPIC may be a pattern: 'sensors.*')
    pubsub unsubscribe TOPIC... --node HOST:PORT [--literal]
    pubsub publish TOPIC [MESSAGE | --file F] --node HOST:PORT [--quiet] [--json]
    pubsub history TOPIC --node HOST:PORT [--since N] [--json]
    pubsub status (--supervisor HOST:PORT | --node HOST:PORT) [--json]
    pubsub chaos (info | crash | corrupt-node | corrupt-supervisor | partition | drop)
                 --admin HOST:PORT ...     (fault injection, `pubsub.cli.chaos`)
    pubsub certs (ca DIR | issue DIR ROLE NAME...)   (TLS certificates, `pubsub.cli.certs`)
    pubsub analyze RUN_DIR [--stream] [--out DIR] [--until-idle S] [--trigger S]
                           (PySpark convergence analysis, `pubsub.ops.analysis.cli`)

The commands come from the registered modes (`pubsub.modes`): the skip ring's in
`pubsub.cli.skipring` (its daemon commands in `pubsub.cli.daemons`), the SCOT broker mode's in
`broker.cli`; the shared verbs subscribe, publish and status take each mode's form
(`pubsub.cli.verbs`).  The client commands talk to
the daemons through the client libraries (`pubsub.client.library`, `broker.client`).

Daemon settings come from the flags, then ``PUBSUB_*`` environment variables, then the
daemon's configuration file (``--config FILE`` / ``PUBSUB_CONFIG``), then defaults
(`pubsub.runtime.settings`).  Logs go to stderr, as text or JSON lines (``--log-format``).
Every failure an operator can cause (a bad flag or config file, an unreachable daemon, a
port that does not speak pubsub, a daemon of the wrong kind, an unusable data directory, a
port in use) ends with a one-line message and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import importlib

import click

from pubsub.cli.common import remember_log_settings
from pubsub.cli.verbs import add_forms
from pubsub.kernel.contracts import VerbForm
from pubsub.modes import all_modes
from pubsub.runtime.logsetup import configure as configure_logging

#: The tools that serve every mode: command name -> "module:attribute" of its click command.
#: Imported when the command is looked up, not when `pubsub` starts: a daemon's start-up
#: (and every CLI call) would otherwise import what only these tools use.
TOOLS = {
    "analyze": "pubsub.ops.analysis.cli:analyze",
    "certs": "pubsub.cli.certs:certs",
    "chaos": "pubsub.cli.chaos:chaos",
    "cluster": "pubsub.cli.cluster:cluster",
    "experiment": "pubsub.ops.experiment.cli:experiment",
}
#: The tools' lines in ``pubsub --help``, so that listing them imports none (Spark's,
#: YAML's and cryptography's imports would double the listing's time).  A test checks each
#: against the command's own short help.
TOOL_SUMMARIES = {
    "analyze": "Convergence analysis of a run's event stream (PySpark): Parquet tables, summary.json and "
    "an HTML report with plots under OUT.",
    "certs": "Create a cluster CA and issue TLS certificates (see the README's TLS section).",
    "chaos": "Inject faults into running daemons, through their admin addresses.",
    "cluster": "Run a local cluster (supervisor + N nodes as processes on 127.0.0.1) in the background: "
    "up, status, down.",
    "experiment": "Scripted experiments on a local cluster of real processes, with analysis.",
}


class _ToolSummary(click.Command):
    """Stands for a tool not imported yet in the group's listing: its name and summary."""

    def __init__(self, name: str) -> None:
        super().__init__(name, help=TOOL_SUMMARIES[name])  # shortened to the line as click does


class PubsubGroup(click.Group):
    """The `pubsub` group: the modes' commands are added when it is built (`_assemble`),
    the tools (`TOOLS`) on first lookup; listed, a tool not yet loaded shows its summary."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *TOOLS})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click's, without importing the tools to read their help (`TOOL_SUMMARIES`)."""
        commands = self.commands
        listed = [(name, commands.get(name) or _ToolSummary(name)) for name in self.list_commands(ctx)]
        shown = [(name, cmd) for name, cmd in listed if not cmd.hidden]
        if shown:
            limit = formatter.width - 6 - max(len(name) for name, _ in shown)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in shown])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in TOOLS and cmd_name not in self.commands:
            module, _, attribute = TOOLS[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, with the tools among the suggestions for a misspelt command (click
        suggests from the commands loaded so far)."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None


@click.group(cls=PubsubGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    package_name="pubsub-skipring",
    prog_name="pubsub",
    message="%(prog)s %(version)s",
    help="Print the installed version (pubsub-skipring) and exit.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    envvar="PUBSUB_LOG_LEVEL",
    help="Least severe log messages written to stderr (env PUBSUB_LOG_LEVEL; a daemon's "
    "--config file may set log_level).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"], case_sensitive=False),
    default="text",
    show_default=True,
    envvar="PUBSUB_LOG_FORMAT",
    help="Log lines as text, or as one JSON object per line (env PUBSUB_LOG_FORMAT; a "
    "daemon's --config file may set log_format).",
)
@click.pass_context
def main(ctx: click.Context, log_level: str, log_format: str) -> None:
    """Self-stabilizing publish/subscribe over skip rings (BuildSR).

    Run a supervisor and subscriber nodes on TCP, then subscribe nodes to topics and
    inspect their state.
    """
    configure_logging(log_level, log_format)
    remember_log_settings(ctx, log_level, log_format)


def _assemble(group: click.Group) -> None:
    """Every registered mode's commands, then its forms of the shared verbs (the tools that
    serve every mode come in on first use, `PubsubGroup`)."""
    for mode in all_modes():
        for command in mode.commands():
            group.add_command(command)
    forms: dict[str, list[VerbForm]] = {}
    for mode in all_modes():
        for form in mode.verb_forms():
            forms.setdefault(form.verb, []).append(form)
    for verb, of_verb in forms.items():
        add_forms(group.commands[verb], of_verb)


_assemble(main)

if __name__ == "__main__":  # `python -m pubsub.cli.main ...` (how LocalCluster starts daemons)
    main()
