"""Kafka's ``ssl.principal.mapping.rules`` (KIP-371): the name of an mTLS client from its
certificate's subject DN (RFC 2253, as ``X500Principal.getName()`` gives it: see ``x500.py``).

A comma-separated list of ``DEFAULT`` (the DN itself) and ``RULE:pattern/replacement/[LU]`` (when
the pattern matches the whole DN, every match of it replaced, then lower- or upper-cased); the
first rule that applies wins, and a DN no rule applies to is refused, as Kafka does. Kafka's
SslPrincipalMapper is the reference, quirks included: empty items are skipped (an empty value is
no rule at all), a pattern is a regular expression as written (``\\/`` is an escaped slash), the
replacement follows Java's ``Matcher.replaceAll`` (``$n`` groups, ``\\`` escapes), and a ``$n``
beyond the pattern's groups is literal text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_RULES = "DEFAULT"
_JAVA_SPACE = "[ \t\n\x0b\f\r]"  # Java's \s
# One item: DEFAULT, RULE:pattern/replacement/ with an optional L or U (a "/" inside the pattern or
# the replacement is escaped with a backslash), or anything else up to the next comma.
_ITEM = r"(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/(?P<replacement>(?:\\.|[^\\/])*)/(?P<case>[LU]?).*?|.*?"
_SPLITTER = re.compile(rf"{_JAVA_SPACE}*(?P<item>{_ITEM}){_JAVA_SPACE}*(?:,{_JAVA_SPACE}*|\Z)", re.DOTALL)
_PARSER = re.compile(_ITEM, re.DOTALL)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """No rule applies to a DN: the connection is refused."""


class BadReplacement(NoMatchingRule):
    """A rule's replacement Java could not apply to a DN (Kafka fails the connection too)."""


@dataclass(frozen=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        """The name of ``dn`` under this rule, None when the pattern does not match all of it."""
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        replacement = _literal_missing_groups(self.replacement, self.pattern.groups)
        try:
            result = self.pattern.sub(lambda match: _expand(replacement, match), dn)
        except (IndexError, ValueError) as exc:
            raise BadReplacement(f"Rule {self} cannot be applied to {dn}: {exc}") from None
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result

    def __str__(self) -> str:
        """Kafka's spelling of the rule (its log lines and error messages show rules so)."""
        if self.pattern is None:
            return "DEFAULT"
        case = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{case}"


def parse_rules(text: str) -> tuple[MappingRule, ...]:
    """The rules of one ``ssl.principal.mapping.rules`` value; ValueError names a malformed rule."""
    rules: list[MappingRule] = []
    for item in (match.group("item") for match in _SPLITTER.finditer(_java_trim(text))):
        parsed = _PARSER.match(item)
        if parsed is None or parsed.end() != len(item):
            raise ValueError(f"Invalid rule: {item}")
        if parsed.group("default"):
            rules.append(MappingRule(None))
        elif parsed.group("pattern") is not None:
            try:
                compiled = re.compile(parsed.group("pattern"))
            except re.error as exc:
                raise ValueError(f"Invalid rule: {item} ({exc})") from None
            rules.append(MappingRule(compiled, parsed.group("replacement"), parsed.group("case")))
        # else: an empty item, skipped
    return tuple(rules)


def describe_rules(rules: tuple[MappingRule, ...]) -> str:
    return "[" + ", ".join(str(rule) for rule in rules) + "]"


def map_principal(rules: tuple[MappingRule, ...], dn: str) -> str:
    """The short name of a DN under the rules; NoMatchingRule when none applies."""
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    raise NoMatchingRule(f"No rules apply to {dn}, rules {describe_rules(rules)}")


def _java_trim(text: str) -> str:
    """Java's ``String.trim``: every character up to U+0020 off both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _literal_missing_groups(replacement: str, groups: int) -> str:
    """Kafka's escaping of ``$n`` references beyond the pattern's groups (``$123`` falls back to
    ``$12``, then ``$1``; what is still too high gets a backslash, so Java copies it literally).
    Kafka inserts each backslash at the reference's offset in the original text, which shifts
    after the first insertion: reproduced, as it decides what a rule does."""
    if groups == 0:
        return replacement
    value = replacement
    for reference in _BACK_REFERENCE.finditer(replacement):
        digits = reference.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            at = reference.start(1) - 1
            value = value[:at] + "\\" + value[at:]
    return value


def _expand(replacement: str, match: re.Match[str]) -> str:
    """One match's replacement as Java's ``Matcher.appendReplacement`` builds it: ``\\x`` is x,
    ``$n`` the longest group number that exists, ``${name}`` a named group."""
    out: list[str] = []
    position, groups = 0, match.re.groups
    while position < len(replacement):
        char = replacement[position]
        if char == "\\":
            if position + 1 == len(replacement):
                raise ValueError("character to be escaped is missing")
            out.append(replacement[position + 1])
            position += 2
        elif char == "$":
            position += 1
            if position == len(replacement):
                raise ValueError("Illegal group reference: group index is missing")
            if replacement[position] == "{":
                end = replacement.find("}", position)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                group: int | str = replacement[position + 1:end]
                position = end + 1
            elif replacement[position].isdigit() and replacement[position].isascii():
                number = int(replacement[position])
                position += 1
                while position < len(replacement) and replacement[position] in "0123456789":
                    longer = number * 10 + int(replacement[position])
                    if longer > groups:
                        break
                    number, position = longer, position + 1
                if number > groups:
                    raise IndexError(f"No group {number}")
                group = number
            else:
                raise ValueError("Illegal group reference")
            out.append(match.group(group) or "")
        else:
            out.append(char)
            position += 1
    return "".join(out)
