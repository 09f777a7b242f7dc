"""A principal as Kafka's brokers serialize it into an Envelope (its DefaultPrincipalData, v0):
an int16 version, then a flexible struct of the principal type, name and whether it came from a
delegation token. The controller authorizes the forwarded request as this principal."""

from __future__ import annotations

import struct

from .errors import Errors, KafkaError
from .varint import decode_unsigned_varint, encode_unsigned_varint

_VERSION = struct.Struct(">h")
MAX_PRINCIPAL_BYTES = 4096


def encode_principal(principal: str, *, token_authenticated: bool = False) -> bytes:
    """``User:alice`` as DefaultPrincipalData v0."""
    kind, _, name = principal.partition(":")
    out = bytearray(_VERSION.pack(0))
    for text in (kind, name):
        raw = text.encode()
        out += encode_unsigned_varint(len(raw) + 1) + raw
    out += b"\x01" if token_authenticated else b"\x00"
    out += b"\x00"  # no tagged fields
    return bytes(out)


def decode_principal(data: bytes) -> str:
    """``Type:Name`` from DefaultPrincipalData v0; INVALID_REQUEST for anything else."""
    try:
        if len(data) > MAX_PRINCIPAL_BYTES or _VERSION.unpack_from(data)[0] != 0:
            raise ValueError("unknown principal data version")
        pos, texts = _VERSION.size, []
        for _ in range(2):
            length, pos = decode_unsigned_varint(data, pos)
            if length == 0 or pos + length - 1 > len(data):
                raise ValueError("principal string out of bounds")
            texts.append(bytes(data[pos:pos + length - 1]).decode())
            pos += length - 1
        if pos >= len(data):
            raise ValueError("truncated principal data")
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        raise KafkaError(Errors.INVALID_REQUEST, f"bad forwarded principal: {exc}") from None
    return f"{texts[0]}:{texts[1]}"
