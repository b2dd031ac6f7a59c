"""The host's retention: after a cut, the plugin's checkpointing thread prunes the chain down to the newest
``keep_records`` records (``OTEL_PYTHON_ROUTE_SHADOW_RETENTION_RECORDS``; docs/operating.md "Retention").

It is ``logstore.prune`` as ``otel-route-shadow prune --keep-records K`` runs it, with the writer's own log
keys and witness policy: only segments a witnessed checkpoint covers (the policy's quorum; without a
policy, the newest checkpoint the writer's key signs) are pruned, never forced. Each goes gzipped to
``CHAIN.archive/`` with its proof, or is deleted (``delete``). Each of the prune's locks (another prune's,
the chain's) is waited for at most :data:`RETENTION_LOCK_WAIT_S`; a prune refused (a lock busy, a segment
changed meanwhile, the records not witnessed yet) is tried again after the next checkpoint, until one
succeeds; anything else is tried again after the next cut. Each kind of refusal or failure is logged once
until a prune goes through, then once again. It never runs in a spawn and never raises. It runs outside the
checkpointing schedule's lock: its own lock keeps other prunes out, and the chain's, held for its two short
steps with the check at its commit that nothing it read changed, keeps it safe beside cuts and appends; so
neither a checkpoint (the last one at shutdown among them) nor the storing of a witness's cosignature waits
for a prune, which gzips whole segments.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Final

from otel_route_shadow.logstore import PruneOptions, PruneRefused, PruneResult, Retention, prune
from otel_route_shadow.redacted_log import LOG as _LOG
from otel_route_shadow.tlog import Verifier, WitnessPolicy

__all__ = ["RETENTION_LOCK_WAIT_S", "HostRetention"]


RETENTION_LOCK_WAIT_S: Final = 0.25
"""Longest the checkpointing thread waits for each lock of a prune (writers hold the chain's for one
append, and a prune for two short steps; another prune holds its own for the whole prune)."""
_RETRIED: Final = frozenset({"busy", "unwitnessed"})
"""Refusals that the next checkpoint may lift: tried again then."""


class HostRetention:
    """Keep the newest ``keep_records`` records of the chain at ``chain_path`` (see the module
    docstring). ``due`` is set after a cut and cleared as a prune starts (set again when
    it is refused for a reason the next checkpoint may lift)."""

    def __init__(
        self,
        chain_path: str,
        keep_records: int,
        verifiers: Sequence[Verifier],
        policy: WitnessPolicy | None = None,
        *,
        delete: bool = False,
    ) -> None:
        self.chain_path = chain_path
        self.retention = Retention(keep_records=keep_records)
        self.verifiers = tuple(verifiers)
        self.policy = policy
        self.delete = delete
        self.due = False
        self.last: PruneResult | None = None
        self._logged: set[str] = set()

    def apply(self) -> PruneResult | None:
        """Prune when due; the result, or None when nothing ran or it was refused. Never raises."""
        if not self.due:
            return None
        self.due = False  # a cut while this prune runs asks for the next one
        command = f"route-shadow retention: keep {self.retention.keep_records} records (pid {os.getpid()})"
        options = PruneOptions(
            self.verifiers,
            self.policy,
            delete=self.delete,
            now=int(time.time()),
            command=command,
            wait=RETENTION_LOCK_WAIT_S,
        )
        try:
            result = prune(self.chain_path, self.retention, options)
        except PruneRefused as refused:
            self.due = self.due or refused.kind in _RETRIED
            self._log_once(refused.kind, "not pruned (%s); %s", refused.kind, refused)
            return None
        except Exception as exc:  # contained: the host is never disturbed
            self._log_once(type(exc).__name__, "not pruned (%s: %s)", type(exc).__name__, exc)
            return None
        if result.notes.left is not None:
            self._log_once(
                "notes", "old entries of checkpoints left for the next prune (%s)", result.notes.left
            )
        self.last = result
        self._logged.clear()  # a refusal after this prune is said again
        return result

    def _log_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._logged:
            self._logged.add(key)
            _LOG.warning("route-shadow: retention of %s: " + message, self.chain_path, *args)
