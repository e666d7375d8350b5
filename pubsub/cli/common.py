"""What every command of `pubsub` shares: address and topic parameter types, daemon option
groups and settings loading with one-line errors, and running client coroutines."""

from __future__ import annotations

import asyncio
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pubsub.client.library import ClientError, parse_cursor
from pubsub.client.roles import role_problem
from pubsub.client.run import until_done, until_stopped
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.message import Message, Ref
from pubsub.kernel.wire import WireError, validate_ref, validate_topic
from pubsub.runtime.client import RequestError, request
from pubsub.runtime.envnames import CONFIG_ENV
from pubsub.runtime.logsetup import FORMATS, LEVELS
from pubsub.runtime.logsetup import configure as configure_logging

if TYPE_CHECKING:  # the daemons' settings (pydantic) are imported by the daemon commands only
    from pubsub.runtime.settings import ConfigFile, RuntimeSettings

F = TypeVar("F", bound=Callable[..., Any])

FLAGS = {
    "timeout_interval": "--interval",
    "config_budget": "--config-budget",
    "data_dir": "--data",
    "flooding": "--no-flooding",
    "dissemination": "--dissemination",
    "publish_linger": "--linger",
    "metrics_port": "--metrics-port",
    "metrics_host": "--metrics-host",
    "events_dir": "--events-dir",
    "admin_listen": "--admin-listen",
    "admin_allow_remote": "--admin-allow-remote",
    "web_listen": "--web-listen",
    "web_allow_remote": "--web-allow-remote",
    "tls_ca": "--tls-ca",
    "tls_cert": "--tls-cert",
    "tls_key": "--tls-key",
    "insecure": "--insecure",
    "permissions": "--permissions",
    "http_listen": "--http-listen",
    "http_allow_remote": "--http-allow-remote",
    "rho": "--rho",
    "coverage": "--coverage",
    "backup_method": "--backup-method",
    "resilience": "--resilience",
    "t_wait": "--t-wait",
    "sample_size": "--sample-size",
}


class Address(click.ParamType):
    """A HOST:PORT reference."""

    name = "HOST:PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Ref:
        try:
            return validate_ref(value)
        except WireError:
            self.fail(
                f"{value!r} is not HOST:PORT (host of letters, digits, '.', '-', '_'; "
                "port 1-65535)",
                param,
                ctx,
            )


class TopicName(click.ParamType):
    """A topic name: 1-256 characters, no control characters."""

    name = "TOPIC"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return validate_topic(value)
        except WireError as exc:
            self.fail(exc.detail, param, ctx)


ADDRESS = Address()


TOPIC = TopicName()


class ConfigError(click.ClickException):
    """Bad configuration (exit code 2, like a usage error)."""

    exit_code = 2


def check_own_addresses(role: str, addresses: dict[str, str | None]) -> None:
    """ConfigError (exit 2) when two of a daemon's listeners would take the same port:
    `addresses` maps each option (``--listen``, ``--http-listen``, ...) to its HOST:PORT, or
    None when off.  Caught here, it is one line before anything starts, not "address already
    in use" after the first listener is up."""
    wildcard = {"0.0.0.0", "::", ""}
    seen: list[tuple[str, str, str]] = []
    for option, address in addresses.items():
        if not address:
            continue
        host, _, port = address.rpartition(":")
        for other, other_host, other_port in seen:
            if port == other_port and (host == other_host or {host, other_host} & wildcard):
                raise ConfigError(
                    f"the {role}'s {option} {address} takes the port of its {other} {other_host}:{other_port}; "
                    "give each listener its own port"
                )
        seen.append((option, host, port))


# --- configuration files ---------------------------------------------------------------------
_CONFIG = "pubsub.config"
_LOG = "pubsub.log"
#: Keys every daemon's configuration file may hold besides its settings.
LOG_KEYS = ("log_level", "log_format")


def remember_log_settings(ctx: click.Context, level: str, fmt: str) -> None:
    """Record the group's --log-level / --log-format and whether the user gave them (flag or
    environment), so that a daemon's configuration file may set them otherwise."""
    ctx.meta[_LOG] = {
        "log_level": (level, ctx.get_parameter_source("log_level")),
        "log_format": (fmt, ctx.get_parameter_source("log_format")),
    }


def current_config() -> ConfigFile | None:
    """The configuration file of the daemon command being run (``--config``), if any."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_CONFIG)


def _apply_log_settings(ctx: click.Context, config: ConfigFile) -> None:
    chosen = dict(ctx.meta.get(_LOG) or {})
    values: dict[str, str] = {}
    for key, allowed in (("log_level", LEVELS), ("log_format", FORMATS)):
        value, source = chosen.get(key, (None, None))
        if config.get(key) is not None and source in (None, click.core.ParameterSource.DEFAULT):
            value = str(config.get(key)).lower()
            if value not in allowed:
                raise ConfigError(
                    f"invalid configuration: {key} (--{key.replace('_', '-')} / "
                    f"PUBSUB_{key.upper()} / config file {config.path}): must be one of "
                    f"{', '.join(allowed)}, not {config.get(key)!r}"
                )
        values[key] = value or ("info" if key == "log_level" else "text")
    if any(config.get(key) is not None for key in LOG_KEYS):
        configure_logging(values["log_level"], values["log_format"])


def config_option(what: str, classes: Callable[[], tuple[type[Any], ...]], *extra: str) -> Callable[[F], F]:
    """``--config FILE`` (env PUBSUB_CONFIG) for a daemon command: the file is read and
    checked (only settings of `classes`, the flag-only keys `extra` and log_level /
    log_format) before anything else; `current_config` hands it to every `load`.  Apply
    it above the option groups (`telemetry_options`, `admin_options`)."""

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, config: Path | None, **kwargs: Any) -> Any:
            from pubsub.runtime.settings import ConfigFile, SettingsError, settings_names

            ctx = click.get_current_context()
            loaded: ConfigFile | None = None
            if config is not None:
                try:
                    loaded = ConfigFile.read(config)
                    loaded.check(settings_names(*classes()) | set(extra) | set(LOG_KEYS), what)
                except SettingsError as exc:
                    raise ConfigError(str(exc)) from None
                _apply_log_settings(ctx.find_root(), loaded)
            ctx.meta[_CONFIG] = loaded
            return f(*args, **kwargs)

        return click.option(
            "--config",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            envvar=CONFIG_ENV,
            metavar="FILE",
            help="Configuration file (YAML, or TOML if it ends in .toml): setting names as in "
            "the README's settings table (the environment variable without PUBSUB_, lower "
            "case) to values.  Flags and PUBSUB_* variables override it (env PUBSUB_CONFIG).",
        )(wrapper)  # type: ignore[return-value]

    return decorate


def from_config(name: str, value: Any, flag: str, convert: Callable[[Any], Any]) -> Any:
    """A flag-only setting (``--listen``, ``--supervisor``): the flag's `value`, else the
    configuration file's `name` through `convert` (a one-line error when it is bad), else
    None."""
    if value is not None:
        return value
    config = current_config()
    if config is None or config.get(name) is None:
        return None
    try:
        return convert(config.get(name))
    except (ValueError, click.BadParameter) as exc:
        detail = exc.format_message() if isinstance(exc, click.BadParameter) else str(exc)
        raise ConfigError(
            f"invalid configuration: {name} ({flag} / config file {config.path}): {detail}"
        ) from None


def required(value: Any, name: str, flag: str) -> Any:
    if value is None:
        raise click.UsageError(f"Missing option '{flag}' (or {name} in the --config file).")
    return value


def overlay_option(f: Any) -> Any:
    """``--overlay``: which registered overlay (`pubsub.kernel.registry`) the daemon runs."""
    from pubsub.kernel.registry import DEFAULT_OVERLAY, overlay_names

    return click.option(
        "--overlay",
        type=click.Choice(overlay_names()),
        default=None,
        help=f"The overlay the topics' members form; the supervisor and its nodes must run the "
        f"same: a node given none runs its supervisor's, and one given another refuses to start "
        f"(default {DEFAULT_OVERLAY}; env PUBSUB_OVERLAY).",
    )(f)


def interval_option(f: Any) -> Any:
    return click.option(
        "--interval",
        type=float,
        default=None,
        metavar="S",
        help="Seconds between Timeout actions (default 0.3; env PUBSUB_TIMEOUT_INTERVAL).",
    )(f)


def settings_for_runtime(interval: float | None, listen: str, role: str) -> RuntimeSettings:
    """The runtime's settings: --interval, the `tls_options` flags, PUBSUB_*, the file;
    ConfigError also when the daemon may not listen on `listen` so (not loopback, no TLS),
    or when its TLS files do not load or its certificate does not name the `role` daemon
    at `listen`."""
    from pubsub.runtime.settings import RuntimeSettings, SettingsError, load
    from pubsub.runtime.tls import TlsError, check_daemon

    ctx = click.get_current_context(silent=True)
    tls = {} if ctx is None else ctx.meta.get(_TLS, {})
    try:
        settings = load(RuntimeSettings, FLAGS, config=current_config(), timeout_interval=interval, **tls)
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None
    try:
        check_daemon(settings, listen, role)
    except TlsError as exc:
        raise ConfigError(str(exc)) from None
    return settings


_TLS = "pubsub.tls"


def tls_options(f: Any) -> Any:
    """--tls-ca, --tls-cert, --tls-key, --insecure, --permissions of a daemon (also
    PUBSUB_TLS_CA / _CERT / _KEY, PUBSUB_INSECURE, PUBSUB_PERMISSIONS, or the --config file);
    `settings_for_runtime` applies them."""

    @functools.wraps(f)
    def wrapper(
        *args: Any, tls_ca: Path | None, tls_cert: Path | None, tls_key: Path | None, insecure: bool,
        permissions: Path | None, **kwargs: Any
    ) -> Any:
        click.get_current_context().meta[_TLS] = {
            "tls_ca": tls_ca, "tls_cert": tls_cert, "tls_key": tls_key, "insecure": insecure or None,
            "permissions": permissions,
        }
        return f(*args, **kwargs)

    pem = click.Path(dir_okay=False, exists=True, path_type=Path)
    wrapper = click.option(
        "--permissions",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        default=None,
        metavar="FILE",
        help="With TLS: what each client certificate may do (TOML; README, \"Permissions\"); "
        "reloaded on SIGHUP (env PUBSUB_PERMISSIONS).",
    )(wrapper)
    wrapper = click.option(
        "--insecure",
        is_flag=True,
        default=False,
        help="Allow listening on an address that is not loopback without TLS (env PUBSUB_INSECURE=1).",
    )(wrapper)
    for flag, what in (("--tls-key", "the key of --tls-cert"), ("--tls-cert", "this daemon's certificate"),
                       ("--tls-ca", "the cluster CA certificate")):
        wrapper = click.option(
            flag, type=pem, default=None, metavar="PEM",
            help=f"TLS: {what} (`pubsub certs`; all three --tls-* turn mutual TLS on; env "
            f"PUBSUB_{flag[2:].upper().replace('-', '_')}).",
        )(wrapper)
    return wrapper


def telemetry_options(f: Any) -> Any:
    """--metrics-port, --metrics-host, --events-dir; the command gets `telemetry`
    (`TelemetrySettings`, also read from PUBSUB_METRICS_* / PUBSUB_EVENTS_*)."""

    @functools.wraps(f)
    def wrapper(
        *args: Any,
        metrics_port: int | None,
        metrics_host: str | None,
        events_dir: Path | None,
        **kwargs: Any,
    ) -> Any:
        from pubsub.runtime.settings import SettingsError, TelemetrySettings, load

        try:
            telemetry = load(
                TelemetrySettings,
                FLAGS,
                config=current_config(),
                metrics_port=metrics_port,
                metrics_host=metrics_host,
                events_dir=events_dir,
            )
        except SettingsError as exc:
            raise ConfigError(str(exc)) from None
        return f(*args, telemetry=telemetry, **kwargs)

    options = [
        click.option(
            "--metrics-port",
            type=click.IntRange(0, 65535),
            default=None,
            metavar="PORT",
            help="Serve Prometheus metrics on http://HOST:PORT/metrics (0: off, the "
            "default; env PUBSUB_METRICS_PORT).",
        ),
        click.option(
            "--metrics-host",
            default=None,
            metavar="HOST",
            help="Address the metrics endpoint binds (default 127.0.0.1; env "
            "PUBSUB_METRICS_HOST).",
        ),
        click.option(
            "--events-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            metavar="DIR",
            help="Write the event stream (docs/events.md) into DIR (default: off; env "
            "PUBSUB_EVENTS_DIR).",
        ),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def admin_options(f: Any) -> Any:
    """--admin-listen, --admin-allow-remote; the command gets `admin` (`AdminSettings`,
    also read from PUBSUB_ADMIN_LISTEN / PUBSUB_ADMIN_ALLOW_REMOTE): the listener on which
    `pubsub chaos` may inject faults (`pubsub.runtime.admin`)."""

    @functools.wraps(f)
    def wrapper(
        *args: Any, admin_listen: str | None, admin_allow_remote: bool, **kwargs: Any
    ) -> Any:
        from pubsub.runtime.settings import AdminSettings, SettingsError, load

        try:
            admin = load(
                AdminSettings,
                FLAGS,
                config=current_config(),
                admin_listen=admin_listen,
                admin_allow_remote=admin_allow_remote or None,
            )
        except SettingsError as exc:
            raise ConfigError(str(exc)) from None
        return f(*args, admin=admin, **kwargs)

    wrapper = click.option(
        "--admin-allow-remote",
        is_flag=True,
        default=False,
        help="Allow --admin-listen on an address that is not loopback (env "
        "PUBSUB_ADMIN_ALLOW_REMOTE=1).",
    )(wrapper)
    return click.option(
        "--admin-listen",
        type=ADDRESS,
        default=None,
        help="Also listen on HOST:PORT for `pubsub chaos` fault injections; whoever can "
        "reach it can crash or corrupt this daemon.  Loopback only unless "
        "--admin-allow-remote (default: off; env PUBSUB_ADMIN_LISTEN).",
    )(wrapper)


def run_daemon(what: str, listen: str, run: Any) -> None:
    """Run a daemon; turn start-up failures into one-line errors."""
    from pubsub.node.overlaycheck import OverlayMismatch
    from pubsub.runtime.adminserver import AdminError
    from pubsub.runtime.clienttls import TlsError
    from pubsub.runtime.datadir import StoreError
    from pubsub.runtime.httpserve import HttpError
    from pubsub.runtime.permissions import PermissionsError
    from pubsub.runtime.settings import SettingsError
    from pubsub.telemetry.events import EventsError
    from pubsub.telemetry.metrics import MetricsError

    try:
        run()
    except (
        StoreError, MetricsError, EventsError, AdminError, HttpError, TlsError, PermissionsError, OverlayMismatch,
        SettingsError,
    ) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        raise click.ClickException(f"{what} cannot listen on {listen}: {reason}") from None
    except KeyboardInterrupt:
        pass


# --- client commands -------------------------------------------------------------------------
TIMEOUT_OPTION = click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    metavar="S",
    help="Seconds to wait for the daemon's reply.",
)


def ask(addr: Ref, msg: Message, timeout: float) -> Reply:
    try:
        reply = asyncio.run(request(addr, msg, timeout))
    except RequestError as exc:
        raise click.ClickException(str(exc)) from None
    if isinstance(reply, ErrorReply):
        raise click.ClickException(f"{addr} refused the request: {reply.code}: {reply.detail}")
    if not isinstance(reply, Reply):
        raise click.ClickException(f"{addr} answered with an unexpected {reply.kind!r} message")
    return reply


def ask_status(addr: Ref, role: str, timeout: float) -> dict[str, Any]:
    """The status of the daemon at `addr`, which must be a `role` daemon (``node``,
    ``supervisor``): a daemon of another kind is a one-line error, not a wrong answer."""
    body = ask(addr, StatusRequest(), timeout).body
    problem = role_problem(addr, body, role)
    if problem is not None:
        raise click.ClickException(problem)
    return body


class CursorType(click.ParamType):
    """N (a local number) or INCARNATION:N (a cursor, as --json deliveries carry it)."""

    name = "cursor"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            parse_cursor(str(value))
        except ClientError as exc:
            self.fail(str(exc), param, ctx)
        return str(value)


def since_option(help_text: str) -> Callable[[F], F]:
    """--since N or INCARNATION:N: where a client that already saw some publications
    resumes (a bare number is not checked against the node's store incarnation)."""
    return click.option(
        "--since",
        type=CursorType(),
        default="0",
        show_default=True,
        metavar="N|INC:N",
        help=help_text,
    )


def run_client(make: Any, *, graceful: bool = False) -> None:
    """Run a client coroutine: ClientError -> one-line error; Ctrl-C -> quiet exit 0.

    With `graceful`, `make(stopping)` gets a `pubsub.client.run.Stopping` and ends by itself
    once SIGINT/SIGTERM sets it (`pubsub.client.run.until_done`); otherwise the signal
    cancels the coroutine."""
    try:
        asyncio.run(until_done(make) if graceful else until_stopped(make))
    except KeyboardInterrupt:
        return
    except ClientError as exc:
        raise click.ClickException(str(exc)) from None
    except BrokenPipeError:  # e.g. piped into `head`: stop quietly
        silence_stdout()


def silence_stdout() -> None:
    """Point stdout at /dev/null once its reader is gone (a broken pipe), so that no later
    write or the final flush fails again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def print_change(action: str, topic: str, node_ref: str, body: dict[str, Any]) -> None:
    click.echo(f"{node_ref}: {action} {topic}")
    if body.get("warning"):
        click.echo(f"warning: {body['warning']}", err=True)
