/*
 * Routes Spark's literal format("kafka") to the Python data source "kafka_py" (rivven_kproto.spark).
 *
 * Spark looks data sources up by DataSourceRegister.shortName(), case-insensitively. A Python data
 * source cannot take the name "kafka" (Spark reserves it), so this class registers that name and
 * is otherwise Spark's own PythonDataSourceV2 wrapper, bound to the Python source "kafka_py":
 *
 *  - shortName() is "KAFKA" in upper case: the lookup ignores case, but the batch path's check of
 *    spark.sql.sources.useV1SourceList ("...,kafka,...") does not, so the upper-case name keeps
 *    batch reads on the V2 (Python) path instead of Spark's V1 fallback, which would fail.
 *  - the Python source name is fixed in the constructor and later setShortName calls (Spark calls
 *    it with the name the user wrote) are ignored.
 *  - the package is deliberately not org.apache.spark: when Spark's own Kafka connector is on the
 *    class path too, Spark prefers its internal provider over an external one with the same name,
 *    so users who have the JVM connector keep getting it.
 */
package io.rivven.kproto.spark;

import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;

public class KafkaPythonSource extends PythonDataSourceV2 implements DataSourceRegister {
    /** The Python data source this class stands for (rivven_kproto.spark.source.SOURCE_NAME). */
    public static final String PYTHON_SOURCE = "kafka_py";

    public KafkaPythonSource() {
        super();
        super.setShortName(PYTHON_SOURCE);
    }

    @Override
    public String shortName() {
        return "KAFKA";
    }

    @Override
    public void setShortName(String name) {
        // Fixed in the constructor: Spark would pass "kafka", which names no Python source.
    }
}
