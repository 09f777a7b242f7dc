"""Run the compatibility matrix (every client x every capability) and write it as a table.

    python -m compat_tests.report [--bootstrap HOST:PORT] [--out DIR]

Without ``--bootstrap`` a fresh rivven_kproto broker process is started on a temporary data
directory and stopped afterwards; with it, the matrix runs against that broker, whatever it is (the
scenarios use the Kafka protocol only; they create their own uniquely named topics and leave them).
Writes ``results.rst`` and ``results.json`` to ``--out`` (default ``compat_tests/matrix``).
``--write-baseline`` records the passing cells for the CI gate (``compat_tests/test_matrix.py``).
The documentation's "Compatibility matrix" page includes ``compat_tests/matrix/results.rst`` as it is,
so a run with the default ``--out`` updates the page.

``--cluster`` runs the "3 brokers on PostgreSQL" view instead (the rows and clients of
``compat_tests/test_matrix_cluster.py``, against three fresh brokers on a throwaway PostgreSQL
server) and writes ``results-cluster.rst``/``.json``, which the documentation's cluster matrix page
includes.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import tempfile
from pathlib import Path

from .matrix import baseline, render, secured
from .matrix.model import BY_ID
from .matrix.runner import Report, run_matrix

DEFAULT_OUT = Path(__file__).parent / "matrix"


def _fresh_broker_run(args: argparse.Namespace) -> Report:
    try:
        version: str | None = importlib.metadata.version("rivven_kproto")
    except importlib.metadata.PackageNotFoundError:
        version = None
    with tempfile.TemporaryDirectory(prefix="kproto-matrix-") as tmp:
        broker, profiles = secured.start(Path(tmp))  # with the security rows' listeners, users and ACLs
        try:
            return _run(
                args,
                broker.bootstrap,
                f"rivven_kproto{' ' + version if version else ''} (a fresh ``kproto serve``)",
                profiles,
            )
        finally:
            code = broker.stop() if broker.alive() else None
            if code not in (0, None):
                print(
                    f"warning: the broker exited {code}; log tail:\n{broker.log_text()[-2000:]}",
                    file=sys.stderr,
                )


def _cluster_run(args: argparse.Namespace) -> Report:
    from rivven_kproto.testing.postgres import create_database, find_bin_dir, temporary_postgres  # noqa: PLC0415

    from .test_cluster import three_brokers  # noqa: PLC0415 - pytest and the cluster tests' imports
    from .test_matrix_cluster import run_on_cluster  # noqa: PLC0415

    if find_bin_dir() is None:
        sys.exit("--cluster needs PostgreSQL (Debian: apt-get install postgresql)")
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    with tempfile.TemporaryDirectory(prefix="kproto-matrix-cluster-") as tmp, temporary_postgres() as server:
        with three_brokers(Path(tmp), create_database(server)) as brokers:
            return run_on_cluster(brokers, progress=progress)


def _run(args: argparse.Namespace, bootstrap: str, target: str,
         profiles: dict[str, dict[str, str]] | None = None) -> Report:
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    return run_matrix(
        bootstrap,
        target=target,
        modules=args.clients,
        capabilities=args.capabilities,
        jobs=args.jobs,
        progress=progress,
        secured=profiles,
    )


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compat_tests.report", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--bootstrap", metavar="HOST:PORT", help="run against this broker instead of a fresh one"
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="where results.rst/json go (%(default)s)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="cells run at once (default %(default)s)")
    parser.add_argument("--clients", type=_csv, help="client modules to run (default: every column)")
    parser.add_argument("--capabilities", type=_csv, help=f"capabilities to run, of: {', '.join(BY_ID)}")
    parser.add_argument(
        "--write-baseline", action="store_true", help="record the passing cells as the CI baseline"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--cluster", action="store_true",
        help="the '3 brokers on PostgreSQL' view (compat_tests/test_matrix_cluster.py's rows and clients)",
    )
    args = parser.parse_args(argv)
    partial = bool(args.clients or args.capabilities)
    if partial and args.write_baseline:
        parser.error("--write-baseline needs the whole matrix")
    if args.cluster and (partial or args.bootstrap or args.write_baseline):
        parser.error("--cluster runs its own rows and clients on its own brokers, and has no baseline")

    if args.cluster:
        report = _cluster_run(args)
    elif args.bootstrap:
        report = _run(args, args.bootstrap, f"the broker at {args.bootstrap}")
    else:
        report = _fresh_broker_run(args)
    rst, js = render.write(report, args.out, "results-cluster" if args.cluster else "results")
    print(render.to_rst(report))
    print(f"wrote {rst} and {js} in {report.duration_s:.0f} s", file=sys.stderr)
    if args.write_baseline:
        baseline.write(report)
        print(f"wrote {baseline.BASELINE} ({len(report.passing())} passing cells)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
