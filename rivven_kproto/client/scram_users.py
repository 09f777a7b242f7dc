"""SCRAM users online (KIP-554): DescribeUserScramCredentials and AlterUserScramCredentials.

The password never leaves the client: it is salted here (a random salt, PBKDF2 with the chosen
iteration count) and only the salted password is sent, as Kafka's Admin client does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rivven_kproto.auth.scram import MECHANISM_TYPES, TYPE_OF_MECHANISM, salted_password
from rivven_kproto.codec.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from rivven_kproto.codec.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    UserName,
)
from rivven_kproto.net.errors import check

from .client import KafkaClient

SALT_BYTES = 32


@dataclass
class ScramUser:
    user: str
    mechanism: str
    iterations: int


async def describe_users(client: KafkaClient, users: list[str] | None = None) -> list[ScramUser]:
    """Every user's credentials (None: all users); an unknown named user fails with RESOURCE_NOT_FOUND."""
    wanted = None if users is None else [UserName(name=u) for u in users]
    response = await client.call(
        DescribeUserScramCredentialsRequest,
        lambda version: DescribeUserScramCredentialsRequest(users=wanted),
        DescribeUserScramCredentialsResponse,
    )
    check(response.error_code, response.error_message, context="DescribeUserScramCredentials")
    found = []
    for result in sorted(response.results, key=lambda r: r.user):
        check(result.error_code, result.error_message, context=f"SCRAM credentials of {result.user}")
        for info in result.credential_infos:
            mechanism = MECHANISM_TYPES.get(info.mechanism, f"UNKNOWN({info.mechanism})")
            found.append(ScramUser(result.user, mechanism, info.iterations))
    return sorted(found, key=lambda u: (u.user, u.mechanism))


async def upsert_user(client: KafkaClient, user: str, mechanism: str, password: str, iterations: int) -> None:
    salt = os.urandom(SALT_BYTES)
    upsertion = ScramCredentialUpsertion(
        name=user, mechanism=TYPE_OF_MECHANISM[mechanism], iterations=iterations, salt=salt,
        salted_password=salted_password(mechanism, password, salt, iterations),
    )
    await _alter(client, AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion]))


async def delete_user(client: KafkaClient, user: str, mechanism: str) -> None:
    deletion = ScramCredentialDeletion(name=user, mechanism=TYPE_OF_MECHANISM[mechanism])
    await _alter(client, AlterUserScramCredentialsRequest(deletions=[deletion], upsertions=[]))


async def _alter(client: KafkaClient, request: AlterUserScramCredentialsRequest) -> None:
    response = await client.call(
        AlterUserScramCredentialsRequest, lambda version: request, AlterUserScramCredentialsResponse
    )
    for result in response.results:
        check(result.error_code, result.error_message, context=f"SCRAM credentials of {result.user}")
