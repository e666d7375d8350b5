"""The verbs modes share on the command line: subscribe, publish and status.

Each verb's default form is the skip ring's command (`pubsub.cli.skipring`).  Another mode
contributes a `VerbForm` (`pubsub.kernel.contracts`) through the registry (`pubsub.modes`):
its options, one of which selects it (``--broker HOST:PORT``), and the function that runs
it.  `add_form` is the one place where a verb gains a form: the CLI core calls it while it
assembles the `pubsub` group; no mode touches another's commands.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import click

from pubsub.kernel.contracts import VerbForm


def given(ctx: click.Context, name: str) -> bool:
    """Whether the user typed parameter `name` (a default, even from the environment such as
    PUBSUB_CLIENT_ID, does not count)."""
    return ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE


def add_form(command: click.Command, form: VerbForm) -> None:
    """Give `command` (a verb's default form) the options of `form` and dispatch on its
    selector: without it the default form runs (and `form`'s own options are refused),
    with it `form.run` does (and the default form's own options are refused)."""
    probe = click.Command("probe")
    for option in form.options:
        option(probe)
    command.params.extend(probe.params)
    for param in command.params:
        if param.name in form.required:
            param.required = False
            if isinstance(param, click.Option) and param.help:
                param.help = param.help.rstrip() + f" Required without {_flag(form)}."
    command.help = inspect.cleandoc(command.help or "") + "\n\n" + form.help
    default = command.callback
    assert default is not None, f"{command.name} has no callback"
    own_names = [p.name for p in probe.params if p.name is not None]

    @functools.wraps(default)
    def callback(**kwargs: Any) -> Any:
        ctx = click.get_current_context()
        own = {name: kwargs.pop(name) for name in own_names}
        if form.exclusive:
            chosen = [name for name in form.exclusive if (own | kwargs).get(name) is not None]
            if len(chosen) != 1:
                flags = list(form.exclusive.values())
                raise click.UsageError(
                    f"give exactly one of {', '.join(flags[:-1])} and {flags[-1]}"
                )
        if own[form.selector] is None:
            for name, flag in form.own.items():
                if given(ctx, name):
                    raise click.UsageError(f"{flag} belongs to {form.mode} mode: give {_flag(form)} HOST:PORT too")
            for name, what in form.required.items():
                if kwargs.get(name) is None:
                    raise click.UsageError(f"Missing {what}.")
            return default(**kwargs)
        for name, flag in form.foreign.items():
            if given(ctx, name):
                raise click.UsageError(f"{flag} is not used with {_flag(form)} (it belongs to the skip-ring mode)")
        return form.run(ctx, kwargs, own)

    command.callback = callback


def _flag(form: VerbForm) -> str:
    return "--" + form.selector.removesuffix("_ref").replace("_", "-")
