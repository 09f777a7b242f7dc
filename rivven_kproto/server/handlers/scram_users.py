"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0 (KIP-554), as Kafka's
controller answers them.

Describe needs Describe on the Cluster (else CLUSTER_AUTHORIZATION_FAILED for the whole answer),
alter needs Alter on the Cluster (else that error for every user). A user named twice is
DUPLICATE_RESOURCE; an empty name UNACCEPTABLE_CREDENTIAL; an unknown mechanism
UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL; deleting or
describing a credential that does not exist RESOURCE_NOT_FOUND. The client sends a salted password,
never the password; the stored and server keys are derived from it and the accepted changes are
made durable in one write before the answer, and used from the next authentication.
"""

from __future__ import annotations

import logging

from rivven_kproto.auth.scram import MECHANISM_TYPES, TYPE_OF_MECHANISM
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted_password,
)
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from rivven_kproto.codec.messages.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)

from ..context import RequestContext

log = logging.getLogger(__name__)

# The checks of DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), from the table.
DESCRIBE_CHECK, ALTER_CHECK = rule(50).check("cluster"), rule(51).check("cluster")
DUPLICATE = "A user credential cannot be altered twice in the same request"
DESCRIBE_DUPLICATE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
DELETE_MISSING = "Attempt to delete a user credential that does not exist"


def describe(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest, version: int
) -> DescribeUserScramCredentialsResponse:
    if (refused := ctx.refusal(DESCRIBE_CHECK)) is not None:
        return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=refused, error_message=None,
                                                    results=[])
    known = ctx.broker.scram.users()
    duplicated: dict[str, bool] = {}
    if not request.users:
        duplicated = dict.fromkeys(sorted(known), False)
    else:
        for entry in request.users:
            duplicated[entry.name] = entry.name in duplicated
    results = []
    for user, twice in duplicated.items():
        result = DescribeUserScramCredentialsResult(user=user, error_code=Errors.NONE, error_message=None, credential_infos=[])
        if twice:
            result.error_code, result.error_message = Errors.DUPLICATE_RESOURCE, DESCRIBE_DUPLICATE + user
        elif user not in known:
            result.error_code, result.error_message = Errors.RESOURCE_NOT_FOUND, DESCRIBE_MISSING + user
        else:
            result.credential_infos = [
                CredentialInfo(mechanism=TYPE_OF_MECHANISM[mechanism], iterations=iterations)
                for mechanism, iterations in known[user]
            ]
        results.append(result)
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=Errors.NONE, error_message=None, results=results)


def alter(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest, version: int
) -> AlterUserScramCredentialsResponse:
    def result(user: str, error: Errors, message: str | None = None) -> AlterUserScramCredentialsResult:
        return AlterUserScramCredentialsResult(user=user, error_code=error, error_message=message)

    if (refused := ctx.refusal(ALTER_CHECK)) is not None:
        users = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
        return AlterUserScramCredentialsResponse(throttle_time_ms=0,
                                                 results=[result(u, refused) for u in dict.fromkeys(users)])
    if not ctx.broker.cluster.is_coordinator:  # one writer of the shared credentials: the controller
        users = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
        return AlterUserScramCredentialsResponse(
            throttle_time_ms=0, results=[result(u, Errors.NOT_CONTROLLER, "This broker is not the controller")
                                         for u in dict.fromkeys(users)]
        )
    # As Kafka's controller: a user named twice (in either list) fails as a duplicate first, then
    # each remaining change is validated on its own.
    errors: dict[str, tuple[Errors, str]] = {}
    wanted_deletions: dict[str, ScramCredentialDeletion] = {}
    wanted_upsertions: dict[str, ScramCredentialUpsertion] = {}
    for deletion in request.deletions:
        if deletion.name not in errors and wanted_deletions.pop(deletion.name, None) is not None:
            errors[deletion.name] = (Errors.DUPLICATE_RESOURCE, DUPLICATE)
        elif deletion.name not in errors:
            wanted_deletions[deletion.name] = deletion
    for upsertion in request.upsertions:
        if upsertion.name in errors:
            continue
        if wanted_deletions.pop(upsertion.name, None) is not None or wanted_upsertions.pop(upsertion.name, None) is not None:
            errors[upsertion.name] = (Errors.DUPLICATE_RESOURCE, DUPLICATE)
        else:
            wanted_upsertions[upsertion.name] = upsertion
    store = ctx.broker.scram
    deletions: dict[str, str] = {}  # user -> mechanism
    upsertions: dict[str, tuple[str, ScramCredential]] = {}
    for user, deletion in wanted_deletions.items():
        mechanism = MECHANISM_TYPES.get(deletion.mechanism)
        failure = _check_name_and_mechanism(user, mechanism)
        if failure is None and mechanism is not None and store.get(mechanism, user) is None:
            failure = (Errors.RESOURCE_NOT_FOUND, DELETE_MISSING)
        if failure is not None:
            errors[user] = failure
        elif mechanism is not None:
            deletions[user] = mechanism
    for user, upsertion in wanted_upsertions.items():
        mechanism = MECHANISM_TYPES.get(upsertion.mechanism)
        failure = _check_name_and_mechanism(user, mechanism)
        if failure is None and upsertion.iterations < MIN_ITERATIONS:
            failure = (Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif failure is None and upsertion.iterations > MAX_ITERATIONS:
            failure = (Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        if failure is not None:
            errors[user] = failure
        elif mechanism is not None:
            credential = credential_from_salted_password(
                mechanism, bytes(upsertion.salt), bytes(upsertion.salted_password), upsertion.iterations
            )
            upsertions[user] = (mechanism, credential)
    if deletions or upsertions:
        store.alter(
            [(user, mechanism) for user, mechanism in deletions.items()],
            [(user, mechanism, credential) for user, (mechanism, credential) in upsertions.items()],
        )
        log.info("SCRAM credentials changed by %s: deleted %s, upserted %s", ctx.principal,
                 sorted(deletions.items()), sorted((u, m) for u, (m, _) in upsertions.items()))
    results = [result(user, Errors.NONE) for user in [*deletions, *upsertions]]
    results += [result(user, error, message) for user, (error, message) in errors.items()]
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)


def _check_name_and_mechanism(user: str, mechanism: str | None) -> tuple[Errors, str] | None:
    if not user:
        return Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism is None:
        return Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None
