"""Test-only zombie children (``python zombie_entries.py MODE CONFIG``) that speak the zombie
protocol of rivven_kproto.verify.zombie and then die the way a crashing client library does."""

from __future__ import annotations

import json
import os
import sys


def main(mode: str) -> None:
    if mode == "abort-at-start":
        os.abort()
    sys.stdout.write(json.dumps({"event": "ready", "result": "ready", "acks": {"v/0": ["t", 0, 7]}}) + "\n")
    sys.stdout.flush()
    attempt = json.loads(sys.stdin.readline())["attempt"]
    if mode == "fenced-then-abort":  # the outcome said, then the client's destructor corrupts the heap
        sys.stdout.write(json.dumps({"event": "outcome", "result": "failed", "error": "PRODUCER_FENCED",
                                     "fatal": True, "acks": {}}) + "\n")
        sys.stdout.flush()
    sys.stderr.write(f"double free or corruption (attempt {attempt[2]})\n")
    sys.stderr.flush()
    os.abort()


if __name__ == "__main__":
    main(sys.argv[1])
