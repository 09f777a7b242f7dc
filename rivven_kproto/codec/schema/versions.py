"""Version ranges as Kafka's JSON schemas write them: ``"0+"``, ``"3-7"``, ``"5"``, ``"none"``."""

from __future__ import annotations

from dataclasses import dataclass

MAX_VERSION = 0x7FFF


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive range of versions; ``low > high`` is the empty range."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str | Versions) -> Versions:
        if isinstance(text, Versions):
            return text
        text = text.strip()
        if text == "none":
            return NONE
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            low, high = text.split("-", 1)
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    @property
    def empty(self) -> bool:
        return self.low > self.high

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(range(self.low, min(self.high, MAX_VERSION) + 1))

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high == MAX_VERSION:
            return f"{self.low}+"
        if self.low == self.high:
            return str(self.low)
        return f"{self.low}-{self.high}"


NONE = Versions(1, 0)
ALL = Versions(0, MAX_VERSION)
