"""Names vulture cannot see used: framework callbacks and fields (SDK span-processor and exporter
hooks, pydantic ``model_config`` and validators, enum members read by value, counters that tests and
benchmarks read). ``tests/test_dead_code.py`` runs vulture over the package with this file; a name that
is really dead is deleted from the code, not added here."""

# ruff: noqa: B018, F821

BAD_SIGNATURE  # unused variable: logstore/consistency.py (read by value: authentication errors' reason)
CLAUDE_HAIKU  # unused variable: core/vocabulary.py
CLAUDE_OPUS  # unused variable: core/vocabulary.py
CLAUDE_SONNET  # unused variable: core/vocabulary.py
DISABLED  # unused variable: core/vocabulary.py
EXHAUSTED  # unused variable: core/vocabulary.py
FAST  # unused variable: core/vocabulary.py
HIGH_REASONING  # unused variable: core/vocabulary.py
IMPLEMENTER  # unused variable: core/vocabulary.py
LONG_CONTEXT  # unused variable: core/vocabulary.py
PLANNER  # unused variable: core/vocabulary.py
REVIEWER  # unused variable: core/vocabulary.py
SUMMARIZER  # unused variable: core/vocabulary.py
TRIAGER  # unused variable: core/vocabulary.py
KEY_OUTSIDE_WINDOW  # unused variable: logstore/consistency.py (read by value)
UNKNOWN_KEY  # unused variable: logstore/consistency.py (read by value)
UNSIGNED  # unused variable: logstore/consistency.py (read by value)
_._absolute  # unused method: instrumentation/config.py (a pydantic field validator)
_._contiguous  # unused method: logstore/pruned.py (a pydantic model validator)
_.http_open  # unused method: backend/transport.py (urllib handler callback)
_.https_open  # unused method: backend/transport.py (urllib handler callback)
_.redirect_request  # unused method: backend/transport.py (urllib redirect handler callback)
_._instrument  # unused method: instrumentation/__init__.py
_._normalize  # unused method: core/policy.py
_._uninstrument  # unused method: instrumentation/__init__.py
_.empty  # unused method: backend/trust.py (Trusted.empty: the first state benchmarks/bench_audit.py proves from)
_.failed_exports  # unused property: instrumentation/checkpoint_spans.py
_.force_flush  # unused method: instrumentation/processor.py
_.fsyncs  # unused attribute: chain/log.py
_.full_loads  # unused property: store/store.py
_.instrumentation_dependencies  # unused method: instrumentation/__init__.py
_.makefile  # unused method: witness/transport.py (http.client calls it on its socket)
_.met  # unused attribute: tlog/policy.py (QuorumVerdict: read by tests; the CLI's --witness-policy verdict, issue 24)
_.never_awaited  # unused attribute: instrumentation/runtime.py
_.on_end  # unused method: instrumentation/processor.py
_.on_start  # unused method: instrumentation/processor.py
_.quarantines  # unused attribute: chain/log.py
_.readable  # unused method: witness/transport.py (io.RawIOBase hook)
_.reads  # unused attribute: tlog/tiles.py
_.stats  # unused method: witness/pusher.py (read by tests; the plugin's wiring, issue 24)
last_start_unix_nano  # unused variable: witness/crosscheck.py
model_config  # unused variable: core/context.py, core/decision.py, core/identity.py, core/policy.py, core/requirements.py, core/shadow.py, instrumentation/config.py, tlog/proofs.py, logstore/store.py
parent_context  # unused variable: instrumentation/processor.py
policies_excluded  # unused variable: core/decision.py
route_shadow_enabled  # unused variable: demo/factory.py
selection  # unused variable: core/policy.py
submitted  # unused variable: witness/pusher.py (PusherStats counter that tests read)
superseded  # unused variable: witness/pusher.py (PusherStats counter that tests read)
_.rebuilds  # unused attribute: logstore/entries.py (read by tests)
__getattr__  # unused function: chain/__init__.py (the deprecated name RoutingAuditLog, module attribute hook)
