-- otel-route-shadow `report`'s per-key counts, in ClickHouse, over the spans the OpenTelemetry Collector's
-- contrib `clickhouseexporter` (release 0.161.0, the one builder-config.yaml pins) writes: table
-- `otel_traces` (the exporter's `traces_table_name` default; run the query in the exporter's `database`,
-- default `default`), span attributes in `SpanAttributes Map(LowCardinality(String), String)`, every value
-- as text (true/false, 3, ...). Not for the exporter's `json: true` schema (attributes in a JSON column).
--
-- One row per (dimension, key): the breakdowns `report --json` prints under `groups` with its default
-- `--by` (repo, role, mechanism, transport), and `total` (key NULL) for its `totals`. Columns: spawns,
-- agreed, diverged, managed, bypass, with the report's meaning (docs/reports.md, "Figures"): a spawn is a
-- seam span with a `route_shadow.outcome`; it agrees when `route_shadow.agreed` is true AND its served route
-- does not disagree (a `served-differs` finding, or served status `differs` after a fallback or for no
-- recorded reason). A key the span does not carry is NULL (the report's `(none)`, null in its JSON).
--
-- Sampled spans give sampled figures: these are counts of the spans ClickHouse holds. They equal the
-- report's only when the collector kept every seam span (collector-config/otelcol.yaml; not
-- otelcol-sampled.yaml): see docs/reports.md, "The same counts in ClickHouse". A span inserted twice (an
-- export retried after a timeout) is counted once (LIMIT 1 BY TraceId, SpanId).
--
-- A time window as `report --since/--until`: add `AND Timestamp >= '2026-09-01' AND Timestamp < ...` to the
-- first WHERE (Timestamp is the span's start, as the report's window). Tested by
-- tests/e2e/test_collector_clickhouse.py (chDB, against `report --json` on the same run).
WITH
    decisions AS (
        SELECT SpanAttributes AS a
        FROM otel_traces
        WHERE mapContains(SpanAttributes, 'route_shadow.outcome')
        LIMIT 1 BY TraceId, SpanId
    ),
    judged AS (
        SELECT
            a,
            has(arrayMap(code -> trimBoth(code), splitByChar(',', a['route_shadow.finding'])), 'served-differs')
                OR (a['route_shadow.served.status'] = 'differs'
                    AND (NOT mapContains(a, 'route_shadow.served.why') OR a['route_shadow.served.why'] = 'fallback'))
                AS served_disagrees,
            a['route_shadow.agreed'] = 'true' AND NOT served_disagrees AS agrees
        FROM decisions
    )
SELECT
    dimension,
    key,
    count() AS spawns,
    countIf(agrees) AS agreed,
    spawns - agreed AS diverged,
    countIf(a['route_shadow.policy_source'] = 'managed-policy') AS managed,
    countIf(a['route_shadow.transport'] = 'direct-http') AS bypass
FROM judged
ARRAY JOIN
    ['total', 'repo', 'role', 'mechanism', 'transport'] AS dimension,
    [
        NULL,
        if(mapContains(a, 'route_shadow.repo'), a['route_shadow.repo'], NULL),
        if(mapContains(a, 'route_shadow.role'), a['route_shadow.role'], NULL),
        if(mapContains(a, 'route_shadow.legacy.mechanism'), a['route_shadow.legacy.mechanism'], NULL),
        if(mapContains(a, 'route_shadow.transport'), a['route_shadow.transport'], NULL)
    ] AS key
GROUP BY dimension, key
ORDER BY dimension, spawns DESC, key
