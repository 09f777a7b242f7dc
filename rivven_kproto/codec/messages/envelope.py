"""Envelope (key 58), version 0: a client's request forwarded by a broker to the controller.

Not advertised in ApiVersions (Kafka lists it on the controller listener only); the server accepts
it from a principal allowed ClusterAction on the cluster (the brokers themselves).
"""

from __future__ import annotations

from ..schema import BYTES, INT16, Request, Response, kafka_message, kf


@kafka_message(api_key=58, valid="0", flexible="0+")
class EnvelopeRequest(Request):
    request_data: bytes = kf(BYTES)
    request_principal: bytes | None = kf(BYTES, nullable="0+")
    client_host_address: bytes = kf(BYTES)


@kafka_message(api_key=58, valid="0", flexible="0+")
class EnvelopeResponse(Response):
    response_data: bytes | None = kf(BYTES, nullable="0+", default=None)
    error_code: int = kf(INT16)
