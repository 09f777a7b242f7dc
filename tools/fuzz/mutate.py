"""A small byte-level mutator (AFL-style havoc) for the random engine."""

from __future__ import annotations

import random
import struct

INTERESTING_32 = (0, 1, -1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 0x10000)


def mutate(data: bytes, rng: random.Random, other: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(8)
        if not buf:
            buf += rng.randbytes(rng.randint(1, 8))
        elif choice == 0:
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif choice == 1:
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif choice == 2:
            position = rng.randrange(len(buf) + 1)
            buf[position:position] = rng.randbytes(rng.randint(1, 16))
        elif choice == 3:
            start = rng.randrange(len(buf))
            del buf[start : start + rng.randint(1, 16)]
        elif choice == 4 and len(buf) >= 4:
            position = rng.randrange(len(buf) - 3)
            struct.pack_into(">i", buf, position, rng.choice(INTERESTING_32))
        elif choice == 5:
            buf[rng.randrange(len(buf))] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF))
        elif choice == 6:
            del buf[rng.randrange(len(buf)) :]
        else:
            cut = rng.randrange(len(other) + 1) if other else 0
            buf[rng.randrange(len(buf)) :] = other[cut:]
    return bytes(buf)
