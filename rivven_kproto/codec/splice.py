"""Responses as pieces: encoded bytes interleaved with bytes the encoder never holds.

A Fetch response is mostly record batches copied unchanged from segment files. Encoding those
bytes means reading them into Python first; instead the encoder may be handed an
:class:`ExternalBytes` (a file region, say) in a ``records`` field: it writes the length prefix,
which only needs the size, and leaves a hole the I/O layer fills when sending (``sendfile``).
:func:`~rivven_kproto.codec.connection.encode_response_frame` returns the result as a
:class:`Frame`: its size prefix already counts the holes, so the frame is exactly what the bytes
encoding of the same data would have been.
"""

from __future__ import annotations

import abc
import io
from collections.abc import Generator
from dataclasses import dataclass


class ExternalBytesGone(Exception):
    """The bytes an :class:`ExternalBytes` promised are no longer there (deleted, or their store
    failed) while its frame was being sent: the frame cannot be completed."""


class ExternalBytes(abc.ABC):
    """Bytes of a known size kept outside the encoder (a file region) until the frame is sent."""

    chunks_block = True  # False: ``chunks`` only joins bytes already in memory (no worker thread needed)

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """How many bytes: fixed when the response is encoded, since the length prefix says so."""

    @abc.abstractmethod
    def read(self) -> bytes:
        """The bytes themselves (the fallback where zero-copy sending is impossible); may block."""

    def chunks(self, size: int) -> Generator[bytes, None, None]:
        """The bytes, about ``size`` at a time (more when one indivisible piece is larger), each
        read only when asked for, so a slow receiver holds one chunk; may block (call each step
        on a worker thread). Raises :class:`ExternalBytesGone` when they vanished meanwhile."""
        yield self.read()

    @abc.abstractmethod
    def release(self) -> None:
        """Let go of what keeps the bytes valid (descriptors); idempotent."""

    def __len__(self) -> int:
        return self.size


class SplicingStream(io.BytesIO):
    """The encoder's output stream, which records where external bytes go (``splice``)."""

    def __init__(self) -> None:
        super().__init__()
        self.holes: list[tuple[int, ExternalBytes]] = []  # (position in the encoded bytes, what goes there)

    def splice(self, external: ExternalBytes) -> None:
        self.holes.append((self.tell(), external))


@dataclass
class Frame:
    """A whole response frame (size prefix included) as pieces sent in order."""

    pieces: list[bytes | ExternalBytes]
    size: int  # bytes on the wire, size prefix included

    @property
    def external(self) -> list[ExternalBytes]:
        return [piece for piece in self.pieces if isinstance(piece, ExternalBytes)]

    def materialize(self) -> bytes:
        """The frame as one bytes object (reads every external piece: may block)."""
        return b"".join(piece if isinstance(piece, bytes) else piece.read() for piece in self.pieces)

    def release(self) -> None:
        for piece in self.external:
            piece.release()


def cut_pieces(encoded: bytes, holes: list[tuple[int, ExternalBytes]]) -> list[bytes | ExternalBytes]:
    """Interleave ``encoded`` (cut at each hole's position) with the holes' external bytes."""
    pieces: list[bytes | ExternalBytes] = []
    start = 0
    for position, external in holes:
        if position > start:
            pieces.append(encoded[start:position])
        pieces.append(external)
        start = position
    if start < len(encoded):
        pieces.append(encoded[start:])
    return pieces
