"""ApiVersions (18), v0-4: the APIs we serve and their version ranges, exactly the dispatch table.

A request newer than v4 never reaches this handler: the server answers it with
UNSUPPORTED_VERSION in a v0 body (see ``codec.connection``), as Kafka does (KIP-511).

v3+ also carries KIP-584 features (tagged fields): ``transaction.version`` is supported at levels
0-2 and finalized at the broker's ``transaction.version`` config (Kafka 4.0's default 2: clients
may use transactions V2, KIP-890 part 2). A level of 0 is not listed as finalized (Kafka drops
features finalized at 0). The finalized-features epoch is 0: there is one broker and its features
change only across restarts.
"""

from __future__ import annotations

from typing import cast

from rivven_kproto.broker.config import MAX_TRANSACTION_VERSION
from rivven_kproto.codec.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from rivven_kproto.codec.schema import CachedArray

from ..context import RequestContext

API_KEY = 18
TRANSACTION_VERSION_FEATURE = "transaction.version"
FINALIZED_FEATURES_EPOCH = 0


def supported_versions() -> list[ApiVersion]:
    from . import HANDLERS  # the table imports this module

    return [
        ApiVersion(api_key=key, min_version=handler.versions.low, max_version=handler.versions.high)
        for key, handler in sorted(HANDLERS.items())
    ]


# Every client asks for this table on every connection, and it only changes with the code: its
# ~60 entries are built and encoded once per version, then written as bytes (building and encoding
# them was half of what a broker busy with many short connections spent).
_SUPPORTED = CachedArray(supported_versions)


def build(version: int, transaction_version: int) -> ApiVersionsResponse:
    """The answer at ``version`` for a broker finalizing ``transaction_version``, built afresh."""
    response = ApiVersionsResponse(error_code=0, api_keys=cast("list[ApiVersion]", _SUPPORTED), throttle_time_ms=0)
    if version >= 3:
        level = transaction_version
        response.supported_features = [
            SupportedFeatureKey(name=TRANSACTION_VERSION_FEATURE, min_version=0, max_version=MAX_TRANSACTION_VERSION)
        ]
        response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH
        response.finalized_features = (
            [FinalizedFeatureKey(name=TRANSACTION_VERSION_FEATURE, max_version_level=level, min_version_level=level)]
            if level > 0
            else []
        )
    return response


# The whole answer, pinned (encoded once), by (request version, transaction.version): the only
# inputs it has. The table is the dispatch table, fixed at import, and every listener answers the
# same (a SASL listener too, as Kafka's). Many short-lived or polling clients made building and
# encoding it again per request a large share of a busy broker's time.
_ANSWERS: dict[tuple[int, int], ApiVersionsResponse] = {}


def handle(ctx: RequestContext, request: ApiVersionsRequest, version: int) -> ApiVersionsResponse:
    key = (version, ctx.config.transaction_version)
    answer = _ANSWERS.get(key)
    if answer is None:
        answer = _ANSWERS[key] = build(version, ctx.config.transaction_version).pin(version)
    return answer
