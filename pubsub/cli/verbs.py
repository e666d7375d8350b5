"""The verbs modes share on the command line: subscribe, publish and status.

Each verb's default form is the skip ring's command (`pubsub.cli.skipring`).  Another mode
contributes a `VerbForm` (`pubsub.kernel.contracts`) through the registry (`pubsub.kernel.registry`):
its options, one of which selects it (``--broker HOST:PORT``), and the function that runs
it.  `add_forms` is the one place where a verb gains its forms, all of them at once and any
number: the CLI core calls it while it assembles the `pubsub` group; no mode touches
another's commands.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any

import click

from pubsub.kernel.contracts import VerbForm


def given(ctx: click.Context, name: str) -> bool:
    """Whether the user typed parameter `name` (a default, even from the environment such as
    PUBSUB_CLIENT_ID, does not count)."""
    return ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE


def add_forms(command: click.Command, forms: Sequence[VerbForm]) -> None:
    """Give `command` (a verb's default form) the options of every other mode's `forms` and
    dispatch on their selectors: with none given the default form runs (and every form's
    own options are refused); with one, that form's `run` does (and the default form's own
    options and the other forms' are refused); two selectors at once are refused.  Where a
    form names options of which exactly one must be given (`VerbForm.exclusive`), the rule
    covers those of every form and every form's selector."""
    if not forms:
        return
    own_names: list[list[str]] = []
    taken = {p.name for p in command.params}
    for form in forms:
        probe = click.Command("probe")
        for option in form.options:
            option(probe)
        names = [p.name for p in probe.params if p.name is not None]
        clash = taken.intersection(names)
        if clash:
            raise ValueError(f"{form.mode}'s form of {command.name} repeats options {sorted(clash)}")
        taken.update(names)
        own_names.append(names)
        command.params.extend(probe.params)
        command.help = inspect.cleandoc(command.help or "") + "\n\n" + form.help
    required = {name: what for form in forms for name, what in form.required.items()}
    selectors = " or ".join(_flag(form) for form in forms)
    for param in command.params:
        if param.name in required:
            param.required = False
            if isinstance(param, click.Option) and param.help:
                param.help = param.help.rstrip() + f" Required without {selectors}."
    exclusive = {name: flag for form in forms for name, flag in form.exclusive.items()}
    if exclusive:
        exclusive.update((form.selector, _flag(form)) for form in forms)
    default = command.callback
    assert default is not None, f"{command.name} has no callback"

    @functools.wraps(default)
    def callback(**kwargs: Any) -> Any:
        ctx = click.get_current_context()
        own = [{name: kwargs.pop(name) for name in names} for names in own_names]
        if exclusive:
            values = kwargs.copy()
            for of_form in own:
                values.update(of_form)
            chosen = [name for name in exclusive if values.get(name) is not None]
            if len(chosen) != 1:
                flags = list(exclusive.values())
                raise click.UsageError(f"give exactly one of {', '.join(flags[:-1])} and {flags[-1]}")
        selected = [i for i, form in enumerate(forms) if own[i][form.selector] is not None]
        if len(selected) > 1:
            raise click.UsageError(f"give at most one of {', '.join(_flag(forms[i]) for i in selected)}")
        if not selected:
            for form in forms:
                for name, flag in form.own.items():
                    if given(ctx, name):
                        raise click.UsageError(f"{flag} belongs to {form.mode} mode: give {_flag(form)} HOST:PORT too")
            for name, what in required.items():
                if kwargs.get(name) is None:
                    raise click.UsageError(f"Missing {what}.")
            return default(**kwargs)
        form = forms[selected[0]]
        for other in forms:
            if other is not form:
                for name, flag in other.own.items():
                    if given(ctx, name):
                        raise click.UsageError(f"{flag} belongs to {other.mode} mode, not to {_flag(form)}")
        for name, flag in form.foreign.items():
            if given(ctx, name):
                raise click.UsageError(f"{flag} is not used with {_flag(form)} (it belongs to the skip-ring mode)")
        return form.run(ctx, kwargs, own[selected[0]])

    command.callback = callback


def _flag(form: VerbForm) -> str:
    return "--" + form.selector.removesuffix("_ref").replace("_", "-")
