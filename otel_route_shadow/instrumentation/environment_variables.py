"""The ``OTEL_PYTHON_ROUTE_SHADOW_*`` settings, each named once here with what it means.

Each is mirrored by an ``instrument()`` keyword of the same name in lower case without the prefix
(the keyword wins; :class:`~otel_route_shadow.instrumentation.config.RouteShadowConfig` reads them).
Empty or blank means unset, and a value is read without surrounding whitespace; a boolean is true only
for ``true`` (case-insensitive), as everywhere in OpenTelemetry. A relative path is taken from the
working directory at ``instrument()`` (without it, at the first shadowed call). The settings table of
docs/instrumenting.md lists the same names (``tests/plugin/test_plugin_api.py`` holds the two together).
"""

OTEL_PYTHON_ROUTE_SHADOW_SEAMS = "OTEL_PYTHON_ROUTE_SHADOW_SEAMS"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_SEAMS

The seams to wrap: ``module:Qual.name,face[,extractor_module:function[,hook_module:function]]``
entries separated by ``;``. ``face`` is ``agentic`` or ``one-shot``; without an extractor (or with an
empty one) a call is shadowed when the host passes ``route_context=``. The fourth field is the seam's
response hook: what served each spawn (``config.ResponseHook``; empty: none).
"""

OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH = "OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_CHAIN_PATH

The decision chain file. Defaults to ``route-shadow/chain.jsonl``. A path that is not a regular file
(a FIFO, a device, a directory) is refused at start with one log line, and nothing is recorded.
"""

OTEL_PYTHON_ROUTE_SHADOW_STORE = "OTEL_PYTHON_ROUTE_SHADOW_STORE"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_STORE

The policy snapshot store directory. Unset: no managed policies (snapshot state ``absent``).
"""

OTEL_PYTHON_ROUTE_SHADOW_DURABILITY = "OTEL_PYTHON_ROUTE_SHADOW_DURABILITY"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_DURABILITY

``flush`` (the default: a record survives a killed process) or ``fsync`` (it survives power loss)
per chain record.
"""

OTEL_PYTHON_ROUTE_SHADOW_CHAIN_LOCK_TIMEOUT_MS = "OTEL_PYTHON_ROUTE_SHADOW_CHAIN_LOCK_TIMEOUT_MS"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_CHAIN_LOCK_TIMEOUT_MS

The longest a spawn waits for another process holding the chain's lock, in milliseconds (default
100). A record that waits longer is kept in memory, in order, and written before the next one.
"""

OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS = "OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_SNAPSHOT_RECHECK_MS

How long seams may resolve against the store's last verdict before looking at the store again, in
milliseconds (default 100; ``0``: look on every call).
"""

OTEL_PYTHON_ROUTE_SHADOW_ORIGIN = "OTEL_PYTHON_ROUTE_SHADOW_ORIGIN"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_ORIGIN

The log's name in its checkpoints. Defaults to the signing key's name; without a key, to
``<host>/route-shadow/<16 hex of SHA-256 of the chain's absolute path>``. An origin that differs from
the key's name is refused at start (checkpoints are then unsigned); so is one that looks like a credential
or that no checkpoint can hold (a control character, over 4,096 characters): the default origin is used.
"""

OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY = "OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY

Path of the checkpoint signing key file (``otel-route-shadow key generate``): one key a line, all
named for the log's origin, each signing every checkpoint (two during a key rotation, docs/operating.md).
Unset, or unreadable (logged, never the key): checkpoints are written unsigned.
"""

OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS = "OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_RECORDS

Checkpoint after this many records (default 1000).
"""

OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_SECONDS = "OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_SECONDS"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_CHECKPOINT_SECONDS

... or on the first record this many seconds after the last checkpoint (default 10); always at
uninstrument and at the host provider's shutdown.
"""

OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_BYTES = "OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_BYTES"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_BYTES

Cut the chain (close its live file as a segment, start the next with an anchor record) once the live
file holds this many bytes (default 268435456, 256 MiB; ``0``: never by size; unset with a retention of K
records: once it holds K/16 records). The background checkpointing thread cuts, never a spawn.
"""

OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_SECONDS = "OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_SECONDS"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_SEGMENT_SECONDS

... or once the live file is this many seconds old (default 604800, 7 days; ``0``: never by age):
counted from the last cut, or for a chain never cut from when the process first wrote it.
"""

OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS = "OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS

After each cut, prune the chain to the newest this many records at least (default ``0``: retention off,
nothing is ever removed): the closed segments below go gzipped to ``CHAIN.archive/`` with their proofs.
Only segments a witnessed checkpoint covers are pruned (the witness policy's quorum; without a policy,
the newest checkpoint the signing key signs), never forced; it needs a signing key. The background
checkpointing thread prunes, never a spawn.
"""

OTEL_PYTHON_ROUTE_SHADOW_RETENTION_DELETE = "OTEL_PYTHON_ROUTE_SHADOW_RETENTION_DELETE"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_RETENTION_DELETE

``true``: the segments retention prunes are deleted instead of archived (default ``false``).
"""

OTEL_PYTHON_ROUTE_SHADOW_WITNESS_POLICY = "OTEL_PYTHON_ROUTE_SHADOW_WITNESS_POLICY"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_WITNESS_POLICY

A C2SP tlog-policy file: each signed checkpoint is pushed to its witnesses that have a URL. Unset: no
witness. A policy that cannot be read is one log line, and nothing is pushed.
"""

OTEL_PYTHON_ROUTE_SHADOW_WITNESS_PUSHES_PER_DAY = "OTEL_PYTHON_ROUTE_SHADOW_WITNESS_PUSHES_PER_DAY"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_WITNESS_PUSHES_PER_DAY

The most pushes a day to each witness (default 1440: one a minute).
"""

OTEL_PYTHON_ROUTE_SHADOW_FLAG_EVENT = "OTEL_PYTHON_ROUTE_SHADOW_FLAG_EVENT"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_FLAG_EVENT

Where each decision's ``feature_flag.evaluation`` event goes: ``log`` (the default: a log event, a
LogRecord with that ``event_name``, through the host's logger provider, in the seam span's context),
``span`` (an event on the seam span, for backends that take no logs) or ``both``.
"""

OTEL_PYTHON_ROUTE_SHADOW_IN_PROCESS_SEAMS = "OTEL_PYTHON_ROUTE_SHADOW_IN_PROCESS_SEAMS"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_IN_PROCESS_SEAMS

Comma-separated names of the agentic seams whose agent runs in the host's own process. Under the
newest GenAI conventions (``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``) their
``invoke_agent`` spans are INTERNAL; every other seam span is CLIENT (a remote agent, or an inference
call). Without the opt-in every seam span is CLIENT, as before.
"""

OTEL_PYTHON_ROUTE_SHADOW_STRICT = "OTEL_PYTHON_ROUTE_SHADOW_STRICT"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_STRICT

``true``: a bug in the shadow path raises, before the host runs (recommended in host test suites).
"""

OTEL_PYTHON_ROUTE_SHADOW_DISABLED = "OTEL_PYTHON_ROUTE_SHADOW_DISABLED"
"""
.. envvar:: OTEL_PYTHON_ROUTE_SHADOW_DISABLED

``true``: the kill switch; every seam becomes the bare call. Read on every call, in both directions:
set or unset it at runtime, no restart. The ``disabled`` keyword instead switches off for the
instrumentation's life.
"""
