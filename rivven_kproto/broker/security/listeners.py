"""Kafka's listener configuration: ``listeners``, ``advertised.listeners``, ``listener.security.protocol.map``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rivven_kproto.auth.protocols import SECURITY_PROTOCOLS as PROTOCOLS

# Kafka's default listener.security.protocol.map, as its DescribeConfigs spells it.
DEFAULT_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"


class ListenerError(ValueError):
    """A listener setting that cannot be used."""


@dataclass(frozen=True)
class Listener:
    name: str  # Kafka's listener name, e.g. PLAINTEXT, SASL_SSL, INTERNAL
    protocol: str  # one of PROTOCOLS
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def split_listeners(text: str) -> list[tuple[str, str, int]]:
    """``NAME://HOST:PORT,...`` -> [(NAME, HOST, PORT)]; an empty host means every address."""
    result = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, address = item.partition("://")
        if not sep:
            raise ListenerError(f"listener {item!r} is not NAME://HOST:PORT")
        host, colon, port = address.rpartition(":")
        if not colon or not port.isdigit() or int(port) > 65535:
            raise ListenerError(f"listener {item!r} has no valid port")
        result.append((name.strip().upper(), host.strip("[]") or "0.0.0.0", int(port)))
    names = [name for name, _, _ in result]
    if len(set(names)) != len(names):
        raise ListenerError(f"listener names must be unique: {text!r}")
    return result


def protocol_map(text: str | None) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...``; the standard names map to themselves."""
    mapping = {name: name for name in PROTOCOLS}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or protocol not in PROTOCOLS:
            raise ListenerError(f"listener.security.protocol.map entry {item!r} is not NAME:{'|'.join(PROTOCOLS)}")
        mapping[name.strip().upper()] = protocol
    return mapping


def build_listeners(props: Mapping[str, str]) -> tuple[Listener, ...]:
    """The listeners of ``listeners``/``advertised.listeners``/``listener.security.protocol.map``."""
    protocols = protocol_map(props.get("listener.security.protocol.map"))
    advertised = {name: (host, port) for name, host, port in split_listeners(props.get("advertised.listeners", ""))}
    listeners = []
    for name, host, port in split_listeners(props["listeners"]):
        if name not in protocols:
            raise ListenerError(f"listener {name} has no security protocol in listener.security.protocol.map")
        ad_host, ad_port = advertised.get(name, (None, None))
        listeners.append(Listener(name, protocols[name], host, port, ad_host, ad_port))
    if not listeners:
        raise ListenerError("listeners is empty")
    return tuple(listeners)


def listener_uri(name: str, host: str, port: int) -> str:
    """``NAME://HOST:PORT``, an IPv6 host in brackets (Kafka's spelling of a listener)."""
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def describe_listeners(listeners: tuple[Listener, ...], default_advertised_host: str) -> dict[str, str]:
    """``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map`` as a broker
    with these listeners describes them: every listener; each advertised as the broker does (its
    own advertised address, else the broker's advertised host with its port); the protocol map
    Kafka's default when every listener is named after its protocol, else the listeners' own."""
    advertised = [
        listener_uri(lis.name, lis.advertised_host or default_advertised_host, lis.advertised_port or lis.port)
        for lis in listeners
    ]
    standard = all(lis.name == lis.protocol for lis in listeners)
    return {
        "listeners": ",".join(listener_uri(lis.name, lis.host, lis.port) for lis in listeners),
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": DEFAULT_PROTOCOL_MAP if standard else ",".join(
            f"{lis.name}:{lis.protocol}" for lis in listeners),
    }
