"""Version rules shared by the transaction APIs."""

from __future__ import annotations

from rivven_kproto.codec.errors import Errors


def fenced_for_version(error: Errors, version: int, first_version_with_fenced: int) -> Errors:
    """PRODUCER_FENCED (KIP-588) reaches only clients new enough to know it; older ones get
    INVALID_PRODUCER_EPOCH, as Kafka does."""
    if error == Errors.PRODUCER_FENCED and version < first_version_with_fenced:
        return Errors.INVALID_PRODUCER_EPOCH
    return error
