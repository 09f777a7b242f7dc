"""Auto-registration of the ``kafka_py`` data source.

Spark's Python workers import every top-level module named ``pyspark_*`` and register its
``DefaultSource`` under ``DefaultSource.name()``; this module exists only for that.
"""

from rivven_kproto.spark.source import KafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
