"""Kafka's ``ssl.principal.mapping.rules``: the name of an mTLS client from its certificate's
subject DN (RFC 2253, as ``X500Principal.getName()`` gives it).

A comma-separated list of ``DEFAULT`` (the DN itself) and ``RULE:pattern/replacement/[LU]`` (when
the pattern matches the whole DN, the DN with the pattern replaced, then lower- or upper-cased);
the first rule that applies wins, and a DN no rule applies to is refused, as Kafka does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_RULES = "DEFAULT"
# One rule: DEFAULT, or RULE:pattern/replacement/ with an optional L or U (a "/" inside the pattern
# or the replacement is escaped as "\/").
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


class NoMatchingRule(ValueError):
    """No rule applies to a DN: the connection is refused."""


@dataclass(frozen=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self.replacement, dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def parse_rules(text: str) -> tuple[MappingRule, ...]:
    """The rules of one ``ssl.principal.mapping.rules`` value; ValueError names a malformed rule."""
    rules: list[MappingRule] = []
    position, text = 0, text.strip()
    while position < len(text):
        match = _RULE.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"Invalid rule: {text[position:]}")
        default, pattern, replacement, case = match.groups()
        if default:
            rules.append(MappingRule(None))
        else:
            try:
                compiled = re.compile(_unescape(pattern))
            except re.error as exc:
                raise ValueError(f"Invalid rule: {match.group(0).strip()} ({exc})") from None
            rules.append(MappingRule(compiled, _java_replacement(_unescape(replacement)), case))
        position = match.end()
    return tuple(rules) or (MappingRule(None),)


def map_principal(rules: tuple[MappingRule, ...], dn: str) -> str:
    """The short name of a DN under the rules; NoMatchingRule when none applies."""
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    raise NoMatchingRule(f"No rules apply to {dn}")


def _unescape(part: str) -> str:
    return part.replace("\\/", "/")


def _java_replacement(replacement: str) -> str:
    """Java's ``$1`` group references in Python's syntax; other backslashes kept literal."""
    out: list[str] = []
    index = 0
    while index < len(replacement):
        char = replacement[index]
        if char == "$" and index + 1 < len(replacement) and replacement[index + 1].isdigit():
            end = index + 1
            while end < len(replacement) and replacement[end].isdigit():
                end += 1
            out.append(f"\\g<{replacement[index + 1:end]}>")
            index = end
            continue
        out.append("\\\\" if char == "\\" else char)
        index += 1
    return "".join(out)
