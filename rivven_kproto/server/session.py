"""Listeners as the server runs them, and what one connection knows about its client.

A connection on a SASL listener may send only ApiVersions, SaslHandshake and SaslAuthenticate
until it has authenticated (Kafka closes it otherwise); its principal is then ``User:<name>``. On
an SSL listener with client certificates the principal is the certificate's subject DN.
"""

from __future__ import annotations

import dataclasses
import ssl
from dataclasses import dataclass

import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.security.listeners import Listener
from rivven_kproto.broker.security.sasl import SaslExchange

from .tls import peer_principal, server_context

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
ANONYMOUS = "User:ANONYMOUS"


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

    @classmethod
    def plaintext(cls, runtime: ListenerRuntime) -> Session:
        return cls(runtime.listener.name, runtime.advertised, None)

    @classmethod
    def open(cls, runtime: ListenerRuntime, config: BrokerConfig, broker: Broker, stream: trio.abc.Stream) -> Session:
        sasl = None
        if runtime.listener.uses_sasl:
            sasl = SaslExchange(config.security.sasl_mechanisms, dict(config.security.plain_users), broker.scram.get)
        tls_principal = None
        if isinstance(stream, trio.SSLStream):
            tls_principal = peer_principal(stream._ssl_object)  # noqa: SLF001 - trio exposes no getpeercert
        return cls(runtime.listener.name, runtime.advertised, sasl, tls_principal)

    @property
    def principal(self) -> str:
        if self.sasl is not None and self.sasl.principal is not None:
            return self.sasl.principal
        return self.tls_principal or ANONYMOUS

    @property
    def user(self) -> str | None:
        return None if self.sasl is None else self.sasl.user

    @property
    def mechanism(self) -> str | None:
        return None if self.sasl is None else self.sasl.mechanism

    def may_call(self, api_key: int) -> bool:
        return self.sasl is None or self.sasl.authenticated or api_key in BEFORE_AUTHENTICATION


async def open_listeners(config: BrokerConfig) -> tuple[BrokerConfig, list[tuple[list[trio.SocketListener], ListenerRuntime]]]:
    """Bind every listener (the first is the primary one); the config gets the primary's real port."""
    wanted = [config.primary_listener, *config.extra_listeners]
    context = server_context(config.security) if any(listener.uses_tls for listener in wanted) else None
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
            bound.append((sockets, ListenerRuntime(real, context if real.uses_tls else None, advertised)))
    except BaseException:
        for sockets, _ in bound:
            for socket_listener in sockets:
                await socket_listener.aclose()
        raise
    return config.with_port(bound[0][1].listener.port), bound
