"""ApiVersions negotiation: per API, the highest version both we and the broker speak.

We never assume the broker is ours: the version of every request comes from the broker's
ApiVersions answer intersected with what our codec declares, so the client talks to Kafka 2.x,
3.x, 4.x or any other Kafka-compatible broker, using the newest version both understand.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from rivven_kproto.codec.schema import REQUESTS, Request

from .errors import UnsupportedApiError


def api_name(api_key: int) -> str:
    """The spec's name of an API ("Metadata"), or ``api-<key>`` for one our codec lacks."""
    request_cls = REQUESTS.get(api_key)
    if request_cls is None:
        return f"api-{api_key}"
    return request_cls.kafka_name().removesuffix("Request")


def negotiate(ours_low: int, ours_high: int, broker_low: int, broker_high: int) -> int | None:
    """min(our max, broker max), provided it is not below either side's minimum."""
    version = min(ours_high, broker_high)
    if version < max(ours_low, broker_low):
        return None
    return version


@dataclass(frozen=True)
class ApiSupport:
    """One API as the broker advertised it, with our range and the version we will use."""

    api_key: int
    broker_min: int
    broker_max: int
    client_min: int | None
    client_max: int | None
    negotiated: int | None

    @property
    def name(self) -> str:
        return api_name(self.api_key)


class NegotiatedVersions:
    """The outcome of one ApiVersions exchange with one broker."""

    def __init__(self, advertised: list[ApiVersion], finalized_features: dict[str, int] | None = None) -> None:
        # KIP-584 finalized features (ApiVersions v3+): name -> level, e.g. transaction.version.
        self.finalized_features = dict(finalized_features or {})
        self.apis: dict[int, ApiSupport] = {}
        for entry in advertised:
            request_cls = REQUESTS.get(entry.api_key)
            if request_cls is None:
                support = ApiSupport(entry.api_key, entry.min_version, entry.max_version, None, None, None)
            else:
                ours = request_cls.VALID_VERSIONS
                chosen = negotiate(ours.low, ours.high, entry.min_version, entry.max_version)
                support = ApiSupport(entry.api_key, entry.min_version, entry.max_version, ours.low, ours.high, chosen)
            self.apis[entry.api_key] = support

    @classmethod
    def fixed(cls, versions: Mapping[type[Request], int]) -> NegotiatedVersions:
        """Versions the caller knows without asking: a broker's requests to the others of its
        cluster, which run the same software (no ApiVersions round trip per connection)."""
        return cls([ApiVersion(api_key=request_cls.API_KEY, min_version=version, max_version=version)
                    for request_cls, version in versions.items()])

    def supports(self, request_cls: type[Request], min_version: int = 0) -> bool:
        support = self.apis.get(request_cls.API_KEY)
        return support is not None and support.negotiated is not None and support.negotiated >= min_version

    def feature_level(self, name: str) -> int:
        """The broker's finalized level of a feature; 0 when it finalized none (or predates KIP-584)."""
        return self.finalized_features.get(name, 0)

    def version_for(self, request_cls: type[Request], min_version: int = 0, max_version: int | None = None) -> int:
        """The version to send ``request_cls`` at, at most ``max_version`` (a feature the caller
        does not use, such as transactions V2); UnsupportedApiError when there is none."""
        name = api_name(request_cls.API_KEY)
        support = self.apis.get(request_cls.API_KEY)
        if support is None:
            raise UnsupportedApiError(f"the broker does not serve {name}")
        chosen = support.negotiated
        if chosen is not None and max_version is not None and chosen > max_version:
            chosen = max_version if max_version >= max(support.broker_min, support.client_min or 0) else None
        if chosen is None or chosen < min_version:
            raise UnsupportedApiError(
                f"the broker serves {name} v{support.broker_min}-{support.broker_max}; "
                f"this client needs v{max(min_version, request_cls.VALID_VERSIONS.low)}"
                f"-{request_cls.VALID_VERSIONS.high if max_version is None else max_version}"
            )
        return chosen


ApiVersionsExchange = Generator[tuple[ApiVersionsRequest, int], ApiVersionsResponse, tuple[int, ApiVersionsResponse]]


def api_versions_exchange(software_name: str, software_version: str) -> ApiVersionsExchange:
    """KIP-511's ApiVersions exchange, sans-IO: send each (request, version) it yields and send
    the response back in; it returns (version, final response). Our newest version first; a broker
    that does not know it answers UNSUPPORTED_VERSION with its own range, and we retry at the
    newest version both speak (v0 when it names none)."""
    version = ApiVersionsRequest.VALID_VERSIONS.high
    while True:
        if version >= 3:
            request = ApiVersionsRequest(client_software_name=software_name, client_software_version=software_version)
        else:
            request = ApiVersionsRequest()
        response = yield request, version
        if response.error_code == Errors.UNSUPPORTED_VERSION:
            theirs = next((a for a in response.api_keys if a.api_key == ApiVersionsRequest.API_KEY), None)
            fallback = 0 if theirs is None else negotiate(0, version, theirs.min_version, theirs.max_version)
            if fallback is not None and fallback < version:
                version = fallback
                continue
        return version, response
