"""What a daemon, or a client command, imports to start: only what it runs.

Every `pubsub node` or `pubsub supervisor` pays its imports in CPU before it listens, and a
local cluster starts many at once on the same cores (the CI run that timed 18 daemons out).
The HTTP stack (aiohttp, whose import alone builds a TLS context from the system's CA
bundle), the scenario files' YAML, the tools' modules and `cryptography` (X.509 and Ed25519,
about 0.1 s) are imported only when a daemon serves HTTP, a tool runs or TLS is on.  The client commands
(publish, subscribe, status, ...) and the client libraries import no pydantic: the daemons'
settings cost about 0.45 s of every command's start.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pubsub.cli.main import TOOL_SUMMARIES, TOOLS, main
from pubsub.ops.localcluster import LocalCluster

#: Modules a daemon without --http-listen / --web-listen or TLS must not import.
NOT_AT_START = (
    "aiohttp", "yaml", "pyspark", "cryptography", *(spec.partition(":")[0] for spec in TOOLS.values())
)


def _imported_by(*modules: str) -> set[str]:
    code = "import json, sys\n" + "".join(f"import {m}\n" for m in modules)
    code += "print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout))


def test_the_daemons_start_without_the_http_stack_or_the_tools() -> None:
    imported = _imported_by("pubsub.cli.main", "pubsub.node.app", "pubsub.supervisor.app", "broker.app", "pubsub.client.library")
    assert "pubsub.node.app" in imported and "pubsub.supervisor.app" in imported
    assert sorted(m for m in NOT_AT_START if m in imported) == []


#: What only the daemons' settings need (`pubsub.runtime.settings`).
SETTINGS_STACK = ("pydantic", "pydantic_settings", "pubsub.runtime.settings")


def test_the_client_commands_and_libraries_import_no_settings_stack() -> None:
    imported = _imported_by("pubsub.cli.main", "pubsub.client.library", "broker.client")
    assert sorted(m for m in SETTINGS_STACK if m in imported) == []


def test_client_commands_run_without_the_settings_stack(tmp_path: Path) -> None:
    """Real client commands against a real node (status, subscribe, publish, history, with
    TLS off and on): none imports pydantic while it runs, and each does its job."""
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from pubsub.cli.main import main\n"
        "outs = [CliRunner().invoke(main, args) for args in json.loads(sys.argv[1])]\n"
        "print(json.dumps([[r.exit_code, r.output] for r in outs] + [sorted(sys.modules)]))"
    )
    for tls in (False, True):
        with LocalCluster(tmp_path / str(tls), 1, admin=False, tls=tls, log_level="warning") as cluster:
            node = cluster.node_refs[0]
            commands = [
                ["status", "--node", node],
                ["subscribe", "news", "--node", node, "--detach"],
                ["publish", "news", "hello", "--node", node],
                ["history", "news", "--node", node],
            ]
            done = subprocess.run(
                [sys.executable, "-c", code, json.dumps(commands)],
                capture_output=True, text=True, timeout=120, check=True,  # PUBSUB_TLS_* set while it runs
            )
        *results, imported = json.loads(done.stdout)
        assert [code for code, _ in results] == [0, 0, 0, 0], results
        assert results[3][1].endswith("hello\n"), results
        assert sorted(m for m in SETTINGS_STACK if m in imported) == [], tls


def test_tls_brings_cryptography_in() -> None:
    imported = _imported_by("pubsub.node.signing", "pubsub.runtime.certificates")
    assert {"cryptography.x509", "cryptography.hazmat.primitives.asymmetric.ed25519"} <= imported


def test_serving_http_brings_the_http_stack_in() -> None:
    imported = _imported_by("pubsub.node.http", "pubsub.supervisor.webview")
    assert "aiohttp.web" in imported


def test_the_tools_are_listed_and_load_when_asked_for() -> None:
    runner = CliRunner()
    listing = runner.invoke(main, ["--help"])
    assert listing.exit_code == 0, listing.output
    for name in TOOLS:
        assert f"  {name} " in listing.output
        shown = runner.invoke(main, [name, "--help"])
        assert shown.exit_code == 0, shown.output
        assert shown.output.startswith(f"Usage: main {name} ")  # CliRunner names the group "main"
    unknown = runner.invoke(main, ["no-such-command"])
    assert unknown.exit_code == 2 and "No such command" in unknown.output


def test_listing_the_commands_imports_no_tool_and_reads_as_with_them_loaded() -> None:
    """`pubsub --help` in a fresh process loads no tool (nor Spark, YAML or cryptography),
    and its listing is the very text click writes once every tool is loaded."""
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from pubsub.cli.main import main\n"
        "out = CliRunner().invoke(main, ['--help']).output\n"
        "print(json.dumps([out, sorted(sys.modules)]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    listing, imported = json.loads(done.stdout)
    assert sorted(m for m in NOT_AT_START if m in imported) == []
    assert set(TOOL_SUMMARIES) == set(TOOLS)
    for name, spec in TOOLS.items():
        module, _, attribute = spec.partition(":")
        command = getattr(__import__(module, fromlist=[attribute]), attribute)
        assert TOOL_SUMMARIES[name] == command.get_short_help_str(10_000), name
    runner = CliRunner()
    for name in TOOLS:  # loaded in this process now
        assert runner.invoke(main, [name, "--help"]).exit_code == 0
    assert runner.invoke(main, ["--help"]).output == listing


def test_a_misspelt_tool_is_suggested_before_it_is_loaded() -> None:
    # a fresh process: in this one the tests above have loaded every tool already
    for typed, meant in (("clustr", "cluster"), ("chaso", "chaos"), ("analyse", "analyze"), ("publsh", "publish")):
        done = subprocess.run(
            [sys.executable, "-m", "pubsub.cli.main", typed], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2
        assert f"No such command '{typed}'. Did you mean '{meant}'?" in done.stderr


def _maps_name_cryptography(pid: int) -> bool:
    """Whether process `pid` has mapped cryptography's compiled bindings (it imported them)."""
    with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
        return any("cryptography/hazmat/bindings" in line for line in maps)


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_running_daemons_load_cryptography_only_with_tls(tmp_path: Path, tls: bool) -> None:
    """Real `pubsub supervisor` and `pubsub node` processes, as the CLI starts them: without
    TLS neither has loaded cryptography (about 0.1 s of each daemon's start); with TLS both
    have (they read certificates, and the node signs)."""
    with LocalCluster(tmp_path, 1, admin=False, tls=tls, log_level="warning") as cluster:
        loaded = {d.name: _maps_name_cryptography(d.process.pid) for d in cluster.daemons()}
    assert loaded == {name: tls for name in loaded} and len(loaded) == 2, loaded
