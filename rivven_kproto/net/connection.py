"""One TCP connection to one broker, on trio, with ApiVersions negotiated at connect time (or
versions the caller fixes: a broker's requests to the others of its cluster, ``server/peers.py``).

Requests may be sent concurrently from several tasks (pipelining): writes are serialised by a
lock, and whichever waiter holds the receive lock reads frames for everyone, parking responses
that belong to other waiters until they collect them. Matching is by correlation id
(:mod:`.protocol`). A cancelled waiter abandons its id; a cancelled write may leave half a frame
on the wire, so the connection is then marked broken and refuses further requests.
"""

from __future__ import annotations

import errno
import os
from typing import TypeVar

import trio

from rivven_kproto.auth.sasl_client import ClientSecurity, SaslRefused, sasl_exchange
from rivven_kproto.codec.messages.api_versions import ApiVersionsResponse
from rivven_kproto.codec.messages.sasl_authenticate import SaslAuthenticateResponse
from rivven_kproto.codec.schema import Request, Response

from .errors import (
    BrokerUnreachableError,
    ClientError,
    ConnectionLostError,
    KafkaResponseError,
    ProtocolViolationError,
    check,
)
from .protocol import DEFAULT_MAX_RESPONSE, ClientProtocol
from .versions import NegotiatedVersions, api_versions_exchange

CLIENT_SOFTWARE_NAME = "rivven-kproto"
CLIENT_SOFTWARE_VERSION = "0.1.0"
RECEIVE_CHUNK = 256 * 1024

R = TypeVar("R", bound=Response)


def describe_os_error(exc: BaseException) -> str:
    """A short reason for a failed connect, digging into trio's happy-eyeballs exception group."""
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup) and cause.exceptions:
        exc = cause.exceptions[-1]
    if isinstance(exc, OSError):
        if exc.errno is not None and exc.errno in errno.errorcode and exc.errno > 0:
            return os.strerror(exc.errno)
        if exc.strerror:
            return exc.strerror
    return str(exc) or type(exc).__name__


class BrokerConnection:
    """A negotiated connection; use :meth:`connect` to open one."""

    def __init__(self, stream: trio.abc.Stream, address: str, *, node_id: int, client_id: str | None,
                 max_response_size: int = DEFAULT_MAX_RESPONSE) -> None:
        self.address = address
        self.node_id = node_id
        self._stream = stream
        self._protocol = ClientProtocol(client_id, max_response_size)
        self._send_lock = trio.Lock()
        self._receive_lock = trio.Lock()
        self._ready: dict[int, Response] = {}
        self._failure: ClientError | None = None
        self._versions: NegotiatedVersions | None = None
        self.bytes_received = 0  # whether a request's answer began to arrive (a pool's retry rule)
        # When the broker ends the SASL session (KIP-368 session lifetime; trio's clock), if it does.
        self.session_ends: float | None = None

    @classmethod
    async def connect(
        cls, host: str, port: int, *, node_id: int = -1, client_id: str | None = "kproto",
        security: ClientSecurity | None = None, versions: NegotiatedVersions | None = None,
        max_response_size: int = DEFAULT_MAX_RESPONSE,
    ) -> BrokerConnection:
        """Open a TCP (and TLS) connection, negotiate API versions on it (unless the caller gives
        ``versions``), authenticate with SASL."""
        address = f"{host}:{port}"
        stream: trio.abc.Stream
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            raise BrokerUnreachableError(f"cannot connect to {address}: {describe_os_error(exc)}") from None
        if security is not None and security.ssl_context is not None:
            stream = trio.SSLStream(stream, security.ssl_context, server_hostname=host)
            try:
                await stream.do_handshake()
            except trio.BrokenResourceError as exc:
                await trio.aclose_forcefully(stream)
                raise BrokerUnreachableError(f"TLS handshake with {address} failed: {exc.__cause__ or exc}") from None
        connection = cls(stream, address, node_id=node_id, client_id=client_id, max_response_size=max_response_size)
        try:
            if versions is None:
                await connection._negotiate()
            else:
                connection._versions = versions
            if security is not None and security.uses_sasl:
                await connection._authenticate(security)
        except BaseException:
            await connection.aclose()
            raise
        return connection

    @property
    def versions(self) -> NegotiatedVersions:
        if self._versions is None:
            raise RuntimeError("ApiVersions not negotiated yet")
        return self._versions

    @property
    def usable(self) -> bool:
        return self._failure is None

    async def _negotiate(self) -> None:
        """ApiVersions at our newest version, falling back to the broker's newest (KIP-511)."""
        exchange = api_versions_exchange(CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION)
        request, version = next(exchange)
        try:
            while True:
                request, version = exchange.send(await self.request(request, version, ApiVersionsResponse))
        except StopIteration as done:
            version, response = done.value
        check(response.error_code, context=f"ApiVersions v{version} with {self.address}")
        self._versions = NegotiatedVersions(
            response.api_keys, {f.name: f.max_version_level for f in response.finalized_features}
        )

    async def _authenticate(self, security: ClientSecurity) -> None:
        """Carry :func:`sasl_exchange`'s requests (PLAIN or SCRAM, KIP-152 framing)."""
        exchange = sasl_exchange(security)
        try:
            step = next(exchange)
            while True:
                response = await self.request(*step)
                if isinstance(response, SaslAuthenticateResponse) and response.session_lifetime_ms > 0:
                    self.session_ends = trio.current_time() + response.session_lifetime_ms / 1000
                step = exchange.send(response)
        except StopIteration:
            return
        except SaslRefused as exc:
            raise KafkaResponseError(exc.error_code, exc.message,
                                     context=f"SASL {security.mechanism} with {self.address}") from None

    async def send_only(self, request: Request, version: int) -> None:
        """Send a request that gets no response (Produce acks=0)."""
        if self._failure is not None:
            raise self._failure
        async with self._send_lock:
            _, data = self._protocol.send_request(request, version, expect_response=False)
            try:
                await self._stream.send_all(data)
            except BaseException as exc:
                raise self._fail(exc) from None

    async def request(self, request: Request, version: int | None, response_cls: type[R]) -> R:
        """Send ``request`` at ``version`` (None: the negotiated one) and wait for its response."""
        if self._failure is not None:
            raise self._failure
        if version is None:
            version = self.versions.version_for(type(request))
        async with self._send_lock:
            correlation_id, data = self._protocol.send_request(request, version)
            try:
                await self._stream.send_all(data)
            except BaseException as exc:
                self._protocol.abandon(correlation_id)
                raise self._fail(exc) from None
        try:
            response = await self._wait_for(correlation_id)
        except BaseException:
            self._protocol.abandon(correlation_id)
            self._ready.pop(correlation_id, None)
            raise
        if not isinstance(response, response_cls):
            raise ProtocolViolationError(f"expected {response_cls.__name__}, got {type(response).__name__}")
        return response

    def _fail(self, exc: BaseException) -> BaseException:
        """Mark the connection broken; returns the exception to raise in place of ``exc``."""
        if isinstance(exc, ClientError):
            failure = exc
        elif isinstance(exc, trio.BrokenResourceError | trio.ClosedResourceError | OSError):
            failure = ConnectionLostError(f"connection to {self.address} lost: {describe_os_error(exc)}")
        else:  # cancellation mid-frame: the stream is out of step, but let the cancel propagate
            self._failure = ConnectionLostError(f"connection to {self.address} abandoned mid-request")
            return exc
        self._failure = failure
        return failure

    async def _wait_for(self, correlation_id: int) -> Response:
        while True:
            ready = self._ready.pop(correlation_id, None)
            if ready is not None:
                return ready
            if self._failure is not None:
                raise self._failure
            async with self._receive_lock:
                if correlation_id in self._ready or self._failure is not None:
                    continue
                try:
                    return await self._read_until(correlation_id)
                except (ClientError, trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    raise self._fail(exc) from None

    async def _read_until(self, correlation_id: int) -> Response:
        while True:
            item = self._protocol.next_response()
            if item is None:
                data = await self._stream.receive_some(RECEIVE_CHUNK)
                if not data:
                    raise ConnectionLostError(f"{self.address} closed the connection")
                self.bytes_received += len(data)
                self._protocol.receive_data(data)
                continue
            received_id, response = item
            if received_id == correlation_id:
                return response
            self._ready[received_id] = response

    async def aclose(self) -> None:
        if self._failure is None:
            self._failure = ConnectionLostError(f"connection to {self.address} closed")
        await trio.aclose_forcefully(self._stream)
