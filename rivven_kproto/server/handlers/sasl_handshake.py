"""SaslHandshake (17), v0-1: on a SASL listener picks the mechanism (UNSUPPORTED_SASL_MECHANISM
with the enabled list otherwise); elsewhere ILLEGAL_SASL_STATE, as Kafka answers on a PLAINTEXT or
SSL listener, so a client configured for SASL fails at once instead of timing out.

After v1 the tokens come in SaslAuthenticate requests (KIP-152); after v0, as Kafka expects, they
come as bare size-prefixed tokens without a request header (the server shell switches framing).
A handshake on an authenticated connection starts a re-authentication (KIP-368).
"""

from __future__ import annotations

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = SaslHandshakeRequest.API_KEY
ROUTE = LOCAL


def handle(ctx: RequestContext, request: SaslHandshakeRequest, version: int) -> SaslHandshakeResponse:
    sasl = None if ctx.session is None else ctx.session.sasl
    if sasl is None:
        return SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[])
    session = ctx.session
    assert session is not None
    error = sasl.handshake(request.mechanism)
    if error != Errors.NONE:
        session.failed_authentication = True  # Kafka closes after the answer
    else:
        session.raw_tokens = version == 0
    return SaslHandshakeResponse(error_code=error, mechanisms=list(sasl.enabled))
