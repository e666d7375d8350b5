"""The verb dispatcher (`pubsub.cli.verbs.add_forms`) with any number of forms.

Today one other mode (the SCOT brokers) adds forms to the shared verbs; the dispatcher must
serve as many as are registered.  Here a toy verb gets two made-up forms, each with its
selector and an option of its own, and the dispatch and every usage error are checked.
"""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

from pubsub.cli.verbs import add_forms
from pubsub.kernel.contracts import VerbForm


def toy(exclusive: bool = False) -> tuple[click.Command, list[tuple[str, Any]]]:
    ran: list[tuple[str, Any]] = []

    @click.command()
    @click.argument("topic", required=True)
    @click.option("--node", "node_ref", default=None, required=True)
    @click.option("--since", default=None)
    def verb(topic: str | None, node_ref: str | None, since: str | None) -> None:
        ran.append(("default", (topic, node_ref, since)))

    def form(name: str, own: str) -> VerbForm:
        def run(ctx: Any, default: dict[str, Any], mine: dict[str, Any]) -> None:
            ran.append((name, mine))

        return VerbForm(
            verb="verb", mode=name, selector=f"{name}_ref",
            options=(
                click.option(f"--{name}", f"{name}_ref", default=None),
                click.option(f"--{own}", own, default=None),
            ),
            own={own: f"--{own}"}, foreign={"since": "--since"},
            required={"topic": "argument 'TOPIC'", "node_ref": "option '--node'"},
            run=run, help=f"{name} form.",
            exclusive={"node_ref": "--node", f"{name}_ref": f"--{name}"} if exclusive else {},
        )

    add_forms(verb, [form("alpha", "colour"), form("beta", "shape")])
    return verb, ran


def invoke(command: click.Command, *args: str) -> click.testing.Result:
    return CliRunner().invoke(command, list(args))


def test_each_selector_runs_its_own_form_with_its_own_options() -> None:
    verb, ran = toy()
    assert invoke(verb, "t", "--node", "n:1").exit_code == 0
    assert invoke(verb, "--alpha", "a:1", "--colour", "red").exit_code == 0
    assert invoke(verb, "--beta", "b:1", "--shape", "round").exit_code == 0
    assert ran == [
        ("default", ("t", "n:1", None)),
        ("alpha", {"alpha_ref": "a:1", "colour": "red"}),
        ("beta", {"beta_ref": "b:1", "shape": "round"}),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--alpha", "a:1", "--beta", "b:1"), "give at most one of --alpha, --beta"),
        (("t", "--node", "n:1", "--shape", "x"), "--shape belongs to beta mode: give --beta HOST:PORT too"),
        (("--alpha", "a:1", "--shape", "x"), "--shape belongs to beta mode, not to --alpha"),
        (("--beta", "b:1", "--since", "3"), "--since is not used with --beta"),
        (("--node", "n:1",), "Missing argument 'TOPIC'."),
    ],
)
def test_what_does_not_fit_the_form_chosen_is_refused(args: tuple[str, ...], message: str) -> None:
    verb, ran = toy()
    result = invoke(verb, *args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert ran == []


def test_exclusivity_covers_every_forms_selector() -> None:
    verb, ran = toy(exclusive=True)
    for args in ((), ("t", "--node", "n:1", "--beta", "b:1")):
        result = invoke(verb, *args)
        assert result.exit_code == 2 and "give exactly one of --node, --alpha and --beta" in result.output
    assert invoke(verb, "--beta", "b:1").exit_code == 0 and ran == [("beta", {"beta_ref": "b:1", "shape": None})]


def test_two_forms_may_not_bring_the_same_option() -> None:
    @click.command()
    @click.option("--colour", default=None)
    def verb(colour: str | None) -> None: ...

    form = VerbForm(
        verb="verb", mode="alpha", selector="alpha_ref",
        options=(click.option("--alpha", "alpha_ref", default=None), click.option("--colour", default=None)),
        own={}, foreign={}, required={}, run=lambda ctx, d, m: None, help="",
    )
    with pytest.raises(ValueError, match="repeats options"):
        add_forms(verb, [form])
