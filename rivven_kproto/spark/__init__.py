"""PySpark data source for Kafka (``kafka_py``), and the shim that serves ``format("kafka")``.

Reads (``spark.read``/``readStream``) and writes (``df.write``/``writeStream``, see :mod:`.sink`
for the delivery guarantees) go through the same source and the same three ways in.

Three ways in:

* ``spark.read.format("kafka_py")``: the Python data source, registered automatically by Spark
  through the top-level module ``pyspark_kafka_py`` (or explicitly with :func:`register`).
* ``spark.read.format("kafka")``: the same source under Spark's own name, once the session is
  built with :func:`with_kafka_source` (adds our small Java shim jar to ``spark.jars``).
* Spark's JVM connector (``spark-sql-kafka-0-10``), for users who have it: with it on the class
  path Spark prefers it for ``format("kafka")``; ``kafka_py`` keeps working alongside.

Nothing in rivven_kproto imports this package; PySpark and pyarrow come with the ``spark`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .shim import shim_jar

if TYPE_CHECKING:
    from .source import KafkaDataSource

__all__ = ["KafkaDataSource", "register", "shim_jar", "with_kafka_source"]


def __getattr__(name: str) -> Any:
    if name == "KafkaDataSource":
        from .source import KafkaDataSource

        return KafkaDataSource
    raise AttributeError(name)


def with_kafka_source(builder: Any) -> Any:
    """Add the shim jar to a ``SparkSession.builder`` so that ``format("kafka")`` works; returns it."""
    jar = shim_jar()
    existing = builder._options.get("spark.jars", "") if hasattr(builder, "_options") else ""
    jars = [j for j in existing.split(",") if j] + ([] if jar in existing.split(",") else [jar])
    return builder.config("spark.jars", ",".join(jars))


def register(spark: Any) -> None:
    """Register ``kafka_py`` on a session explicitly (auto-registration needs ``pyspark_kafka_py``
    importable by Spark's Python workers)."""
    from .source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
