"""DeleteTopics (key 20), versions 1-6: delete topics by name (v1-5) or by name or id (v6).

Follows Kafka 3.9's controller: with ``delete.topic.enable=false`` every topic answers
TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3). A v6 entry with both a name and an id, or
neither, is INVALID_REQUEST, as is a name or id given twice ("Duplicate topic name." / "Duplicate
topic id.", answered once) and a name that resolves to an id also given. Unknown names answer
UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID (Metadata reports every id as zero, so in
practice every id is unknown; the stored id is still honoured). Deletion is synchronous and
``timeout_ms`` is ignored. Error messages (v5+) are Kafka's.

Authorization is Kafka's controller's (the table's row): a name the client may not Describe is
TOPIC_AUTHORIZATION_FAILED whether it exists or not (existence is not revealed), then Delete on
the topic (or on the Cluster); an id whose topic the client may not Describe is refused with a
null name. Not implemented: quotas.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
)
from rivven_kproto.server.context import RequestContext

from ..routes import CONTROLLER

log = logging.getLogger(__name__)

API_KEY = DeleteTopicsRequest.API_KEY
ROUTE = CONTROLLER  # changes the catalog, configs, ACLs or credentials: one writer

ZERO_UUID = uuid.UUID(int=0)
_NAME_MAPS_TO_ID = "The provided topic name maps to an ID that was already supplied."
DESCRIBE, DELETE = rule(API_KEY).check("describe"), rule(API_KEY).check("topic")


def handle(ctx: RequestContext, request: DeleteTopicsRequest, version: int) -> DeleteTopicsResponse:
    entries = (
        request.topics if version >= 6 else [DeleteTopicState(name=name) for name in request.topic_names]
    )
    if not ctx.config.delete_topic_enable:
        error = Errors.TOPIC_DELETION_DISABLED if version >= 3 else Errors.INVALID_REQUEST
        return DeleteTopicsResponse(
            responses=[
                DeletableTopicResult(name=entry.name, topic_id=entry.topic_id, error_code=int(error))
                for entry in entries
            ]
        )
    resolver = _Resolver(ctx, entries)
    for entry in entries:
        resolver.resolve(entry)
    results = resolver.results
    for name, topic_id in list(resolver.to_delete.items()):
        refused = ctx.refusal(DELETE, name)
        if refused is not None:
            results.append(_result(name if ctx.permits(DESCRIBE, name) else None, topic_id, refused))
            continue
        ctx.broker.delete_topic(name)
        log.info("deleted topic %s for client %s", name, ctx.client_id)
        results.append(_result(name, topic_id, Errors.NONE))
    return DeleteTopicsResponse(responses=results)


class _Resolver:
    """Kafka's name/id bookkeeping: which entries are malformed, duplicated, unknown or deletable."""

    def __init__(self, ctx: RequestContext, entries: list[DeleteTopicState]) -> None:
        self.ctx = ctx
        self.topics = ctx.broker.topics
        self.by_id = {topic.meta.topic_id: name for name, topic in self.topics.items()}
        self.names = Counter(e.name for e in entries if e.name is not None and e.topic_id == ZERO_UUID)
        self.ids = Counter(e.topic_id for e in entries if e.name is None and e.topic_id != ZERO_UUID)
        self.results: list[DeletableTopicResult] = []
        self.to_delete: dict[str, uuid.UUID] = {}  # name -> the id to answer with
        self.answered: set[str | uuid.UUID] = set()

    def resolve(self, entry: DeleteTopicState) -> None:
        name, topic_id = entry.name, entry.topic_id
        if name is None and topic_id == ZERO_UUID:
            self._error(None, ZERO_UUID, Errors.INVALID_REQUEST, "Neither topic name nor id were specified.")
        elif name is not None and topic_id != ZERO_UUID:
            self._error(
                name, topic_id, Errors.INVALID_REQUEST, "You may not specify both topic name and topic id."
            )
        elif name is not None and name not in self.answered:
            self.answered.add(name)
            self._by_name(name)
        elif name is None and topic_id not in self.answered:
            self.answered.add(topic_id)
            self._by_id(topic_id)

    def _by_name(self, name: str) -> None:
        if self.names[name] > 1:
            self._error(name, ZERO_UUID, Errors.INVALID_REQUEST, "Duplicate topic name.")
        elif (refused := self.ctx.refusal(DESCRIBE, name)) is not None:
            self._error(name, ZERO_UUID, refused)
        elif name not in self.topics:
            self._error(name, ZERO_UUID, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        elif self.topics[name].meta.topic_id in self.ids:
            self._error(name, self.topics[name].meta.topic_id, Errors.INVALID_REQUEST, _NAME_MAPS_TO_ID)
        else:
            self.to_delete[name] = self.topics[name].meta.topic_id

    def _by_id(self, topic_id: uuid.UUID) -> None:
        name = self.by_id.get(topic_id)
        if self.ids[topic_id] > 1:
            self._error(None, topic_id, Errors.INVALID_REQUEST, "Duplicate topic id.")
        elif name is None:
            self._error(None, topic_id, Errors.UNKNOWN_TOPIC_ID)
        elif self.names[name] == 1:
            # Kafka leaves the id unanswered here; we answer it like the name.
            self._error(name, topic_id, Errors.INVALID_REQUEST, _NAME_MAPS_TO_ID)
        else:
            self.to_delete[name] = topic_id

    def _error(
        self, name: str | None, topic_id: uuid.UUID, error: Errors, message: str | None = None
    ) -> None:
        self.results.append(_result(name, topic_id, error, message))


def _result(
    name: str | None, topic_id: uuid.UUID, error: Errors, message: str | None = None
) -> DeletableTopicResult:
    """Kafka sends the code's default description when it has no better message; null on success."""
    if message is None and error != Errors.NONE:
        message = error.message
    return DeletableTopicResult(name=name, topic_id=topic_id, error_code=int(error), error_message=message)
