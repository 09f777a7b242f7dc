"""SaslAuthenticate (36), v0-2, on a PLAINTEXT listener: ILLEGAL_SASL_STATE with Kafka's message."""

from __future__ import annotations

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse

from ..context import RequestContext

API_KEY = SaslAuthenticateRequest.API_KEY


def handle(ctx: RequestContext, request: SaslAuthenticateRequest, version: int) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=Errors.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )
