"""``kproto share-groups list|describe|delete|reset-offsets`` (as kafka-share-groups.sh) against a
real broker, with confluent-kafka's ``ShareConsumer`` as the member whose records, start offsets
and lag are shown, and as the witness of what a reset changes (what it is delivered next)."""

from __future__ import annotations

from typing import Any

from .broker_process import BrokerProcess
from .test_cli import failed, kproto, ok
from .test_share_group_admin import broker, consume_all_and_leave, wait_empty
from .test_share_groups import consumer, fresh, poll_until, produce

__all__ = ["broker"]  # the module-scoped broker fixture of the admin tests


def offsets(bootstrap: str, group: str) -> list[tuple[str, int, Any, Any]]:
    (described,) = ok(bootstrap, "share-groups", "describe", group)["groups"]
    return [(o["topic"], o["partition"], o["start_offset"], o["lag"]) for o in described["offsets"]]


def test_list_describe_and_reset_offsets(broker: BrokerProcess) -> None:
    topic, group = fresh("cli-share"), fresh("g")
    records = [b"c%d" % i for i in range(6)]
    produce(broker.bootstrap, topic, records)
    consume_all_and_leave(broker, group, topic, len(records))
    wait_empty(broker, group)
    listed = ok(broker.bootstrap, "share-groups", "list")["groups"]
    assert {"group_id": group, "state": "Empty", "coordinator": 0} in listed, listed
    assert offsets(broker.bootstrap, group) == [(topic, 0, 6, 0)]

    planned = ok(broker.bootstrap, "share-groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert planned["executed"] is False
    assert planned["offsets"] == [{"topic": topic, "partition": 0, "previous_start_offset": 6, "new_start_offset": 0}]
    assert offsets(broker.bootstrap, group) == [(topic, 0, 6, 0)]  # a dry run changes nothing

    done = ok(broker.bootstrap, "share-groups", "reset-offsets", group, "--all-topics", "--to-offset", "4", "--execute")
    assert done["executed"] is True and done["offsets"][0]["new_start_offset"] == 4
    assert offsets(broker.bootstrap, group) == [(topic, 0, 4, 2)]
    assert sorted(consume_all_and_leave(broker, group, topic, 2)) == sorted(records[4:])


def test_reset_offsets_of_a_group_with_members_is_refused(broker: BrokerProcess) -> None:
    topic, group = fresh("cli-share-busy"), fresh("g")
    produce(broker.bootstrap, topic, [b"x"])
    share = consumer(broker.bootstrap, group, topic)
    try:
        poll_until(share, lambda got: len(got) >= 1)
        result = kproto(broker.bootstrap, "share-groups", "reset-offsets", group, "--topic", topic, "--to-earliest",
                        "--execute")
        failed(result, 1, "error: NON_EMPTY_GROUP:")
        (described,) = ok(broker.bootstrap, "share-groups", "describe", group)["groups"]
        assert described["state"] == "Stable" and len(described["members"]) == 1, described
        assert described["members"][0]["assignment"] == [{"topic": topic, "partition": 0}]
    finally:
        share.close()


def test_delete(broker: BrokerProcess) -> None:
    topic, group = fresh("cli-share-del"), fresh("g")
    produce(broker.bootstrap, topic, [b"x"])
    consume_all_and_leave(broker, group, topic, 1)
    wait_empty(broker, group)
    assert ok(broker.bootstrap, "share-groups", "delete", group) == {"deleted": [group]}
    assert group not in {g["group_id"] for g in ok(broker.bootstrap, "share-groups", "list")["groups"]}
    failed(kproto(broker.bootstrap, "share-groups", "delete", group), 1, "error: GROUP_ID_NOT_FOUND:")
    failed(kproto(broker.bootstrap, "share-groups", "describe", group), 1, "error: GROUP_ID_NOT_FOUND:")


def test_delete_offsets_forgets_a_topic_which_is_then_delivered_again(broker: BrokerProcess) -> None:
    """As kafka-share-groups.sh --delete-offsets: the topic's state is gone, and the next member
    starts it again from share.auto.offset.reset (earliest on this broker), so every record comes
    back; refused while the group has members and for a topic the group never read."""
    topic, other, group = fresh("cli-share-deloff"), fresh("cli-share-unread"), fresh("g")
    records = [b"d%d" % i for i in range(3)]
    produce(broker.bootstrap, topic, records)
    produce(broker.bootstrap, other, [b"o"])
    consume_all_and_leave(broker, group, topic, len(records))
    wait_empty(broker, group)
    assert offsets(broker.bootstrap, group) == [(topic, 0, 3, 0)]

    failed(kproto(broker.bootstrap, "share-groups", "delete-offsets", "--group", group, "--topic", other), 1,
           "error: UNKNOWN_TOPIC_OR_PARTITION:")
    assert ok(broker.bootstrap, "share-groups", "delete-offsets", "--group", group, "--topic", topic) == {
        "group": group, "deleted": [topic]}
    assert offsets(broker.bootstrap, group) == []
    assert sorted(consume_all_and_leave(broker, group, topic, len(records))) == records

    share = consumer(broker.bootstrap, group, topic)
    try:
        produce(broker.bootstrap, topic, [b"late"])
        poll_until(share, lambda got: len(got) >= 1)
        failed(kproto(broker.bootstrap, "share-groups", "delete-offsets", "--group", group, "--topic", topic), 1,
               "error: NON_EMPTY_GROUP:")
    finally:
        share.close()
    failed(kproto(broker.bootstrap, "share-groups", "delete-offsets", "--group", fresh("nobody"), "--topic", topic),
           1, "error: GROUP_ID_NOT_FOUND:")
