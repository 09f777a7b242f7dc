"""SaslAuthenticate (36), v0-2: one step of the chosen mechanism. A failure answers
SASL_AUTHENTICATION_FAILED with a message after connection.failed.authentication.delay.ms, logs
the client's address and claimed user (never a password) and closes the connection, as Kafka.
A completed authentication answers its session lifetime (v1+): ``connections.max.reauth.ms``, after
which the client must re-authenticate (KIP-368) or is disconnected at its next request.
On a listener without SASL: ILLEGAL_SASL_STATE with Kafka's message."""

from __future__ import annotations

import logging

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = SaslAuthenticateRequest.API_KEY
ROUTE = LOCAL
log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: SaslAuthenticateRequest, version: int) -> SaslAuthenticateResponse:
    session = ctx.session
    if session is None or session.sasl is None:
        return SaslAuthenticateResponse(
            error_code=Errors.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
            auth_bytes=b"",
            session_lifetime_ms=0,
        )
    reauthenticating = session.sasl.reauthenticating
    error, message, reply = session.sasl.authenticate(request.auth_bytes)
    lifetime = 0
    if error != Errors.NONE:
        session.failed_authentication = True
    elif session.sasl.authenticated:
        lifetime = session.authenticated(ctx.now_ms)
        if reauthenticating:
            log.info("%s re-authenticated from %s (%s)", session.principal, ctx.client_host.lstrip("/"), session.mechanism)
    return SaslAuthenticateResponse(error_code=error, error_message=message, auth_bytes=reply, session_lifetime_ms=lifetime)
