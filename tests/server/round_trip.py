"""A handler called as a client calls it: the request and the response both through the wire."""

from __future__ import annotations

from typing import Any

from rivven_kproto.server.context import RequestContext


def answer(module: Any, ctx: RequestContext, request: Any, version: int) -> Any:
    """``module.handle`` of ``request`` encoded and decoded at ``version``; its response likewise."""
    response = module.handle(ctx, type(request).decode(request.encode(version), version), version)
    return type(response).decode(response.encode(version), version)
