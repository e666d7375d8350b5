"""The skip-ring mode's daemon commands: ``pubsub supervisor`` and ``pubsub node``, which
start the daemons (their settings, pydantic, are imported only when one of them runs).  The
mode's command list, `pubsub.cli.skipring.COMMANDS`, holds these and the client commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pubsub.cli.common import (
    ADDRESS,
    FLAGS,
    ConfigError,
    admin_options,
    check_own_addresses,
    config_option,
    current_config,
    from_config,
    interval_option,
    overlay_option,
    required,
    run_daemon,
    settings_for_runtime,
    telemetry_options,
    tls_options,
)
from pubsub.kernel.message import Ref

if TYPE_CHECKING:  # the daemons' settings (pydantic): imported when a daemon command runs
    from pubsub.runtime.settings import AdminSettings, TelemetrySettings


def _own_addresses(
    listen: str, telemetry: TelemetrySettings, admin: AdminSettings, more: dict[str, str | None]
) -> dict[str, str | None]:
    """A daemon's listeners by option, for `check_own_addresses`."""
    metrics = f"{telemetry.metrics_host}:{telemetry.metrics_port}" if telemetry.metrics_port else None
    return {"--listen": listen, **more, "--metrics-port": metrics, "--admin-listen": admin.admin_listen}


def _supervisor_settings() -> tuple[type[Any], ...]:
    from pubsub.runtime.settings import AdminSettings, RuntimeSettings, TelemetrySettings
    from pubsub.supervisor.settings import SupervisorSettings

    return (RuntimeSettings, TelemetrySettings, AdminSettings, SupervisorSettings)


def _node_settings() -> tuple[type[Any], ...]:
    from pubsub.node.settings import NodeSettings
    from pubsub.runtime.settings import AdminSettings, RuntimeSettings, TelemetrySettings

    return (RuntimeSettings, TelemetrySettings, AdminSettings, NodeSettings)


def _address(value: Any) -> Ref:
    return ADDRESS.convert(str(value), None, None)


@click.command()
@click.option(
    "--listen",
    type=ADDRESS,
    default=None,
    help="Address to listen on; it is also the supervisor's reference, which nodes are given "
    "(required, here or as listen in the --config file).",
)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Directory of the durable membership database, created if missing "
    "(required; env PUBSUB_DATA_DIR).",
)
@overlay_option
@interval_option
@tls_options
@click.option(
    "--config-budget",
    type=int,
    default=None,
    metavar="N",
    help="Configurations (SetData) sent per topic per Timeout (default 1; env "
    "PUBSUB_CONFIG_BUDGET).",
)
@click.option(
    "--web-listen",
    type=ADDRESS,
    default=None,
    help="Serve the web view on http://HOST:PORT/: every topic's skip ring, live (JSON at "
    "/api/rings).  Loopback only unless --web-allow-remote (default: off; env "
    "PUBSUB_WEB_LISTEN).",
)
@click.option(
    "--web-allow-remote",
    is_flag=True,
    default=False,
    help="Allow --web-listen on an address that is not loopback; the page has no login "
    "(env PUBSUB_WEB_ALLOW_REMOTE=1).",
)
@click.option(
    "--peers",
    default=None,
    metavar="HOST:PORT,...",
    help="The other supervisors (sharded supervisors: each topic belongs to the one that "
    "consistent hashing of its name assigns; env PUBSUB_PEERS).",
)
@click.option(
    "--join",
    "join_ref",
    type=ADDRESS,
    default=None,
    help="Join the supervisors that the one at this address knows (like --peers with one "
    "address; the others are discovered).",
)
@click.option(
    "--peer-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="A peer supervisor silent this long is dead and its topics move (default 3; env "
    "PUBSUB_PEER_TIMEOUT).",
)
@click.option(
    "--rho",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="R",
    help="tco and omen: Low-ODA's ρ > 0; an edge is taken over one of lower degree only if it "
    "joins more than ρ times as many components (paper 001 Alg. 2; default 3; env PUBSUB_RHO).",
)
@click.option(
    "--coverage",
    type=click.IntRange(min=1),
    default=None,
    metavar="LAMBDA",
    help="tco and omen: λ >= 1, how many times each node's backups cover each of its topics "
    "(paper 001 §V-G, paper 003 §4.2; default 3 for tco, 5 for omen; env PUBSUB_COVERAGE).",
)
@click.option(
    "--backup-method",
    type=click.Choice(["primal-dual", "greedy"]),
    default=None,
    help="tco and omen: how backups are chosen (paper 001 Alg. 12 or 11; default primal-dual; "
    "env PUBSUB_BACKUP_METHOD).",
)
@click.option(
    "--resilience",
    type=click.IntRange(min=1, max=16),
    default=None,
    metavar="L",
    help="omen only: L, the resilience factor: each churn event goes to L successors, each node keeps "
    "views of L predecessors; omen handles at most L concurrent churn events and is NOT "
    "self-stabilizing (paper 003 §3.3; default 2; env PUBSUB_RESILIENCE).",
)
@click.option(
    "--t-wait",
    type=click.IntRange(min=1, max=1000),
    default=None,
    metavar="TIMEOUTS",
    help="omen only: T_wait, Timeouts between two T-Man gossip exchanges (paper 003 Alg. 3; default 2; "
    "env PUBSUB_T_WAIT).",
)
@click.option(
    "--sample-size",
    type=click.IntRange(min=2, max=256),
    default=None,
    metavar="N",
    help="omen only: the peer-sampling view's size (default 8; env PUBSUB_SAMPLE_SIZE).",
)
@config_option("the supervisor", _supervisor_settings, "listen")
@telemetry_options
@admin_options
def supervisor(
    listen: Ref | None,
    data_dir: Path | None,
    overlay: str | None,
    interval: float | None,
    config_budget: int | None,
    web_listen: Ref | None,
    web_allow_remote: bool,
    peers: str | None,
    join_ref: Ref | None,
    peer_timeout: float | None,
    rho: float | None,
    coverage: int | None,
    backup_method: str | None,
    resilience: int | None,
    t_wait: int | None,
    sample_size: int | None,
    telemetry: TelemetrySettings,
    admin: AdminSettings,
) -> None:
    """Run the supervisor daemon until SIGTERM or SIGINT."""
    from pubsub.runtime.settings import SettingsError, load
    from pubsub.supervisor.app import run_supervisor
    from pubsub.supervisor.settings import SupervisorSettings

    address: Ref = required(from_config("listen", listen, "--listen", _address), "listen", "--listen")
    runtime_settings = settings_for_runtime(interval, address, "supervisor")
    try:
        settings = load(
            SupervisorSettings,
            FLAGS,
            config=current_config(),
            data_dir=data_dir,
            overlay=overlay,
            config_budget=config_budget,
            web_listen=web_listen,
            web_allow_remote=web_allow_remote or None,
            peers=",".join(p for p in (peers, join_ref) if p) or None,
            peer_timeout=peer_timeout,
            rho=rho,
            coverage=coverage,
            backup_method=backup_method,
            resilience=resilience,
            t_wait=t_wait,
            sample_size=sample_size,
        )
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None
    check_own_addresses("supervisor", _own_addresses(address, telemetry, admin, {"--web-listen": settings.web_listen}))
    run_daemon(
        "supervisor",
        address,
        lambda: run_supervisor(address, runtime_settings, settings, telemetry, admin),
    )


@click.command()
@click.option(
    "--listen",
    type=ADDRESS,
    default=None,
    help="Address to listen on; it is also this node's reference (required, here or as "
    "listen in the --config file).",
)
@click.option(
    "--supervisor",
    "supervisor_ref",
    type=ADDRESS,
    default=None,
    help="The supervisor's address (required, here or as supervisor in the --config file).",
)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Directory of the node's subscribed topics (rejoined at start) and durable "
    "publication store.  Without it the node keeps everything in memory and loses it when "
    "it stops (optional; env PUBSUB_DATA_DIR).",
)
@overlay_option
@interval_option
@tls_options
@click.option(
    "--no-flooding",
    "no_flooding",
    is_flag=True,
    default=False,
    help="Do not spread new publications; anti-entropy alone delivers them (env "
    "PUBSUB_FLOODING=0).",
)
@click.option(
    "--dissemination",
    type=click.Choice(["tree", "flood"]),
    default=None,
    help="How new publications spread besides anti-entropy: tree (a spanning tree over the "
    "skip ring or the clique, n-1 messages per publication; their default) or flood (the "
    "paper's flooding; tco's default and only choice) (env PUBSUB_DISSEMINATION).",
)
@click.option(
    "--linger",
    type=click.FloatRange(min=0, max=1),
    default=None,
    metavar="S",
    help="Seconds a group commit waits for more publications before it starts (default 0: "
    "at once; env PUBSUB_PUBLISH_LINGER).",
)
@click.option(
    "--http-listen",
    type=ADDRESS,
    default=None,
    help="Also serve the HTTP API (publish, history, SSE stream, membership, status; "
    "README, 'HTTP API') on HOST:PORT.  It has no authentication: loopback only unless "
    "--http-allow-remote (default: off; env PUBSUB_HTTP_LISTEN).",
)
@click.option(
    "--http-allow-remote",
    is_flag=True,
    default=False,
    help="Allow --http-listen on an address that is not loopback (env PUBSUB_HTTP_ALLOW_REMOTE=1).",
)
@config_option("a node", _node_settings, "listen", "supervisor")
@telemetry_options
@admin_options
def node(
    listen: Ref | None,
    supervisor_ref: Ref | None,
    telemetry: TelemetrySettings,
    admin: AdminSettings,
    data_dir: Path | None,
    overlay: str | None,
    interval: float | None,
    no_flooding: bool,
    dissemination: str | None,
    linger: float | None,
    http_listen: Ref | None,
    http_allow_remote: bool,
) -> None:
    """Run a subscriber node daemon until SIGTERM or SIGINT."""
    from pubsub.node.app import run_node
    from pubsub.node.settings import NodeSettings, check_node_limits
    from pubsub.runtime.settings import SettingsError, load

    address: Ref = required(from_config("listen", listen, "--listen", _address), "listen", "--listen")
    supervisor_address: Ref = required(
        from_config("supervisor", supervisor_ref, "--supervisor", _address), "supervisor", "--supervisor"
    )
    runtime_settings = settings_for_runtime(interval, address, "node")
    try:
        settings = load(
            NodeSettings,
            FLAGS,
            config=current_config(),
            data_dir=data_dir,
            overlay=overlay,
            flooding=False if no_flooding else None,
            dissemination=dissemination,
            publish_linger=linger,
            http_listen=http_listen,
            http_allow_remote=http_allow_remote or None,
        )
        check_node_limits(settings, runtime_settings)
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None
    check_own_addresses("node", _own_addresses(address, telemetry, admin, {"--http-listen": settings.http_listen}))
    if runtime_settings.tls:  # its key must sign publications (and cryptography loads only now)
        from pubsub.node.signing import Signing, SigningError

        try:
            Signing.from_settings(address, runtime_settings, None)
        except SigningError as exc:
            raise ConfigError(str(exc)) from None
    run_daemon(
        "node",
        address,
        lambda: run_node(address, supervisor_address, runtime_settings, settings, telemetry, admin),
    )



#: The daemon commands, first in `pubsub.cli.skipring.COMMANDS`.
COMMANDS = (supervisor, node)
