/*
 * The Python source's table without the BATCH_WRITE capability, so that DataFrameWriter.save()
 * takes the V1 path (KafkaPythonSource.createRelation) in every save mode, the default
 * ErrorIfExists included. Reads, streaming reads and streaming writes are the Python table's own.
 */
package io.rivven.kproto.spark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

final class BatchWriteByV1 implements SupportsRead, SupportsWrite {
    private final Table table;

    BatchWriteByV1(Table table) {
        this.table = table;
    }

    @Override
    public String name() {
        return table.name();
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
        return table.schema();
    }

    @Override
    public Transform[] partitioning() {
        return table.partitioning();
    }

    @Override
    public Map<String, String> properties() {
        return table.properties();
    }

    @Override
    public Set<TableCapability> capabilities() {
        Set<TableCapability> out = EnumSet.noneOf(TableCapability.class);
        out.addAll(table.capabilities());
        out.remove(TableCapability.BATCH_WRITE);
        return out;
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        return ((SupportsRead) table).newScanBuilder(options);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        return ((SupportsWrite) table).newWriteBuilder(info);
    }
}
