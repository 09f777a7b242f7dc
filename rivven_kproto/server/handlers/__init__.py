"""The dispatch table: one module per Kafka API, each a plain function (ctx, request, version).

A handler module declares ``API_KEY`` (its request class's key), ``VERSIONS`` (the versions it
serves, advertised in ApiVersions) and ``handle(ctx, request, version) -> response``. Only APIs
listed here are advertised: never one we cannot serve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from rivven_kproto.codec.schema import REQUESTS, Versions

from . import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    fetch,
    find_coordinator,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
)

_MODULES: list[ModuleType] = [
    api_versions,
    metadata,
    produce,
    fetch,
    list_offsets,
    create_topics,
    delete_topics,
    create_partitions,
    describe_configs,
    alter_configs,
    incremental_alter_configs,
    describe_cluster,
    delete_records,
    find_coordinator,
    init_producer_id,
]


@dataclass(frozen=True)
class Handler:
    api_key: int
    versions: Versions
    handle: Callable[..., Any]


HANDLERS: dict[int, Handler] = {}
for _module in _MODULES:
    _key = _module.API_KEY
    # Advertise what the codec declares for this API (issue table), unless the handler narrows it.
    _versions = getattr(_module, "VERSIONS", REQUESTS[_key].VALID_VERSIONS)
    HANDLERS[_key] = Handler(_key, _versions, _module.handle)
