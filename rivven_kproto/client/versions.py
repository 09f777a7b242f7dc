"""ApiVersions negotiation: per API, the highest version both we and the broker speak.

We never assume the broker is ours: the version of every request comes from the broker's
ApiVersions answer intersected with what our codec declares, so the client talks to Kafka 2.x,
3.x, 4.x or any other Kafka-compatible broker, using the newest version both understand.
"""

from __future__ import annotations

from dataclasses import dataclass

from rivven_kproto.codec.messages.api_versions import ApiVersion
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

    def __init__(self, advertised: list[ApiVersion]) -> None:
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

    def supports(self, request_cls: type[Request], min_version: int = 0) -> bool:
        support = self.apis.get(request_cls.API_KEY)
        return support is not None and support.negotiated is not None and support.negotiated >= min_version

    def version_for(self, request_cls: type[Request], min_version: int = 0) -> int:
        """The version to send ``request_cls`` at; UnsupportedApiError when there is none."""
        name = api_name(request_cls.API_KEY)
        support = self.apis.get(request_cls.API_KEY)
        if support is None:
            raise UnsupportedApiError(f"the broker does not serve {name}")
        if support.negotiated is None or support.negotiated < min_version:
            raise UnsupportedApiError(
                f"the broker serves {name} v{support.broker_min}-{support.broker_max}; "
                f"this client needs v{max(min_version, request_cls.VALID_VERSIONS.low)}"
                f"-{request_cls.VALID_VERSIONS.high}"
            )
        return support.negotiated
