"""Writing a response frame to a connection, file regions by ``sendfile`` where possible.

A :class:`~rivven_kproto.codec.splice.Frame` is encoded bytes interleaved with file regions
(Fetch's record batches, see ``broker/log/region.py``). On a plain trio ``SocketStream`` the
bytes pieces go out with ``send_all`` and each region with ``os.sendfile`` on the socket:
the kernel copies the page cache to the socket, Python never sees the bytes. The socket is
non-blocking (trio's), so ``sendfile`` stops at a full send buffer (a partial count, or
``BlockingIOError``) and we wait for writability. Any other stream (TLS, a test's memory stream)
gets the regions read with ``pread`` a chunk at a time (``CHUNK_BYTES``, on a worker thread), each
chunk sent (encrypted) before the next is read: a connection never holds more than about a chunk
of record bytes built and unsent, so a reader that does not read costs the broker little memory
and slows only itself (the whole response used to be read, then encrypted, in memory: four
unread 30 MiB TLS fetches took 430 MiB).

Other external bytes (the PostgreSQL engine's rows, an engine's in-memory tail) are taken from
their ``chunks`` a chunk at a time, each read on a worker thread, on any stream: a connection holds
about a chunk of them too. Bytes that vanished meanwhile (rows deleted under the fetch) close the
connection, as a shortened segment does.

Either way the frame's regions are released once it is sent or the sending fails.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from typing import Any

import trio

from rivven_kproto.broker.log.region import FileRegion
from rivven_kproto.codec.splice import ExternalBytes, ExternalBytesGone, Frame

log = logging.getLogger(__name__)

# Where sendfile cannot be used, regions are read (on a worker thread) and sent this much at a
# time, and bytes pieces are handed to the stream in slices of this size (TLS encrypts what it is
# given at once, into a buffer as large).
CHUNK_BYTES = 256 * 1024


class ShortRegion(trio.BrokenResourceError):
    """A region's file ended before its promised length (truncated under the fetch): the frame
    cannot be completed, so the connection is closed (the client retries the fetch)."""


async def send_reply(
    stream: trio.abc.Stream, reply: bytes | Frame, limiter: trio.CapacityLimiter | None = None
) -> tuple[int, int]:
    """Send one response frame; returns (bytes written, of which by sendfile)."""
    if isinstance(reply, bytes):
        await _send_bytes(stream, reply)
        return len(reply), 0
    try:
        if isinstance(stream, trio.SocketStream):
            return reply.size, await _send_zero_copy(stream, reply, limiter)
        await _send_in_chunks(stream, reply, limiter)
        return reply.size, 0
    finally:
        reply.release()


async def _send_in_chunks(stream: trio.abc.Stream, frame: Frame, limiter: trio.CapacityLimiter | None) -> None:
    """The fallback: bytes pieces (adjacent ones joined) and regions read, a chunk at a time."""
    for piece in _joined(frame.pieces):
        if isinstance(piece, bytes):
            await _send_slices(stream, piece)
        elif isinstance(piece, FileRegion):
            await _send_region_read(stream, piece, limiter)
        else:
            await _send_external(stream, piece, limiter)


async def _send_external(stream: trio.abc.Stream, piece: ExternalBytes, limiter: trio.CapacityLimiter | None) -> None:
    """Each chunk read (on a worker thread, unless already in memory) once the previous one is sent."""
    chunks = piece.chunks(CHUNK_BYTES)
    try:
        while True:
            if piece.chunks_block:
                chunk = await trio.to_thread.run_sync(next, chunks, None, limiter=limiter)
            else:
                chunk = next(chunks, None)
            if chunk is None:
                break
            await _send_slices(stream, chunk)
    except ExternalBytesGone as exc:
        log.warning("a fetch's batches could not be read while it was sent (%s); closing the connection", exc)
        raise ShortRegion(str(exc)) from exc
    finally:
        chunks.close()


def _joined(pieces: Iterable[Any]) -> Iterator[Any]:
    """The frame's pieces with each run of adjacent bytes pieces joined into one."""
    pending: list[bytes] = []
    for piece in pieces:
        if isinstance(piece, bytes):
            pending.append(piece)
            continue
        if pending:
            yield b"".join(pending)
            pending = []
        yield piece
    if pending:
        yield b"".join(pending)


async def _send_slices(stream: trio.abc.Stream, data: bytes) -> None:
    view = memoryview(data)
    for start in range(0, len(view), CHUNK_BYTES):
        await stream.send_all(view[start:start + CHUNK_BYTES])


async def _send_region_read(stream: trio.abc.Stream, region: FileRegion, limiter: trio.CapacityLimiter | None) -> None:
    """``pread`` a chunk on a worker thread, send it, read the next: one chunk in memory at a time."""
    for fd, position, length in region.parts:
        offset, end = position, position + length
        while offset < end:
            size = min(CHUNK_BYTES, end - offset)
            chunk = await trio.to_thread.run_sync(os.pread, fd, size, offset, limiter=limiter)
            if len(chunk) < size:
                log.error("a segment file ended %d bytes short of a fetch's region; closing the connection",
                          end - offset - len(chunk))
                raise ShortRegion("segment file shortened under a fetch")
            await stream.send_all(chunk)
            offset += size


async def _send_zero_copy(stream: trio.SocketStream, frame: Frame, limiter: trio.CapacityLimiter | None = None) -> int:
    """Bytes pieces (adjacent ones joined) with ``send_all``, regions with ``sendfile``; returns
    the bytes sent by sendfile. (No ``MSG_MORE`` on the bytes: Linux then held the next sendfile's
    data back for ~200 ms, the corking timer, on every response.)"""
    spliced = 0
    for piece in _joined(frame.pieces):
        if isinstance(piece, bytes):
            await _send_bytes(stream, piece)
        elif isinstance(piece, FileRegion):
            await _sendfile(stream.socket, piece)
            spliced += piece.size
        else:
            await _send_external(stream, piece, limiter)
    return spliced


async def _send_bytes(stream: trio.abc.Stream, data: bytes) -> None:
    """``send_all``, but on a socket first one ``write`` straight away: a response that fits the
    send buffer (nearly all of them) then costs no pass through trio's scheduler, which
    ``send_all`` makes after every successful send. The rest, if any, goes by ``send_all``
    (waiting for writability). The connection's next receive is its checkpoint."""
    if isinstance(stream, trio.SocketStream) and data:
        try:
            sent = os.write(stream.socket.fileno(), data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            raise trio.BrokenResourceError(f"socket write failed: {exc}") from exc
        if sent == len(data):
            return
        data = data[sent:]
    await stream.send_all(data)


async def _sendfile(sock: trio.socket.SocketType, region: FileRegion) -> None:
    out = sock.fileno()
    for fd, position, length in region.parts:
        offset, end = position, position + length
        while offset < end:
            try:
                sent = os.sendfile(out, fd, offset, end - offset)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(f"sendfile failed: {exc}") from exc
            if sent == 0:
                log.error("a segment file ended %d bytes short of a fetch's region; closing the connection",
                          end - offset)
                raise ShortRegion("segment file shortened under a fetch")
            offset += sent
            await trio.lowlevel.checkpoint()  # a fast reader never fills the buffer: let others run
