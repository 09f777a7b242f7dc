"""A handler called as a client calls it: the request and the response both through the wire."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rivven_kproto.server.context import RequestContext


def wire(request: Any, version: int) -> Any:
    """The request as the handler would get it from a client speaking ``version``."""
    return type(request).decode(request.encode(version), version)


def answer(module: Any, ctx: RequestContext, request: Any, version: int,
           settle: Callable[[Any], Any] | None = None) -> Any:
    """``module.handle`` of ``request`` encoded and decoded at ``version``; its response likewise
    (``settle``: turns a parked answer into the response first)."""
    response = module.handle(ctx, wire(request, version), version)
    if settle is not None:
        response = settle(response)
    return type(response).decode(response.encode(version), version)
