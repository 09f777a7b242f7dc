"""Listeners as the server runs them, and what one connection knows about its client.

A connection on a SASL listener may send only ApiVersions, SaslHandshake and SaslAuthenticate
until it has authenticated (Kafka closes it otherwise); its principal is then ``User:<name>``. On
an SSL listener with client certificates the principal is the certificate's subject DN, mapped by
``ssl.principal.mapping.rules``. Each listener has its own security settings (``listener.name.``).
"""

from __future__ import annotations

import dataclasses
import ssl
import struct
from dataclasses import dataclass, field

import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.security.listeners import Listener
from rivven_kproto.broker.security.principal_mapping import map_principal
from rivven_kproto.broker.security.sasl import SaslExchange
from rivven_kproto.codec.errors import Errors

from .tls import peer_dn, server_context

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
ANONYMOUS = "User:ANONYMOUS"
SASL_MAX_RECEIVE_BYTES = 524288  # Kafka's sasl.server.max.receive.size: the largest frame before authentication


@dataclass(frozen=True)
class ListenerRuntime:
    listener: Listener  # with the port actually bound
    ssl_context: ssl.SSLContext | None
    advertised: tuple[str, int]


@dataclass
class Session:
    listener_name: str
    advertised: tuple[str, int]
    sasl: SaslExchange | None  # None: the listener does not use SASL
    tls_principal: str | None = None
    failed_authentication: bool = False
    reauthentication_ms: int = 0  # connections.max.reauth.ms of the listener (0: sessions never expire)
    expires_at_ms: int | None = None  # when the authenticated session ends unless re-authenticated
    raw_tokens: bool = False  # after SaslHandshake v0: the next frames are bare SASL tokens (no header)
    forwarded_principal: str | None = None  # a request a broker forwarded in an Envelope: its client's
    share_sessions: set[tuple[str, str]] = field(default_factory=set)  # (group, member) opened here (share_disconnect)

    def forwarded_for(self, principal: str) -> Session:
        """This (broker's) session acting for the client whose request it forwarded."""
        return dataclasses.replace(self, forwarded_principal=principal)

    @classmethod
    def plaintext(cls, runtime: ListenerRuntime) -> Session:
        return cls(runtime.listener.name, runtime.advertised, None)

    @classmethod
    def open(cls, runtime: ListenerRuntime, config: BrokerConfig, broker: Broker, stream: trio.abc.Stream) -> Session:
        """The session of a new connection; NoMatchingRule when its certificate's DN maps to no name."""
        security = config.security_for(runtime.listener.name)
        sasl = None
        if runtime.listener.uses_sasl:
            sasl = SaslExchange(security.sasl_mechanisms, dict(security.plain_users), broker.scram.get)
        tls_principal = None
        if isinstance(stream, trio.SSLStream):
            dn = peer_dn(stream._ssl_object)  # noqa: SLF001 - trio exposes no getpeercert
            if dn is not None:
                tls_principal = "User:" + map_principal(security.principal_mapping, dn)
        return cls(runtime.listener.name, runtime.advertised, sasl, tls_principal,
                   reauthentication_ms=security.reauthentication_ms if sasl is not None else 0)

    @property
    def principal(self) -> str:
        if self.forwarded_principal is not None:
            return self.forwarded_principal
        if self.sasl is not None and self.sasl.principal is not None:
            return self.sasl.principal
        return self.tls_principal or ANONYMOUS

    @property
    def user(self) -> str | None:
        return None if self.sasl is None else self.sasl.user

    @property
    def mechanism(self) -> str | None:
        """The mechanism in use, only ever one of the listener's enabled ones (log text and a
        metrics label: never a name as a client sent it)."""
        if self.sasl is None or self.sasl.mechanism not in self.sasl.enabled:
            return None
        return self.sasl.mechanism

    def may_call(self, api_key: int, now_ms: int) -> bool:
        """Before authentication only the SASL APIs; after the session expired (KIP-368) only a
        SaslHandshake that starts the re-authentication (Kafka closes the connection otherwise)."""
        if self.sasl is None:
            return True
        if not self.sasl.authenticated:
            return api_key in BEFORE_AUTHENTICATION
        return self.expires_at_ms is None or now_ms < self.expires_at_ms or api_key == SASL_HANDSHAKE

    def authenticated(self, now_ms: int) -> int:
        """Start the session of a completed (re-)authentication; its lifetime in ms (0: unbounded)."""
        lifetime = self.reauthentication_ms
        self.expires_at_ms = now_ms + lifetime if lifetime > 0 else None
        return lifetime


def raw_sasl_token(session: Session, token: bytes, now_ms: int) -> bytes | None:
    """One bare token after SaslHandshake v0: the reply, size-prefixed as Kafka sends it, or None
    after a failure (the connection then closes without an answer, as in Kafka's v0 flow)."""
    assert session.sasl is not None
    error, _message, reply = session.sasl.authenticate(token)
    if error != Errors.NONE:
        session.failed_authentication = True
        return None
    if session.sasl.authenticated:
        session.raw_tokens = False
        session.authenticated(now_ms)
    return struct.pack(">i", len(reply)) + reply


async def open_listeners(config: BrokerConfig) -> tuple[BrokerConfig, list[tuple[list[trio.SocketListener], ListenerRuntime]]]:
    """Bind every listener (the first is the primary one); the config gets the primary's real port."""
    wanted = [config.primary_listener, *config.extra_listeners]
    bound: list[tuple[list[trio.SocketListener], ListenerRuntime]] = []
    try:
        for listener in wanted:
            sockets = await trio.open_tcp_listeners(listener.port, host=listener.host)
            port = sockets[0].socket.getsockname()[1]
            real = dataclasses.replace(listener, port=port)
            advertised = (
                real.advertised_host or config.advertised_host,
                real.advertised_port or port,
            )
            context = server_context(config.security_for(real.name)) if real.uses_tls else None
            bound.append((sockets, ListenerRuntime(real, context, advertised)))
    except BaseException:
        for sockets, _ in bound:
            for socket_listener in sockets:
                await socket_listener.aclose()
        raise
    return config.with_port(bound[0][1].listener.port), bound
