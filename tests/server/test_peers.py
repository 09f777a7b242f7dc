"""A broker's requests to its peers (``server/peers.py``) through the connection driver (``net/``),
against a real broker (``serve``) whose only listener is SASL_SSL with an authorizer: the peer
must come in over TLS, verified against the trust store, as its own super-user principal."""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trustme

from rivven_kproto.broker.cluster import Node
from rivven_kproto.broker.config import BrokerConfig, load_config
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataResponse
from rivven_kproto.server import peers
from rivven_kproto.server.app import serve
from rivven_kproto.server.peer_pool import MAX_IDLE_PER_PEER, SESSION_MARGIN_S

SELF_ID = 7  # the calling broker's node id (a broker of this process configured only as a caller)
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _config(tmp_path: Path, broker_password: str, extra: str = "") -> BrokerConfig:
    """A SASL_SSL broker whose only super user is ``broker`` (password ``broker-pw``); it logs in to
    its peers as ``broker`` with ``broker_password``."""
    ca = trustme.CA()
    keystore, ca_file = tmp_path / "server.pem", tmp_path / "ca.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca.cert_pem.write_to_path(str(ca_file))
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required'
            f' username="broker" password="{broker_password}" user_broker="broker-pw";')
    path = tmp_path / "server.properties"
    path.write_text(
        "listeners=SASL_SSL://127.0.0.1:0\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca_file}\n"
        f"authorizer.class.name={STANDARD}\n"
        "super.users=User:broker\n"
        "connection.failed.authentication.delay.ms=0\n"
        f"log.dirs={tmp_path / 'data'}\n" + extra)
    return load_config(path)


@asynccontextmanager
async def peer(tmp_path: Path, broker_password: str = "broker-pw", extra: str = "") -> AsyncIterator[Node]:
    """A running broker, as a Node of the caller's cluster; the caller (SELF_ID) configured with
    its inter-broker client."""
    config = _config(tmp_path, broker_password, extra)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve, config)
        peers.configure(SELF_ID, config.inter_broker())
        try:
            yield Node(config.node_id, "127.0.0.1", port)
        finally:
            await peers.close(SELF_ID)
            nursery.cancel_scope.cancel()


async def test_a_peer_request_goes_over_tls_and_sasl_as_the_brokers_principal(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with peer(tmp_path) as node:
            created = await peers.create_topics(node, ["peer-made"], SELF_ID, 5_000)
            assert created == {"peer-made": Errors.NONE}  # CREATE on the cluster: the super user's
            again = await peers.create_topics(node, ["peer-made"], SELF_ID, 5_000)
            assert again == {"peer-made": Errors.TOPIC_ALREADY_EXISTS}
            metadata = await peers.call(node, MetadataRequest(topics=None), 12, MetadataResponse, SELF_ID)
            assert [t.name for t in metadata.topics] == ["peer-made"]  # DESCRIBE allowed: not ANONYMOUS


async def test_refused_sasl_is_an_os_error_naming_the_mechanism_and_user(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with peer(tmp_path, broker_password="wrong") as node:
            with pytest.raises(OSError, match="SASL PLAIN as broker refused: SASL_AUTHENTICATION_FAILED"):
                await peers.create_topics(node, ["never"], SELF_ID, 5_000)


async def test_an_unreachable_peer_is_an_os_error(tmp_path: Path) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    await listener.aclose()  # nothing listens there now
    with trio.fail_after(10), pytest.raises(OSError, match="node 3: NETWORK_EXCEPTION"):
        await peers.call(Node(3, "127.0.0.1", port), MetadataRequest(topics=None), 12, MetadataResponse, SELF_ID)


async def test_no_api_versions_round_trip_and_the_brokers_client_id(tmp_path: Path) -> None:
    """Peers run the same software: the first request on the connection is the caller's own."""
    seen: list[tuple[int, int, str | None]] = []

    async def answer_nothing(stream: trio.SocketStream) -> None:
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            data += chunk
        header = RequestHeader.decode_from(io.BytesIO(data[4:]), 2)
        seen.append((header.request_api_key, header.request_api_version, header.client_id))
        await stream.aclose()  # no answer: the caller sees a lost connection

    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, answer_nothing, [listener])
            with pytest.raises(OSError, match="node 3: NETWORK_EXCEPTION"):
                await peers.call(Node(3, "127.0.0.1", port), MetadataRequest(topics=None), 12, MetadataResponse,
                                 SELF_ID)
            nursery.cancel_scope.cancel()
    assert seen == [(MetadataRequest.API_KEY, 12, "kproto-broker-7")]


# -- connection reuse (server/peer_pool.py) ----------------------------------------------------------


class CountingProxy:
    """Forwards each connection it accepts to ``upstream`` (the peer), counting them; :meth:`cut`
    closes every one, as a peer's restart does."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.accepted = 0
        self.open = 0
        self._streams: list[trio.SocketStream] = []

    async def handle(self, downstream: trio.SocketStream) -> None:
        self.accepted += 1
        self.open += 1
        upstream = await trio.open_tcp_stream("127.0.0.1", self.upstream)
        self._streams += [downstream, upstream]
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._pump, downstream, upstream, nursery.cancel_scope)
                nursery.start_soon(self._pump, upstream, downstream, nursery.cancel_scope)
        finally:
            self.open -= 1
            for stream in (downstream, upstream):
                await trio.aclose_forcefully(stream)

    @staticmethod
    async def _pump(source: trio.SocketStream, sink: trio.SocketStream, scope: trio.CancelScope) -> None:
        try:
            while data := await source.receive_some(65536):
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        scope.cancel()  # one side gone: the connection is over

    async def cut(self) -> None:
        streams, self._streams = self._streams, []
        for stream in streams:
            await trio.aclose_forcefully(stream)


@asynccontextmanager
async def proxied(tmp_path: Path, extra: str = "") -> AsyncIterator[tuple[Node, CountingProxy]]:
    """The SASL_SSL peer behind a counting proxy: the Node the caller sees is the proxy's."""
    async with peer(tmp_path, extra=extra) as node, trio.open_nursery() as nursery:
        proxy = CountingProxy(node.port)
        listeners = await nursery.start(functools.partial(trio.serve_tcp, proxy.handle, 0, host="127.0.0.1"))
        yield Node(node.node_id, "127.0.0.1", listeners[0].socket.getsockname()[1]), proxy
        nursery.cancel_scope.cancel()


async def metadata(node: Node) -> MetadataResponse:
    return await peers.call(node, MetadataRequest(topics=None), 12, MetadataResponse, SELF_ID)


async def test_a_second_request_reuses_the_connection_and_close_ends_it(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with proxied(tmp_path) as (node, proxy):
            await peers.create_topics(node, ["reused"], SELF_ID, 5_000)
            assert [t.name for t in (await metadata(node)).topics] == ["reused"]
            assert (proxy.accepted, proxy.open) == (1, 1)  # one TLS handshake and SASL login for both
            await peers.close(SELF_ID)  # the broker stops: its idle connections close
            with trio.fail_after(5):
                while proxy.open:
                    await trio.sleep(0.01)


async def test_a_restarted_peer_is_reached_again_on_a_new_connection(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with proxied(tmp_path) as (node, proxy):
            await metadata(node)
            await proxy.cut()  # the idle connection is gone before the next request is sent
            assert (await metadata(node)).brokers  # retried once on a new connection, answered
            assert proxy.accepted == 2
            await metadata(node)
            assert proxy.accepted == 2


async def test_concurrent_requests_each_get_a_connection_and_few_stay_idle(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with proxied(tmp_path) as (node, proxy):
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(metadata, node)
            assert proxy.accepted == 3  # one request at a time per connection
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(metadata, node)
            assert proxy.accepted == 3 + 3 - MAX_IDLE_PER_PEER  # the idle ones reused, one more opened


async def test_a_peer_at_a_new_address_has_its_old_idle_connections_closed(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with proxied(tmp_path) as (node, old), trio.open_nursery() as nursery:
            await metadata(node)
            new = CountingProxy(old.upstream)  # the same peer, registered at another address
            listeners = await nursery.start(functools.partial(trio.serve_tcp, new.handle, 0, host="127.0.0.1"))
            await metadata(Node(node.node_id, "127.0.0.1", listeners[0].socket.getsockname()[1]))
            assert (old.accepted, new.accepted, new.open) == (1, 1, 1)
            with trio.fail_after(5):
                while old.open:  # closed when the new address's connection was kept
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()


async def test_a_cancelled_request_closes_its_connection(tmp_path: Path) -> None:
    """A peer that never answers: the abandoned connection is closed, not given back."""
    accepted: list[trio.SocketStream] = []
    closed = trio.Event()

    async def silent(stream: trio.SocketStream) -> None:
        accepted.append(stream)
        while await stream.receive_some(65536):
            pass
        closed.set()

    peers.configure(SELF_ID, load_config(None).inter_broker())  # plaintext, with a pool
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                listeners = await nursery.start(functools.partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
                node = Node(3, "127.0.0.1", listeners[0].socket.getsockname()[1])
                with trio.move_on_after(0.2):
                    await metadata(node)
                await closed.wait()  # the caller closed it
                with trio.move_on_after(0.2):
                    await metadata(node)
                assert len(accepted) == 2
                nursery.cancel_scope.cancel()
    finally:
        await peers.close(SELF_ID)


async def test_a_connection_whose_sasl_session_is_ending_is_not_reused(tmp_path: Path) -> None:
    """The peer would close it at the next request (KIP-368): a new connection, a new session."""
    lifetime_ms = int(SESSION_MARGIN_S * 1000) - 1000
    with trio.fail_after(30):
        async with proxied(tmp_path, f"connections.max.reauth.ms={lifetime_ms}\n") as (node, proxy):
            await metadata(node)
            await metadata(node)
            assert proxy.accepted == 2
            with trio.fail_after(5):
                while proxy.open > 1:  # the passed-over one was closed
                    await trio.sleep(0.01)
