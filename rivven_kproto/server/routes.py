"""Where a request is answered: each handler module declares its route once (``ROUTE``).

The server's dispatch reads the route and nothing else about the API (issue #38):

- :class:`Local`: answered by the broker that received it.
- :class:`Leader`: partitions another broker of the cluster leads are forwarded to it and its
  answers merged in (``leader_forwarding``); ``shape`` says where the message keeps them.
- :class:`Controller`: a change of the catalog, configs, ACLs or credentials: a broker that is not
  the controller forwards it in an Envelope (KIP-590), so there is one writer.
- :class:`Coordinator`: about a key (group) whose coordinator shard must be held here; ``key``
  gives it for the versions whose answer has no error field to say NOT_COORDINATOR (None: the
  handler answers NOT_COORDINATOR itself), and the connection is closed instead.
- :class:`Unwrap`: an Envelope from another broker: the inner request is dispatched as its
  client's (never advertised, never forwarded again).

This module knows no handler, so handlers can import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rivven_kproto.broker.security.authorization_rules import Check
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.schema import Response

__all__ = ["CONTROLLER", "LOCAL", "UNWRAP", "Controller", "Coordinator", "Leader", "Local", "Route", "Shape", "Unwrap"]


@dataclass(frozen=True)
class Shape:
    """Where a message keeps its topics and partitions, and what forwarding one to leaders needs."""

    topics: str  # the request's topic list
    topic_name: str
    partitions: str  # a request topic's partition list
    index: str
    response_cls: type[Response]
    response_topics: str
    response_topic_name: str
    response_partitions: str
    response_index: str
    response_topic: Callable[[str, list[Any]], Any]  # a response topic entry (name, partitions)
    error: Callable[[int, Errors], Any]  # a partition's error answer
    check: Check  # the client's right on the topic that forwarding needs (the authorization table's)


@dataclass(frozen=True)
class Local:
    """Answered here."""


@dataclass(frozen=True)
class Leader:
    """Answered by each partition's leader (forwarded by a broker with a stale client)."""

    shape: Shape


@dataclass(frozen=True)
class Controller:
    """Answered by the cluster's controller (forwarded in an Envelope by the others)."""


@dataclass(frozen=True)
class Coordinator:
    """Answered by the coordinator of ``key(request, version)`` (None: the handler checks itself)."""

    key: Callable[[Any, int], str | None]


@dataclass(frozen=True)
class Unwrap:
    """An Envelope: its inner request is dispatched as the forwarded client's."""


Route = Local | Leader | Controller | Coordinator | Unwrap
LOCAL = Local()
CONTROLLER = Controller()
UNWRAP = Unwrap()
