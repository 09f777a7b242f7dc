"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) against a real Broker.

Requests and responses go through encode/decode at v0, so the assertions are about what an admin
client reads off the wire; a changed credential is then checked with a real SCRAM exchange.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scramp import ScramClient, ScramMechanism

from rivven_kproto.auth.scram import salted_password
from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.security.scram import (
    ScramStore,
    credential_from_salted_password,
    make_credential,
)
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from rivven_kproto.codec.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import alter_user_scram_credentials, describe_user_scram_credentials

from . import round_trip

NOW = 1_700_000_000_000
SHA256, SHA512 = 1, 2
SALT = b"0123456789abcdef"


@pytest.fixture
def config(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig(data_dir=tmp_path / "data")


@pytest.fixture
def broker(config: BrokerConfig) -> Iterator[Broker]:
    broker = Broker(config, NOW)
    yield broker
    broker.close()


@pytest.fixture
def ctx(broker: Broker, config: BrokerConfig) -> RequestContext:
    return RequestContext(broker, config, NOW, "test-client")


def answer(module: Any, ctx: RequestContext, request: Any) -> Any:
    return round_trip.answer(module, ctx, request, 0)


def upsertion(name: str, mechanism: int = SHA256, iterations: int = 4096, password: str = "secret") -> ScramCredentialUpsertion:
    hash_name = {SHA256: "SCRAM-SHA-256", SHA512: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-256")
    return ScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=SALT,
        salted_password=salted_password(hash_name, password, SALT, iterations),
    )


def alter(ctx: RequestContext, deletions: list[ScramCredentialDeletion], upsertions: list[ScramCredentialUpsertion]) -> dict[str, tuple[int, str | None]]:
    response = answer(alter_user_scram_credentials, ctx, AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions))
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def describe(ctx: RequestContext, users: list[str] | None) -> Any:
    request = DescribeUserScramCredentialsRequest(users=None if users is None else [UserName(name=u) for u in users])
    return answer(describe_user_scram_credentials, ctx, request)


def logs_in(broker: Broker, mechanism: str, user: str, password: str) -> bool:
    """A full RFC 5802 exchange against the stored credential, as the SASL server runs it."""
    credential = broker.scram.get(mechanism, user)
    if credential is None:
        return False
    server = ScramMechanism(mechanism).make_server(
        lambda _: (credential.salt, credential.stored_key, credential.server_key, credential.iterations)
    )
    client = ScramClient([mechanism], user, password)
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    try:
        server.set_client_final(client.get_client_final())
    except Exception:
        return False
    client.set_server_final(server.get_server_final())
    return True


def test_salted_password_gives_the_credential_scramp_makes() -> None:
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        salted = salted_password(mechanism, "pw", SALT, 4096)
        ours = credential_from_salted_password(mechanism, SALT, salted, 4096)
        theirs = ScramMechanism(mechanism).make_auth_info("pw", iteration_count=4096, salt=SALT)
        assert (ours.salt, ours.stored_key, ours.server_key, ours.iterations) == theirs


def test_upsert_describe_and_delete(ctx: RequestContext, broker: Broker) -> None:
    assert alter(ctx, [], [upsertion("alice"), upsertion("bob", SHA512, 8192, "hunter2")]) == {
        "alice": (Errors.NONE, None), "bob": (Errors.NONE, None),
    }
    assert logs_in(broker, "SCRAM-SHA-256", "alice", "secret")
    assert not logs_in(broker, "SCRAM-SHA-256", "alice", "wrong")
    assert logs_in(broker, "SCRAM-SHA-512", "bob", "hunter2")

    everyone = describe(ctx, None)
    assert everyone.error_code == Errors.NONE
    assert [(r.user, r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos]) for r in everyone.results] == [
        ("alice", Errors.NONE, [(SHA256, 4096)]), ("bob", Errors.NONE, [(SHA512, 8192)]),
    ]
    assert [r.user for r in describe(ctx, []).results] == ["alice", "bob"]

    # A second mechanism for the same user, then a changed password: both used from now on.
    assert alter(ctx, [], [upsertion("alice", SHA512, 4096, "other")]) == {"alice": (Errors.NONE, None)}
    assert alter(ctx, [], [upsertion("alice", SHA256, 4096, "changed")]) == {"alice": (Errors.NONE, None)}
    assert logs_in(broker, "SCRAM-SHA-256", "alice", "changed") and not logs_in(broker, "SCRAM-SHA-256", "alice", "secret")
    [alice] = describe(ctx, ["alice"]).results
    assert sorted((i.mechanism, i.iterations) for i in alice.credential_infos) == [(SHA256, 4096), (SHA512, 4096)]

    assert alter(ctx, [ScramCredentialDeletion(name="alice", mechanism=SHA256)], []) == {"alice": (Errors.NONE, None)}
    assert broker.scram.get("SCRAM-SHA-256", "alice") is None and broker.scram.get("SCRAM-SHA-512", "alice") is not None

    # Durable: the credentials as read back from the data directory are the same.
    reread = ScramStore(broker.scram.path.parent)
    assert reread.credentials == broker.scram.credentials
    assert reread.get("SCRAM-SHA-512", "alice") is not None and reread.get("SCRAM-SHA-256", "alice") is None


def test_alter_validation_as_kafka_answers_it(ctx: RequestContext, broker: Broker) -> None:
    broker.scram.upsert("SCRAM-SHA-256", "carol", make_credential("SCRAM-SHA-256", "pw"))
    results = alter(
        ctx,
        [
            ScramCredentialDeletion(name="dave", mechanism=SHA256),  # no such credential
            ScramCredentialDeletion(name="carol", mechanism=SHA512),  # carol has only SHA-256
            ScramCredentialDeletion(name="erin", mechanism=SHA256),
            ScramCredentialDeletion(name="erin", mechanism=SHA512),  # erin twice
            ScramCredentialDeletion(name="frank", mechanism=SHA256),  # frank in both lists
        ],
        [
            upsertion("frank"),
            upsertion(""),
            upsertion("gina", mechanism=7),
            upsertion("hank", iterations=4095),
            upsertion("ivy", iterations=16385),
            upsertion("jack", iterations=16384),
            upsertion("kim"), upsertion("kim"),
        ],
    )
    too_few, too_many = "Too few iterations", "Too many iterations"
    duplicate = "A user credential cannot be altered twice in the same request"
    missing = "Attempt to delete a user credential that does not exist"
    assert results == {
        "dave": (Errors.RESOURCE_NOT_FOUND, missing),
        "carol": (Errors.RESOURCE_NOT_FOUND, missing),
        "erin": (Errors.DUPLICATE_RESOURCE, duplicate),
        "frank": (Errors.DUPLICATE_RESOURCE, duplicate),
        "": (Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "gina": (Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "hank": (Errors.UNACCEPTABLE_CREDENTIAL, too_few),
        "ivy": (Errors.UNACCEPTABLE_CREDENTIAL, too_many),
        "jack": (Errors.NONE, None),
        "kim": (Errors.DUPLICATE_RESOURCE, duplicate),
    }
    # Only the valid change was applied.
    assert sorted(broker.scram.users()) == ["carol", "jack"]


def test_describe_missing_and_duplicate_users(ctx: RequestContext, broker: Broker) -> None:
    broker.scram.upsert("SCRAM-SHA-512", "alice", make_credential("SCRAM-SHA-512", "pw", 8192))
    response = describe(ctx, ["alice", "nobody", "alice"])
    assert response.error_code == Errors.NONE
    assert {r.user: (r.error_code, r.error_message) for r in response.results} == {
        "alice": (Errors.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same user twice in a single request: alice"),
        "nobody": (Errors.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: nobody"),
    }


def test_cluster_permissions_are_required(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path / "secured", authorizer_enabled=True, super_users=("User:admin",))
    broker = Broker(config, NOW)
    try:
        anonymous = RequestContext(broker, config, NOW, "test-client")
        described = describe(anonymous, None)
        assert (described.error_code, described.results) == (Errors.CLUSTER_AUTHORIZATION_FAILED, [])
        assert alter(anonymous, [ScramCredentialDeletion(name="a", mechanism=SHA256)], [upsertion("b"), upsertion("b")]) == {
            "a": (Errors.CLUSTER_AUTHORIZATION_FAILED, None), "b": (Errors.CLUSTER_AUTHORIZATION_FAILED, None),
        }
        assert broker.scram.users() == {}
    finally:
        broker.close()
