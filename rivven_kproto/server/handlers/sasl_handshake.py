"""SaslHandshake (17), v0-1: on a SASL listener picks the mechanism (UNSUPPORTED_SASL_MECHANISM
with the enabled list otherwise); elsewhere ILLEGAL_SASL_STATE, as Kafka answers on a PLAINTEXT or
SSL listener, so a client configured for SASL fails at once instead of timing out.

Only the KIP-152 flow is served (v1, or v0 followed by SaslAuthenticate requests, which is what
librdkafka, kafka-python, aiokafka and kafkajs send to a broker advertising SaslAuthenticate);
raw v0 tokens without Kafka framing are not.
"""

from __future__ import annotations

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

from ..context import RequestContext

API_KEY = SaslHandshakeRequest.API_KEY


def handle(ctx: RequestContext, request: SaslHandshakeRequest, version: int) -> SaslHandshakeResponse:
    sasl = None if ctx.session is None else ctx.session.sasl
    if sasl is None:
        return SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[])
    error = sasl.handshake(request.mechanism)
    if error != Errors.NONE:
        ctx.session.failed_authentication = True  # type: ignore[union-attr]  # Kafka closes after the answer
    return SaslHandshakeResponse(error_code=error, mechanisms=list(sasl.enabled))
