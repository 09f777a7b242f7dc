"""ApiVersions (18), v0-4: the APIs we serve and their version ranges, exactly the dispatch table.

A request newer than v4 never reaches this handler: the server answers it with
UNSUPPORTED_VERSION in a v0 body (see ``codec.connection``), as Kafka does (KIP-511).
"""

from __future__ import annotations

from rivven_kproto.codec.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse

from ..context import RequestContext

API_KEY = 18


def supported_versions() -> list[ApiVersion]:
    from . import HANDLERS  # the table imports this module

    return [
        ApiVersion(api_key=key, min_version=handler.versions.low, max_version=handler.versions.high)
        for key, handler in sorted(HANDLERS.items())
    ]


def handle(ctx: RequestContext, request: ApiVersionsRequest, version: int) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0, api_keys=supported_versions(), throttle_time_ms=0)
