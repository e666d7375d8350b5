"""The permissions file and its rules (`pubsub.runtime.permissions`), the node's and the
broker's client checks (`pubsub.node.permits`, `broker.sessions.refusal`), tested directly."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.cores.messages import ClientAdvertise, ClientPublish, ClientRefused, ClientSubscribe, ClientUnadvertise
from broker.sessions import refusal as broker_refusal
from pubsub.kernel.control import ErrorReply, StatusRequest
from pubsub.kernel.message import Topic
from pubsub.node.permits import refusal as node_refusal
from pubsub.publications.messages import Follow, JoinTopic, LeaveTopic, PublishFailed, PublishRequest
from pubsub.runtime.identity import Identity
from pubsub.runtime.permissions import DENIED, OPEN_GRANTS, Authority, Permissions, PermissionsError, load, parse
from pubsub.runtime.settings import RuntimeSettings, SettingsError
from pubsub.runtime.settings import load as load_settings

ALICE = Identity("client", "alice")
BOB = Identity("client", "bob")
ADMIN = Identity("admin", "ops")
NODE = Identity("node", "127.0.0.1:7001")
FILE = """
[default]
subscribe = ["news.*"]

[users.alice]
publish = ["orders", "news.*"]
subscribe = ["*"]
join = ["orders"]

[users.root]
admin = true

[revoked]
keys = ["%s"]
""" % ("ab" * 32)


@pytest.fixture
def rules(tmp_path: Path) -> Permissions:
    path = tmp_path / "permissions.toml"
    path.write_text(FILE)
    return load(path)


def test_grants_by_name_with_patterns(rules: Permissions) -> None:
    assert rules.check(ALICE, "publish", "orders") is None
    assert rules.check(ALICE, "publish", "news.eu") is None
    assert rules.check(ALICE, "publish", "payments") == "client alice may not publish on 'payments'"
    assert rules.check(ALICE, "join", "orders") is None
    assert rules.check(ALICE, "join", "news.eu") is not None
    assert rules.check(ALICE, "admin") == "client alice may not take admin actions"
    assert rules.revoked_keys == frozenset({"ab" * 32})


def test_unlisted_clients_get_the_default_and_roles_their_rule(rules: Permissions) -> None:
    assert rules.check(BOB, "subscribe", "news.eu") is None
    assert rules.check(BOB, "publish", "news.eu") is not None
    assert rules.check(Identity("client", "root"), "admin") is None
    for action in ("publish", "subscribe", "join", "admin"):
        assert rules.check(ADMIN, action, "anything") is None
    assert rules.check(NODE, "publish", "x") is None and rules.check(NODE, "subscribe", "x") is None
    assert rules.check(NODE, "join", "x") is not None and rules.check(NODE, "admin") is not None
    assert rules.check(None, "subscribe", "x") is not None


def test_without_a_file_clients_publish_and_subscribe_but_nothing_else() -> None:
    open_rules = Permissions()
    assert open_rules.default == OPEN_GRANTS
    assert open_rules.check(BOB, "publish", "t") is None and open_rules.check(BOB, "subscribe", "t") is None
    assert open_rules.check(BOB, "join", "t") is not None and open_rules.check(BOB, "admin") is not None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[usres.alice]\n", "unknown section(s) usres"),
        ("[users.alice]\npublsh = ['x']\n", "unknown key(s) publsh"),
        ("[users.alice]\npublish = 'x'\n", "publish must be a list of topic patterns"),
        ("[users.alice]\nadmin = 'yes'\n", "admin must be true or false"),
        ("[revoked]\nkeys = ['not-hex']\n", "hex SHA-256 fingerprints"),
        ("users = [1]\n", "[users] must be a table"),
        ("[users\n", "is not TOML"),
    ],
)
def test_a_bad_file_is_one_clear_line(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PermissionsError) as err:
        load(path)
    assert problem in str(err.value) and "\n" not in str(err.value)


def test_reload_keeps_the_rules_in_force_when_the_file_is_bad(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[users.alice]\npublish = ['a']\n")
    authority = Authority(path)
    seen: list[Permissions] = []
    authority.listen(seen.append)
    assert authority.check(ALICE, "publish", "b") is not None
    path.write_text("[users.alice]\npublish = ['a', 'b']\n")
    assert authority.reload() is None
    assert authority.check(ALICE, "publish", "b") is None and len(seen) == 2
    path.write_text("[users.alice\n")
    assert authority.reload() is not None
    assert authority.check(ALICE, "publish", "b") is None  # the previous rules stay
    assert (authority.reloads, authority.reload_errors, len(seen)) == (1, 1, 2)


def test_parse_refuses_a_default_that_is_not_a_table() -> None:
    with pytest.raises(PermissionsError, match=r"\[default\] must be a table"):
        parse({"default": ["x"]})


def test_node_client_requests_need_their_grant(rules: Permissions, tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(FILE)
    authority = Authority(path)
    topic = Topic("payments")
    denied = node_refusal(PublishRequest(topic=topic, payload=b"x", id=7), ALICE, authority)  # type: ignore[arg-type]
    assert isinstance(denied, PublishFailed) and (denied.id, denied.code) == (7, DENIED)
    assert node_refusal(PublishRequest(topic=Topic("orders"), payload=b"x", id=8), ALICE, authority) is None  # type: ignore[arg-type]
    left = node_refusal(LeaveTopic(topic=Topic("news.eu")), ALICE, authority)
    assert isinstance(left, ErrorReply) and left.code == DENIED
    assert node_refusal(JoinTopic(topic=Topic("orders")), ALICE, authority) is None
    follow = Follow(topic=topic, since=0, new_only=False, live=False)
    assert isinstance(node_refusal(follow, BOB, authority), ErrorReply)
    assert node_refusal(StatusRequest(), BOB, authority) is None


def test_broker_clients_act_only_as_themselves(tmp_path: Path) -> None:
    authority = Authority(None)
    adv = ClientAdvertise("alice", "a1", [])  # type: ignore[arg-type]
    assert broker_refusal(adv, ALICE, authority) is None
    stolen = broker_refusal(ClientUnadvertise("bob", "b1"), ALICE, authority)
    assert isinstance(stolen, ClientRefused) and stolen.code == DENIED and "not 'bob'" in stolen.detail
    assert isinstance(broker_refusal(ClientPublish("bob", "", {}), ALICE, authority), ClientRefused)
    assert broker_refusal(ClientUnadvertise("bob", "b1"), ADMIN, authority) is None
    assert broker_refusal(ClientSubscribe("whoever", "s1", []), ALICE, authority) is None  # type: ignore[arg-type]


def test_a_permissions_file_needs_tls(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("")
    with pytest.raises(SettingsError, match="needs TLS"):
        load_settings(RuntimeSettings, {"permissions": "--permissions"}, permissions=path)
