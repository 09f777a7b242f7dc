"""The routes the handlers declare (server/routes.py): what the shell used to decide per API key."""

from __future__ import annotations

from rivven_kproto.codec.messages.offset_fetch import OffsetFetchRequest
from rivven_kproto.server.handlers import HANDLERS, routed_to
from rivven_kproto.server.routes import Controller, Coordinator, Leader, Local


def test_partitions_go_to_their_leaders_for_produce_fetch_and_list_offsets() -> None:
    assert routed_to(Leader) == frozenset({0, 1, 2})


def test_offset_fetch_without_an_error_field_is_closed_at_a_broker_not_coordinating_its_group() -> None:
    route = HANDLERS[OffsetFetchRequest.API_KEY].route
    assert isinstance(route, Coordinator)
    old = OffsetFetchRequest(group_id="g", topics=[])
    assert [route.key(old, version) for version in (0, 1, 2, 7)] == ["g", "g", None, None]


def test_every_other_api_is_answered_here() -> None:
    others = set(HANDLERS) - routed_to(Leader) - routed_to(Controller) - routed_to(Coordinator)
    assert others == set(routed_to(Local))
