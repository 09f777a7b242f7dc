"""The README's and the documentation's snippets run as written against a real broker (#16 item 4, #41).

Each block is taken from README.rst or docs/**/*.rst itself, so the test fails when a page changes
into something that does not run. The only substitution is the broker's address:
``localhost:9092`` becomes the test broker's ``host:port``. Shell blocks run in a directory whose
``kproto-data`` is the broker's data directory, so ``kproto log verify ./kproto-data`` reads the
live log. Every block that is a command or a program (``sh``, ``python``, ``javascript``) is either
run by a test here (:data:`RUN`) or listed with the reason it is not (:data:`NOT_RUN`): a new block
that is neither fails :func:`test_every_runnable_block_is_run_or_excused`.
"""

from __future__ import annotations

import ast
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .broker_process import BrokerProcess
from .txn_helpers import consume, create_topics, values

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.rst"
DOCS = ROOT / "docs"
NODE_DIR = Path(__file__).resolve().parent / "node"
RUN_TIMEOUT_S = 120
BLOCK = re.compile(r"^( *)\.\. code-block:: (\w+)\n\n((?:\1   .*\n|[ \t]*\n)+)", re.MULTILINE)
RUNNABLE = {"sh", "bash", "console", "shell", "python", "pycon", "javascript", "js"}
README_COMMANDS = ("pip install . && kproto serve\n", "bash .ci/run\n")

# (language, a string only that block contains) -> the test or fixture of this module that runs it.
RUN: dict[tuple[str, str], str] = {
    ("python", "consumer.subscribe([\"quickstart\"])"): "test_readme_quickstart",
    ("sh", "kproto consume quickstart --from-beginning -e"): "test_readme_quickstart",
    ("sh", "kproto cluster info"): "test_cli_quickstart",
    ("sh", "--transactional-id demo-writer"): "test_transactions_quickstart",
    ("sh", "kproto groups list --state Stable"): "test_groups_snippet",
    ("sh", "kcat -b localhost:9092"): "test_client_quickstarts",
    ("python", "# confluent-kafka"): "test_client_quickstarts",
    ("javascript", "kafkajs"): "test_client_quickstarts",
    ("python", "from rivven_kproto.testing import broker"): "test_testing_helper_snippet",
    ("sh", "python -m trustme"): "secure_walkthrough",
    ("sh", "--command-config admin.properties"): "test_security_walkthrough_admin_and_clients",
    ("python", "sasl_plain_username"): "test_security_walkthrough_admin_and_clients",
    ("python", "kafka.sasl.jaas.config"): "test_security_walkthrough_admin_and_clients",
    ("python", "spark = with_kafka_source(SparkSession.builder).getOrCreate()"): "spark_run",
    ("python", ".writeStream.format(\"parquet\")"): "spark_run",
    ("python", ".option(\"topic\", \"orders-upper\")"): "spark_run",
    ("sh", "kproto cluster members"): "test_cluster_members_snippet",
    ("python", "worker = ShareConsumer("): "test_queues_snippet",
    ("sh", "kproto configs set --group workers"): "test_queues_snippet",
    ("sh", "kproto share-groups list"): "test_share_groups_snippet",
}
# (language, marker) -> why the block is not run here, and what runs the same thing instead.
NOT_RUN: dict[tuple[str, str], str] = {
    ("sh", "pip install . && kproto serve"): "the install and start every test relies on: tox installs this checkout "
                                             "and every compat test starts kproto serve",
    ("sh", "bash .ci/run"): "the CI command itself, whose run includes this test",
    ("sh", "python -m compat_tests.report"): "the whole matrix (about 13 minutes); compat_tests/test_matrix.py runs it "
                                             "in CI",
    ("sh", "sudo -u postgres createuser"): "needs root and a system PostgreSQL; test_cluster.py starts brokers with "
                                           "--storage and --node-id on a throwaway server",
    ("sh", "pip install '.[spark]'"): "installs from PyPI; the test environment has the spark extra",
    ("sh", "kproto verify-eos --bootstrap"): "a 100-transaction run; compat_tests/test_verify_eos.py runs a short one",
    ("sh", "kproto verify-eos --cluster 3"): "3 minutes on a PostgreSQL pair; compat_tests/test_verify_eos_cluster.py "
                                             "runs a short one",
    ("sh", "python -m tools.fuzz"): "10^6 inputs per target; tests/tools/test_fuzz.py runs 5,000 per target",
}


@dataclass(frozen=True)
class Block:
    """One ``.. code-block::`` of a page: where it is, its language and its code, dedented."""

    path: Path
    language: str
    code: str


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.rst"))]


def blocks() -> list[Block]:
    """Every code block of the README and of the documentation, in page order."""
    return [Block(path, m.group(2), textwrap.dedent(m.group(3)).strip() + "\n")
            for path in pages() for m in BLOCK.finditer(path.read_text())]


def block(language: str, marker: str) -> str:
    found = [b for b in blocks() if b.language == language and marker in b.code]
    where = ", ".join(str(b.path.relative_to(ROOT)) for b in found)
    assert len(found) == 1, f"expected one {language} block containing {marker!r} in the docs, found {len(found)} ({where})"
    return found[0].code


def docs_text() -> str:
    """The prose of every page, for the commands named inline (``kproto serve ...``)."""
    return "\n".join(path.read_text() for path in pages())


def test_the_block_parser_sees_the_docs() -> None:
    languages = [b.language for b in blocks()]
    assert languages.count("sh") >= 10 and "python" in languages and "javascript" in languages
    assert {b.path.parent for b in blocks()} >= {ROOT, DOCS, DOCS / "operating"}


def test_the_readme_starts_with_its_two_commands() -> None:
    """``pip install . && kproto serve`` and ``bash .ci/run`` stay the README's first commands, and the
    README stays a short entry point (#41: 1,500 lines)."""
    readme = [b.code for b in blocks() if b.path == README]
    assert tuple(readme[:2]) == README_COMMANDS
    assert len(README.read_text().splitlines()) < 150


def _strings_of(name: str) -> set[str] | None:
    """The string constants of this module's function ``name`` (None when there is no such function)."""
    for node in ast.walk(ast.parse(Path(__file__).read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return {c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return None


def test_every_runnable_block_is_run_or_excused() -> None:
    """A command or program block must match exactly one entry of RUN or NOT_RUN; each RUN entry's
    test or fixture must name the block's marker (so it really takes that block), and no entry may
    be left over from a block that is gone."""
    entries = {**RUN, **NOT_RUN}
    problems = []
    used: set[tuple[str, str]] = set()
    for b in blocks():
        if b.language not in RUNNABLE:
            continue
        matches = [key for key in entries if key[0] == b.language and key[1] in b.code]
        used.update(matches)
        if len(matches) != 1:
            first = b.code.splitlines()[0]
            problems.append(f"{b.path.relative_to(ROOT)}: {b.language} block {first!r} matches {len(matches)} entries")
    problems += [f"entry {key} matches no block" for key in entries if key not in used]
    for (_, marker), name in RUN.items():
        strings = _strings_of(name)
        if strings is None:
            problems.append(f"{name} (runs {marker!r}) is not a function of this module")
        elif marker not in strings:
            problems.append(f"{name} does not take the block {marker!r}")
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def readme_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Path]]:
    workdir = tmp_path_factory.mktemp("readme")
    broker = BrokerProcess(workdir / "kproto-data", workdir / "broker.log").start()
    yield broker, workdir
    broker.stop()


def run(command: list[str], workdir: Path, bootstrap: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROTO_")}
    env["KPROTO_BOOTSTRAP"] = bootstrap
    result = subprocess.run(command, cwd=workdir, input=stdin, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)
    assert result.returncode == 0, f"{command}\nstdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-3000:]}"
    return result


def test_readme_quickstart(readme_broker: tuple[BrokerProcess, Path]) -> None:
    """The README's 30-second quickstart: confluent-kafka writes a record to a topic that does not
    exist yet and reads it back through a consumer group; then the CLI block reads and writes it."""
    broker, workdir = readme_broker
    python = block("python", "consumer.subscribe([\"quickstart\"])").replace("localhost:9092", broker.bootstrap)
    result = run([sys.executable, "-c", python], workdir, broker.bootstrap)
    assert "b'k1' b'hello, kafka'" in result.stdout
    cli = block("sh", "kproto consume quickstart --from-beginning -e").replace("localhost:9092", broker.bootstrap)
    result = run(["bash", "-euo", "pipefail", "-c", cli], workdir, broker.bootstrap)
    assert "hello, kafka" in result.stdout and "quickstart" in result.stdout


def test_cli_quickstart(readme_broker: tuple[BrokerProcess, Path]) -> None:
    broker, workdir = readme_broker
    code = block("sh", "kproto cluster info")
    result = run(["bash", "-euo", "pipefail", "-c", code.replace("localhost:9092", broker.bootstrap)], workdir, broker.bootstrap)
    assert "k1=hello" in result.stdout and "k2=world" in result.stdout


def test_transactions_quickstart(readme_broker: tuple[BrokerProcess, Path]) -> None:
    """The transactions block but its last line (the abort example names a made-up offset): a
    transaction written, read back read_committed, listed, described and checked for hanging ones."""
    broker, workdir = readme_broker
    lines = block("sh", "--transactional-id demo-writer").splitlines()
    assert lines[-1].startswith("kproto txns abort")
    result = run(["bash", "-euo", "pipefail", "-c", "\n".join(lines[:-1])], workdir, broker.bootstrap)
    assert "a\nb\n" in result.stdout and "demo-writer" in result.stdout


def test_client_quickstarts(readme_broker: tuple[BrokerProcess, Path]) -> None:
    broker, workdir = readme_broker
    kcat = block("sh", "kcat -b localhost:9092").replace("localhost:9092", broker.bootstrap)
    result = run(["bash", "-euo", "pipefail", "-c", kcat], workdir, broker.bootstrap)
    assert "k1 hello" in result.stdout
    python = block("python", "# confluent-kafka").replace("localhost:9092", broker.bootstrap)
    result = run([sys.executable, "-c", python], workdir, broker.bootstrap)
    assert result.stdout.splitlines()[0].startswith("b'")  # confluent-kafka's poll().value()
    assert "ConsumerRecord" in result.stdout  # kafka-python's poll() printed what it read
    javascript = block("javascript", "kafkajs").replace("localhost:9092", broker.bootstrap)
    assert (NODE_DIR / "node_modules" / "kafkajs").exists(), "run npm install --prefix compat_tests/node"
    script = NODE_DIR / "readme_produce.js"
    script.write_text(javascript)
    try:
        run(["node", str(script)], workdir, broker.bootstrap)
    finally:
        script.unlink()


def test_queues_snippet(tmp_path: Path) -> None:
    """docs/queues.rst: the group set to earliest with kproto (the broker keeps Kafka's default,
    latest), then share-group workers that read the jobs written before they joined."""
    broker = BrokerProcess(tmp_path / "kproto-data", tmp_path / "broker.log").start()
    try:
        run(["bash", "-euo", "pipefail", "-c", block("sh", "kproto configs set --group workers")], tmp_path,
            broker.bootstrap)
        python = block("python", "worker = ShareConsumer(").replace("localhost:9092", broker.bootstrap)
        result = run([sys.executable, "-c", python], tmp_path, broker.bootstrap)
        assert result.stdout.strip().splitlines()[-1] == str(sorted(b"job-%d" % n for n in range(6)))
    finally:
        broker.stop()


def test_share_groups_snippet(tmp_path: Path) -> None:
    """docs/cli.rst's share-groups block, on a share group "workers" that read "jobs" and left."""
    from .test_share_group_admin import consume_all_and_leave, wait_empty
    from .test_share_groups import produce

    broker = BrokerProcess(tmp_path / "kproto-data", tmp_path / "broker.log",
                           env={"KPROTO_SHARE_AUTO_OFFSET_RESET": "earliest"}).start()
    try:
        produce(broker.bootstrap, "jobs", [b"job-1", b"job-2"])
        consume_all_and_leave(broker, "workers", "jobs", 2)
        wait_empty(broker, "workers")
        result = run(["bash", "-euo", "pipefail", "-c", block("sh", "kproto share-groups list")], tmp_path,
                     broker.bootstrap)
        assert "workers" in result.stdout and "deleted workers" in result.stdout, result.stdout
    finally:
        broker.stop()


def test_testing_helper_snippet(tmp_path: Path) -> None:
    run([sys.executable, "-c", block("python", "from rivven_kproto.testing import broker")], tmp_path, "unused:1")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def secure_walkthrough(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """The Security section's set-up block run as written, then its broker command, on a free port."""
    workdir = tmp_path_factory.mktemp("secure-readme")
    port = str(free_port())
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROTO_")}
    setup = block("sh", "python -m trustme").replace("9093", port)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", setup], cwd=workdir, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env=env)
    assert done.returncode == 0, done.stderr
    secure = workdir / "secure"
    assert "admin-secret" not in (secure / "data" / "meta" / "scram.json").read_text()
    serve = re.search(r"``(kproto serve --config server.properties --data-dir ./data)``",
                      docs_text().replace("\n", " "))
    assert serve is not None, "the Security page names the broker command"
    log_path = workdir / "broker.log"
    with log_path.open("wb") as log:
        broker = subprocess.Popen(serve.group(1).split(), cwd=secure, stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while f"listening on 127.0.0.1:{port}" not in log_path.read_text():
            assert broker.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        yield secure, {**env, "PORT": port}
    finally:
        broker.terminate()
        broker.wait(30)


def test_security_walkthrough_admin_and_clients(secure_walkthrough: tuple[Path, dict[str, str]]) -> None:
    secure, env = secure_walkthrough
    port = env["PORT"]
    admin = block("sh", "--command-config admin.properties").replace("9093", port)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", admin], cwd=secure, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env=env)
    assert done.returncode == 0, done.stderr
    assert "carol" in done.stdout and "SCRAM-SHA-256" in done.stdout and "admin" in done.stdout
    clients = block("python", "sasl_plain_username").replace("9093", port)
    done = subprocess.run([sys.executable, "-c", clients], cwd=secure, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env=env)
    assert done.returncode == 0, done.stderr
    assert "b'order-1'" in done.stdout
    spark = block("python", "kafka.sasl.jaas.config").replace("9093", port)
    # As test_spark.py: Spark's Python workers find pyspark_kafka_py in the checkout (editable installs).
    paths = [str(ROOT), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    spark_env = {**env, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run([sys.executable, "-c", spark], cwd=secure, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S * 2, env=spark_env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Row(value='order-1')" in done.stdout


def test_groups_snippet(readme_broker: tuple[BrokerProcess, Path]) -> None:
    """The consumer-groups block, on a group "billing" with offsets committed and no members left."""
    from confluent_kafka import Consumer, TopicPartition

    broker, workdir = readme_broker
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "billing", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("demo", p, 0) for p in range(3)], asynchronous=False)
    consumer.close()
    result = run(["bash", "-euo", "pipefail", "-c", block("sh", "kproto groups list --state Stable")], workdir,
                 broker.bootstrap)
    assert "billing" in result.stdout + result.stderr


@dataclass
class SparkRun:
    """What the Spark section's blocks printed, run once for both Spark tests."""

    stdout: str


@pytest.fixture(scope="module")
def spark_run(readme_broker: tuple[BrokerProcess, Path], tmp_path_factory: pytest.TempPathFactory) -> SparkRun:
    """The Spark section's blocks in one Python process, as a user pastes them one after the other:
    the batch and streaming reads (against the demo topic the earlier snippets wrote), then the
    sink's streaming block on the same session (one JVM start for all of them, the bulk of their
    time). The sink's checkpoint is a directory of its own (Spark resolves the block's relative
    ``ckpt`` against the JVM's start directory, the reading block's), and records produced once it
    runs must come out upper-cased, once each (test_spark_sink_snippet)."""
    broker, workdir = readme_broker
    create_topics(broker.bootstrap, {"orders": 2})
    feed = (
        "from confluent_kafka import Producer\n"
        "producer = Producer({'bootstrap.servers': 'localhost:9092'})\n"
        "for i in range(20):\n"
        "    producer.produce('orders', f'order-{i}'.encode(), key=f'k{i}'.encode())\n"
        "assert producer.flush(30) == 0\n"
    )
    sink = block("python", ".option(\"topic\", \"orders-upper\")")
    sink_checkpoint = tmp_path_factory.mktemp("spark-sink") / "ckpt"
    assert sink.count('"ckpt"') == 1, sink
    code = (block("python", "spark = with_kafka_source(SparkSession.builder).getOrCreate()")
            + block("python", ".writeStream.format(\"parquet\")")
            + "print('batch rows', df.count())\n"
            + "print('streamed rows', spark.read.parquet('out').count())\n"
            + "query = " + sink.replace('"ckpt"', repr(str(sink_checkpoint)))
            + "query.processAllAvailable()\n" + feed
            + "query.processAllAvailable()\nquery.stop()\n").replace("localhost:9092", broker.bootstrap)
    return SparkRun(run_spark_python(code, workdir).stdout)


def test_spark_snippets(spark_run: SparkRun) -> None:
    """The Spark section's batch and streaming blocks, in one Python process (the second uses the
    first's session), against the demo topic the earlier snippets wrote."""
    batch = int(re.search(r"batch rows (\d+)", spark_run.stdout).group(1))  # type: ignore[union-attr]
    streamed = int(re.search(r"streamed rows (\d+)", spark_run.stdout).group(1))  # type: ignore[union-attr]
    assert batch > 0 and streamed > 0


def test_spark_sink_snippet(readme_broker: tuple[BrokerProcess, Path], spark_run: SparkRun) -> None:
    """The sink's streaming block as written (exactly once, orders -> orders-upper; run by
    :func:`spark_run` after the reading blocks, with a checkpoint of its own): records produced once
    it runs come out upper-cased, once each, for a read_committed reader. ``orders-upper`` does not
    exist, as on a user's new broker: the first (empty) micro-batch writes and commits nothing, the
    first rows auto-create it as Kafka's producer does (#41 item 2: the empty batch's marker commit
    retried UNKNOWN_TOPIC_OR_PARTITION, was fenced and the query died)."""
    broker, _ = readme_broker
    seen = consume("confluent-kafka", broker.bootstrap, [("orders-upper", 0)], committed=True, expected=20)
    written = [value for records in values(seen).values() for value in records]
    assert sorted(written, key=lambda v: v or b"") == sorted(f"ORDER-{i}".encode() for i in range(20))


def run_spark_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """README Spark code in a Python process of its own, as a user runs it (the package on the
    path for Spark's Python workers too); it must succeed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROTO_")}
    paths = [str(ROOT), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env.update(PYSPARK_PYTHON=sys.executable, PYTHONPATH=os.pathsep.join(paths))
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S * 2, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_monitoring_snippet(tmp_path: Path) -> None:
    """The scrape job's target is where ``kproto serve --metrics`` (as the README writes it) answers."""
    import urllib.request

    text = docs_text()
    flag = re.search(r"``kproto serve --metrics ([\d.]+:\d+)``", text)
    target = re.search(r'targets: \["([\d.]+:\d+)"\]', block("yaml", "scrape_configs"))
    assert flag is not None and target is not None and flag.group(1) == target.group(1)
    port = str(free_port())
    address = target.group(1).rsplit(":", 1)[0] + ":" + port
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROTO_")}
    log_path = tmp_path / "broker.log"
    with log_path.open("wb") as log:
        broker = subprocess.Popen([sys.executable, "-m", "rivven_kproto", "serve", "--metrics", address,
                                   "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data")],
                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while "listening on" not in log_path.read_text():
            assert broker.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=RUN_TIMEOUT_S) as answer:
            assert b"rivven_transactions_started_total 0.0" in answer.read()
    finally:
        broker.terminate()
        broker.wait(30)


def test_cluster_members_snippet(tmp_path: Path, postgres_url: str) -> None:
    """The registry snippet, against a broker on a real PostgreSQL database (its URL substituted)."""
    broker = BrokerProcess(tmp_path / "pg-data", tmp_path / "pg.log", ["--storage", postgres_url]).start()
    try:
        code = block("sh", "kproto cluster members").replace("postgresql://kproto@127.0.0.1/kproto", postgres_url)
        result = run(["bash", "-euo", "pipefail", "-c", code], tmp_path, broker.bootstrap)
        assert "coordinator" in result.stdout and str(broker.port) in result.stdout and "yes" in result.stdout
    finally:
        broker.stop()


def test_inter_broker_snippet(tmp_path: Path, postgres_url: str) -> None:
    """The inter-broker listener's configuration starts a broker on PostgreSQL (certificates from
    trustme as broker.pem and ca.pem, any free port) that a client reaches as the super user admin."""
    from confluent_kafka.admin import AdminClient

    from .broker_process import server_certificate

    _, keystore, ca_file = server_certificate(tmp_path)
    code = block("properties", "inter.broker.listener.name")
    config = tmp_path / "server.properties"
    config.write_text(code.replace("127.0.0.1:9093", "127.0.0.1:0").replace("location=broker.pem", f"location={keystore}")
                      .replace("location=ca.pem", f"location={ca_file}"))
    broker = BrokerProcess(tmp_path / "ib-data", tmp_path / "ib.log", ["--storage", postgres_url, "--config", str(config)]).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_SSL",
                             "ssl.ca.location": str(ca_file), "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                             "sasl.password": "admin-secret"})
        assert list(admin.list_topics(timeout=30).brokers) == [0]
    finally:
        broker.stop()
