"""Kafka-tool spellings of a command's topic: ``--topic``/``-t`` beside the TOPIC argument.

People type ``kafka-console-consumer.sh --topic demo`` and ``kcat -t demo``; the commands take
the topic as an argument, so each also accepts it as an option (one of the two, not both).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

TOPIC_HELP = "The topic, as kafka-console-*.sh's --topic and kcat's -t (instead of the argument)."


def topic_argument(param: str = "topic") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """One topic, as the argument TOPIC or ``--topic``/``-t``, passed to the command as ``param``."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def merged(*args: Any, **kwargs: Any) -> Any:
            given, option = kwargs.pop(param), kwargs.pop("topic_option")
            if given is not None and option is not None:
                raise click.UsageError("give the topic either as the TOPIC argument or as --topic, not both")
            if given is None and option is None:
                raise click.UsageError("missing the topic: give it as the TOPIC argument or as --topic")
            return command(*args, **{param: given if given is not None else option}, **kwargs)

        merged = click.option("--topic", "-t", "topic_option", metavar="TOPIC", help=TOPIC_HELP)(merged)
        return click.argument(param, metavar="TOPIC", required=False)(merged)

    return decorate


def topics_argument(param: str = "names") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Topics, as arguments TOPIC... and/or repeated ``--topic``/``-t``, passed as one tuple."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def merged(*args: Any, **kwargs: Any) -> Any:
            names = (*kwargs.pop(param), *kwargs.pop("topic_options"))
            if not names:
                raise click.UsageError("missing the topics: give them as TOPIC... arguments or as --topic")
            return command(*args, **{param: names}, **kwargs)

        merged = click.option("--topic", "-t", "topic_options", multiple=True, metavar="TOPIC",
                              help=TOPIC_HELP + " Repeatable.")(merged)
        return click.argument(param, nargs=-1, metavar="TOPIC...")(merged)

    return decorate
