"""ApiVersions (18), v0-4: the APIs we serve and their version ranges, exactly the dispatch table.

A request newer than v4 never reaches this handler: the server answers it with
UNSUPPORTED_VERSION in a v0 body (see ``codec.connection``), as Kafka does (KIP-511).

v3+ also carries KIP-584 features (tagged fields): ``transaction.version`` is supported at levels
0-2 and finalized at the broker's ``transaction.version`` config (Kafka 4.0's default 2: clients
may use transactions V2, KIP-890 part 2). A level of 0 is not listed as finalized (Kafka drops
features finalized at 0). The finalized-features epoch is 0: there is one broker and its features
change only across restarts.

``share.version`` (KIP-932) is supported at levels 0-1 and finalized at 1 when share groups are on
(``group.share.enable``, default true); off, the share-group APIs (76-79, 90-92) are
not advertised either, as Kafka 4.2 decides from the feature level.
"""

from __future__ import annotations

from typing import cast

from rivven_kproto.broker.config import MAX_TRANSACTION_VERSION
from rivven_kproto.codec.connection import encode_unsupported_api_versions
from rivven_kproto.codec.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from rivven_kproto.codec.schema import CachedArray

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = 18
ROUTE = LOCAL
TRANSACTION_VERSION_FEATURE = "transaction.version"
SHARE_VERSION_FEATURE = "share.version"
SHARE_VERSION = 1
SHARE_API_KEYS = frozenset({76, 77, 78, 79, 90, 91, 92})
FINALIZED_FEATURES_EPOCH = 0


def supported_versions() -> list[ApiVersion]:
    from . import HANDLERS  # the table imports this module

    return [
        ApiVersion(api_key=key, min_version=handler.versions.low, max_version=handler.versions.high)
        for key, handler in sorted(HANDLERS.items())
    ]


def newer_than_ours(correlation_id: int) -> bytes:
    """The answer to an ApiVersions newer than we serve (the one request the codec cannot decode,
    KIP-511): v0's UNSUPPORTED_VERSION with our table, which every client can read."""
    return encode_unsupported_api_versions(correlation_id, supported_versions())


# Every client asks for this table on every connection, and it only changes with the code: its
# ~60 entries are built and encoded once per version, then written as bytes (building and encoding
# them was half of what a broker busy with many short connections spent).
_SUPPORTED = CachedArray(supported_versions)
_SUPPORTED_WITHOUT_SHARE = CachedArray(
    lambda: [v for v in supported_versions() if v.api_key not in SHARE_API_KEYS])


def build(version: int, transaction_version: int, share: bool = True) -> ApiVersionsResponse:
    """The answer at ``version`` for a broker finalizing ``transaction_version`` (and share groups
    on or off), built afresh."""
    table = _SUPPORTED if share else _SUPPORTED_WITHOUT_SHARE
    response = ApiVersionsResponse(error_code=0, api_keys=cast("list[ApiVersion]", table), throttle_time_ms=0)
    if version >= 3:
        level = transaction_version
        response.supported_features = [
            SupportedFeatureKey(name=SHARE_VERSION_FEATURE, min_version=0, max_version=SHARE_VERSION),
            SupportedFeatureKey(name=TRANSACTION_VERSION_FEATURE, min_version=0, max_version=MAX_TRANSACTION_VERSION),
        ]
        response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH
        finalized = [(SHARE_VERSION_FEATURE, SHARE_VERSION if share else 0), (TRANSACTION_VERSION_FEATURE, level)]
        response.finalized_features = [
            FinalizedFeatureKey(name=name, max_version_level=at, min_version_level=at) for name, at in finalized if at > 0
        ]
    return response


# The whole answer, pinned (encoded once), by (request version, transaction.version): the only
# inputs it has. The table is the dispatch table, fixed at import, and every listener answers the
# same (a SASL listener too, as Kafka's). Many short-lived or polling clients made building and
# encoding it again per request a large share of a busy broker's time.
_ANSWERS: dict[tuple[int, int, bool], ApiVersionsResponse] = {}


def handle(ctx: RequestContext, request: ApiVersionsRequest, version: int) -> ApiVersionsResponse:
    share = ctx.broker.share_enabled
    key = (version, ctx.config.transaction_version, share)
    answer = _ANSWERS.get(key)
    if answer is None:
        answer = _ANSWERS[key] = build(version, ctx.config.transaction_version, share).pin(version)
    return answer
