"""Appending a coordinator's records to its log, as the request that made them sees it.

The group and share coordinators append first and apply after (a failed append changes nothing);
a failure refuses the request: NOT_COORDINATOR when the log cannot be written (the client finds
the coordinator again and retries), UNKNOWN_SERVER_ERROR for an entry beyond the log's size bound.
"""

from __future__ import annotations

import logging
from typing import Any

from rivven_kproto.codec.errors import Errors, KafkaError

log = logging.getLogger(__name__)


def append_or_refuse(durable_log: Any, payload: bytes, coordinator: str) -> None:
    """``durable_log.append(payload)``, its failures turned into the request's error."""
    try:
        durable_log.append(payload)
    except OSError as exc:
        log.error("%s coordinator log write failed: %s", coordinator, exc)
        raise KafkaError(Errors.NOT_COORDINATOR, f"the {coordinator} coordinator could not write its log") from exc
    except ValueError as exc:  # an entry beyond the log's size bound
        raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, str(exc)) from exc
