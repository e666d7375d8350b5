"""`pubsub.client.roles`: what a wrong daemon's address is told, inside and outside a command."""

from __future__ import annotations

import click
from click.testing import CliRunner

from pubsub.client.roles import role_problem

SUPERVISOR = {"role": "supervisor"}


def test_a_program_using_the_library_is_told_whose_address_is_needed() -> None:
    assert role_problem("h:1", SUPERVISOR, "node") == (
        "h:1 is the supervisor, not a subscriber node; a subscriber node's address is needed here"
    )
    assert role_problem("h:1", SUPERVISOR, "supervisor") is None


def test_a_command_names_the_option_only_if_it_has_it() -> None:
    @click.command()
    @click.option("--node")
    @click.option("--supervisor", "sup")
    def both(node: str | None, sup: str | None) -> None:
        click.echo(role_problem("h:1", SUPERVISOR, "node"))

    @click.command()
    @click.option("--node")
    def node_only(node: str | None) -> None:
        click.echo(role_problem("h:1", SUPERVISOR, "node"))

    assert CliRunner().invoke(both).output.endswith("; give its address with --supervisor\n")
    assert CliRunner().invoke(node_only).output.endswith("; a subscriber node's address is needed here\n")
