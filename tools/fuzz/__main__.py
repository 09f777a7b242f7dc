"""``python -m tools.fuzz``: run fuzz targets with the random (havoc) engine or atheris.

    python -m tools.fuzz --target all --inputs 1000000            # random engine, each target
    python -m tools.fuzz --engine atheris --target batch --inputs 1000000

Exit status 1 when any input broke a property; each such input is written to ``--artifacts``.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from pathlib import Path

log = logging.getLogger("fuzz")


def run_random(target_name: str, inputs: int, seed: int, artifacts: Path) -> int:
    from .corpus import SEEDS
    from .mutate import mutate
    from .targets import TARGETS

    target = TARGETS[target_name]
    corpus = SEEDS[target_name]()
    rng = random.Random(seed)
    findings = accepted = 0
    started = time.perf_counter()
    for index in range(inputs):
        data = corpus[index] if index < len(corpus) else mutate(rng.choice(corpus), rng, rng.choice(corpus))
        try:
            accepted += target(data)
        except Exception as exc:  # noqa: BLE001 - every escape is a finding, reported with its input
            findings += 1
            artifacts.mkdir(parents=True, exist_ok=True)
            path = artifacts / f"{target_name}-{seed}-{index}.bin"
            path.write_bytes(data)
            log.error("%s input %d (%s): %r", target_name, index, path, exc)
    elapsed = time.perf_counter() - started
    log.info(
        "%s: %d inputs in %.1f s (%.0f/s), %d accepted, %d findings",
        target_name, inputs, elapsed, inputs / elapsed, accepted, findings,
    )
    return findings


def run_atheris(target_name: str, inputs: int, artifacts: Path) -> int:
    import atheris  # the `fuzz` extra

    with atheris.instrument_imports(include=["rivven_kproto"]):
        from .corpus import SEEDS
        from .targets import TARGETS
    corpus_dir = artifacts / f"corpus-{target_name}"
    corpus_dir.mkdir(parents=True, exist_ok=True)
    for index, seed in enumerate(SEEDS[target_name]()):
        (corpus_dir / f"seed-{index}").write_bytes(seed)
    args = [sys.argv[0], f"-runs={inputs}", f"-artifact_prefix={artifacts}/", "-print_final_stats=1", str(corpus_dir)]
    atheris.Setup(args, TARGETS[target_name])
    atheris.Fuzz()  # exits the process: non-zero on a finding
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=["all", "frame", "request", "batch"], default="all")
    parser.add_argument("--inputs", type=int, default=100_000, help="inputs per target")
    parser.add_argument("--engine", choices=["random", "atheris"], default="random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--artifacts", type=Path, default=Path("fuzz-artifacts"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    names = ["frame", "request", "batch"] if args.target == "all" else [args.target]
    if args.engine == "atheris":
        if len(names) != 1:
            parser.error("atheris runs one target per process: pass --target")
        return run_atheris(names[0], args.inputs, args.artifacts)
    findings = sum(run_random(name, args.inputs, args.seed, args.artifacts) for name in names)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
