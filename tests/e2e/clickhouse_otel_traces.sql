-- The `otel_traces` table as the contrib clickhouseexporter of collector release 0.161.0 creates it
-- (exporter/clickhouseexporter/internal/sqltemplates/traces_table.sql in that module): the same columns,
-- types and names. Left out, because no query result depends on them: column codecs, skip indexes,
-- partitioning and TTL. chDB runs it in tests/e2e/test_collector_clickhouse.py.
CREATE TABLE otel_traces (
    Timestamp DateTime64(9),
    TraceId String,
    SpanId String,
    ParentSpanId String,
    TraceState String,
    SpanName LowCardinality(String),
    SpanKind LowCardinality(String),
    ServiceName LowCardinality(String),
    ResourceAttributes Map(LowCardinality(String), String),
    ScopeName String,
    ScopeVersion String,
    SpanAttributes Map(LowCardinality(String), String),
    Duration UInt64,
    StatusCode LowCardinality(String),
    StatusMessage String,
    Events Nested (Timestamp DateTime64(9), Name LowCardinality(String), Attributes Map(LowCardinality(String), String)),
    Links Nested (TraceId String, SpanId String, TraceState String, Attributes Map(LowCardinality(String), String))
) ENGINE = MergeTree
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))
