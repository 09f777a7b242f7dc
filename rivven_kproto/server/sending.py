"""Writing a response frame to a connection, file regions by ``sendfile`` where possible.

A :class:`~rivven_kproto.codec.splice.Frame` is encoded bytes interleaved with file regions
(Fetch's record batches, see ``broker/log/region.py``). On a plain trio ``SocketStream`` the
bytes pieces go out with ``send_all`` and each region with ``os.sendfile`` on the socket:
the kernel copies the page cache to the socket, Python never sees the bytes. The socket is
non-blocking (trio's), so ``sendfile`` stops at a full send buffer (a partial count, or
``BlockingIOError``) and we wait for writability. Any other stream (TLS, a test's memory stream)
gets the regions read with ``pread`` (on a worker thread when large) and sent as bytes.

Either way the frame's regions are released once it is sent or the sending fails.
"""

from __future__ import annotations

import logging
import os

import trio

from rivven_kproto.broker.log.region import FileRegion
from rivven_kproto.codec.splice import Frame

log = logging.getLogger(__name__)

# Regions at least this large are read on a worker thread when they cannot be sent with sendfile.
THREAD_READ_BYTES = 256 * 1024


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
            return reply.size, await _send_zero_copy(stream, reply)
        await stream.send_all(await _materialize(reply, limiter))
        return reply.size, 0
    finally:
        reply.release()


async def _materialize(frame: Frame, limiter: trio.CapacityLimiter | None) -> bytes:
    """The frame as bytes (the fallback): small regions read inline, large ones on a thread."""
    if sum(piece.size for piece in frame.external) >= THREAD_READ_BYTES:
        return await trio.to_thread.run_sync(frame.materialize, limiter=limiter)
    return frame.materialize()


async def _send_zero_copy(stream: trio.SocketStream, frame: Frame) -> int:
    """Bytes pieces (adjacent ones joined) with ``send_all``, regions with ``sendfile``; returns
    the bytes sent by sendfile. (No ``MSG_MORE`` on the bytes: Linux then held the next sendfile's
    data back for ~200 ms, the corking timer, on every response.)"""
    spliced = 0
    pending: list[bytes] = []
    for piece in frame.pieces:
        if isinstance(piece, bytes):
            pending.append(piece)
            continue
        if pending:
            await _send_bytes(stream, b"".join(pending))
            pending = []
        if isinstance(piece, FileRegion):
            await _sendfile(stream.socket, piece)
            spliced += piece.size
        else:
            await _send_bytes(stream, piece.read())
    if pending:
        await _send_bytes(stream, b"".join(pending))
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
