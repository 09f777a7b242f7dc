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
 *  - batch writes take the V1 path (the table does not declare BATCH_WRITE, see BatchWriteByV1),
 *    because DataFrameWriter refuses a V2 source in its default mode ErrorIfExists, while Spark's
 *    Kafka connector (a V1 CreatableRelationProvider) takes ErrorIfExists as append:
 *    df.write.format("kafka").save() as Spark's documentation writes it. createRelation hands
 *    the rows to "kafka_py" in Append mode for ErrorIfExists, in the mode asked otherwise.
 */
package io.rivven.kproto.spark;

import java.util.Map;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.CreatableRelationProvider;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;

public class KafkaPythonSource extends PythonDataSourceV2 implements DataSourceRegister, CreatableRelationProvider {
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

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new BatchWriteByV1(super.getTable(schema, partitioning, properties));
    }

    @Override
    public BaseRelation createRelation(SQLContext context, SaveMode mode,
                                       scala.collection.immutable.Map<String, String> parameters, Dataset<Row> data) {
        SaveMode effective = mode == SaveMode.ErrorIfExists ? SaveMode.Append : mode;
        data.write().format(PYTHON_SOURCE).mode(effective).options(parameters).save();
        StructType written = data.schema();
        return new BaseRelation() {
            @Override
            public SQLContext sqlContext() {
                return context;
            }

            @Override
            public StructType schema() {
                return written;
            }
        };
    }
}
