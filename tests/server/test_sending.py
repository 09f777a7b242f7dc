"""A frame with file regions arrives byte for byte, by sendfile on a socket or read elsewhere (issue #22)."""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest
import trio
import trio.testing

from rivven_kproto.broker.log.region import FileRegion
from rivven_kproto.codec.splice import ExternalBytes, ExternalBytesGone, Frame
from rivven_kproto.server.sending import CHUNK_BYTES, ShortRegion, send_reply

SIZE = 24 * 1024 * 1024  # far more than the loopback socket buffers: sendfile stops and resumes


def frame_of(path: Path, data: bytes) -> tuple[Frame, bytes]:
    """header | region | middle | region(two parts) | tail, and the bytes it stands for."""
    fd = os.open(path, os.O_RDONLY)
    try:
        first = FileRegion([(os.dup(fd), 10, 5_000_000)], [5_000_000], [0])
        rest = SIZE - 6_000_000
        second = FileRegion([(os.dup(fd), 5_000_010, 900_000), (os.dup(fd), 6_000_000, rest)],
                            [900_000, 900_000 + rest], [0, 1])
    finally:
        os.close(fd)
    pieces: list[bytes | FileRegion] = [b"head", first, b"middle", second, b"tail"]
    expected = b"head" + data[10:5_000_010] + b"middle" + data[5_000_010:5_900_010] + data[6_000_000:] + b"tail"
    return Frame(list(pieces), len(expected)), expected


@pytest.fixture
def segment(tmp_path: Path) -> tuple[Path, bytes]:
    data = os.urandom(SIZE)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return path, data


async def receive_all(stream: trio.abc.ReceiveStream, size: int) -> bytes:
    received = bytearray()
    while len(received) < size:
        chunk = await stream.receive_some(1 << 20)
        if not chunk:
            break
        received += chunk
    return bytes(received)


async def over_tcp(frame: Frame, size: int) -> tuple[bytes, tuple[int, int]]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    server = await listeners[0].accept()
    sent: list[tuple[int, int]] = []
    async with trio.open_nursery() as nursery:
        async def send() -> None:
            sent.append(await send_reply(server, frame))
        nursery.start_soon(send)
        received = await receive_all(client, size)
    for stream in (client, server, *listeners):
        await stream.aclose()
    return received, sent[0]


async def test_sendfile_on_a_socket_delivers_the_exact_frame(segment: tuple[Path, bytes]) -> None:
    frame, expected = frame_of(*segment)
    received, sent = await over_tcp(frame, len(expected))
    assert sent == (len(expected), len(expected) - len(b"headmiddletail"))  # every region by sendfile
    assert received == expected
    assert all(region.parts == [] for region in frame.external if isinstance(region, FileRegion))


async def test_a_stream_without_a_socket_gets_the_regions_read(segment: tuple[Path, bytes]) -> None:
    frame, expected = frame_of(*segment)
    sender, receiver = trio.testing.memory_stream_pair()
    sent: list[tuple[int, int]] = []
    async with trio.open_nursery() as nursery:
        async def send() -> None:
            sent.append(await send_reply(sender, frame))
        nursery.start_soon(send)
        received = await receive_all(receiver, len(expected))
    assert received == expected
    assert sent == [(len(expected), 0)]
    assert all(region.parts == [] for region in frame.external if isinstance(region, FileRegion))


async def test_a_file_shortened_under_the_send_breaks_the_connection(segment: tuple[Path, bytes]) -> None:
    path, data = segment
    frame, expected = frame_of(path, data)
    os.truncate(path, 4_000_000)  # inside the first region
    with pytest.RaisesGroup(ShortRegion):
        await over_tcp(frame, len(expected))
    assert all(region.parts == [] for region in frame.external if isinstance(region, FileRegion))


async def test_bytes_larger_than_the_socket_buffers_arrive_whole() -> None:
    """A bytes reply is written at once as far as the socket takes it; send_all sends the rest."""
    data = os.urandom(SIZE)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    client = await trio.open_tcp_stream("127.0.0.1", listeners[0].socket.getsockname()[1])
    server = await listeners[0].accept()
    sent: list[tuple[int, int]] = []
    async with trio.open_nursery() as nursery:
        async def send() -> None:
            sent.append(await send_reply(server, data))
            sent.append(await send_reply(server, b"small"))
        nursery.start_soon(send)
        received = await receive_all(client, SIZE + 5)
    assert received == data + b"small"
    assert sent == [(SIZE, 0), (5, 0)]
    await client.aclose()
    with pytest.raises(trio.BrokenResourceError):
        for _ in range(100):  # the peer is gone: a write fails (at once, or once the reset arrives)
            await send_reply(server, b"x" * 65536)
            await trio.lowlevel.checkpoint()
    for stream in (server, *listeners):
        await stream.aclose()


class RecordingStream(trio.abc.Stream):
    """Forwards to ``inner`` and records the size of every ``send_all`` (what a TLS stream would
    encrypt into its buffer at once)."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.sizes: list[int] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.sizes.append(len(data))
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_without_sendfile_a_frame_is_read_and_sent_a_chunk_at_a_time(segment: tuple[Path, bytes]) -> None:
    """Issue #37 item 7: a 24 MiB frame reaches a stream without a socket (TLS) in pieces of at most
    ``CHUNK_BYTES`` (256 KiB; 1 MiB asserted), each handed over before the next is read (this
    stream waits for its reader), instead of in one piece read whole."""
    frame, expected = frame_of(*segment)
    sender, receiver = trio.testing.lockstep_stream_pair()
    recording = RecordingStream(sender)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_reply, recording, frame)
        received = await receive_all(receiver, len(expected))
    assert received == expected
    assert max(recording.sizes) <= 1 << 20 and sum(recording.sizes) == len(expected)


class Chunked(ExternalBytes):
    """External bytes read a chunk at a time (the PostgreSQL engine's rows), counting the chunks
    read; ``gone_after``: the chunk after which they vanish (rows deleted under the fetch)."""

    def __init__(self, data: bytes, gone_after: int | None = None) -> None:
        self.data, self.gone_after, self.read_chunks = data, gone_after, 0

    @property
    def size(self) -> int:
        return len(self.data)

    def read(self) -> bytes:
        raise AssertionError("read whole: chunks() must be used")

    def chunks(self, size: int) -> Generator[bytes, None, None]:
        for start in range(0, len(self.data), size):
            if self.gone_after is not None and self.read_chunks >= self.gone_after:
                raise ExternalBytesGone("rows deleted")
            self.read_chunks += 1
            yield self.data[start:start + size]

    def release(self) -> None:
        pass


@pytest.mark.parametrize("over", ["socket", "tls-like"])
async def test_external_bytes_are_read_a_chunk_at_a_time_on_any_stream(over: str) -> None:
    """Issue #37 item 7 on the PostgreSQL engine: its batches reach the connection in chunks, each
    read only when the previous was handed over, by socket (no sendfile for rows) or TLS."""
    data = os.urandom(SIZE)
    external = Chunked(data)
    frame = Frame([b"head", external, b"tail"], SIZE + 8)
    if over == "socket":
        received, sent = await over_tcp(frame, SIZE + 8)
        assert sent == (SIZE + 8, 0)
    else:
        sender, receiver = trio.testing.lockstep_stream_pair()
        recording = RecordingStream(sender)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_reply, recording, frame)
            received = await receive_all(receiver, SIZE + 8)
        assert max(recording.sizes) <= 1 << 20
    assert received == b"head" + data + b"tail"
    assert external.read_chunks == SIZE // CHUNK_BYTES


async def test_external_bytes_gone_under_the_send_break_the_connection() -> None:
    frame = Frame([b"head", Chunked(os.urandom(SIZE), gone_after=3), b"tail"], SIZE + 8)
    with pytest.RaisesGroup(ShortRegion):
        await over_tcp(frame, SIZE + 8)
