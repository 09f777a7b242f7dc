"""SaslHandshake (17), v0-1, on a PLAINTEXT listener: ILLEGAL_SASL_STATE, as Kafka answers there.

A client configured for SASL against a listener without it then fails at once with Kafka's error
instead of waiting for a closed connection to time out.
"""

from __future__ import annotations

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

from ..context import RequestContext

API_KEY = SaslHandshakeRequest.API_KEY


def handle(ctx: RequestContext, request: SaslHandshakeRequest, version: int) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[])
