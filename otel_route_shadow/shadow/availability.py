"""What this host can see of its accounts: whether a credential is present, never what it is."""

from __future__ import annotations

import os
from collections.abc import Mapping

from otel_route_shadow.core import Account, AccountState, Provider

__all__ = ["DEFAULT_CREDENTIAL_VARIABLES", "LEGACY_ACCOUNT_IDS", "local_account_availability"]

LEGACY_ACCOUNT_IDS: Mapping[str, str] = {
    Provider.ANTHROPIC.value: "anthropic-legacy",
    Provider.ZAI.value: "zai-legacy",
}
"""ADR-0138's two legacy bindings, one per provider."""

DEFAULT_CREDENTIAL_VARIABLES: Mapping[str, tuple[str, ...]] = {
    Provider.ANTHROPIC.value: ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"),
    Provider.ZAI.value: ("ZAI_API_KEY", "GLM_API_KEY"),
}
"""The variables the legacy router gates each provider on."""


def local_account_availability(
    environ: Mapping[str, str] | None = None,
    credential_variables: Mapping[str, tuple[str, ...]] = DEFAULT_CREDENTIAL_VARIABLES,
) -> tuple[Account, ...]:
    """The legacy accounts as this host sees them.

    Only the presence of a variable name is tested (``name in environ``); the value is never read,
    compared or copied. A missing credential is ``unknown`` rather than ``disabled``: the gateway's own
    upstream view (ADR-0138) stays authoritative, this is the conservative local view.
    """
    env = os.environ if environ is None else environ
    accounts = []
    for provider, account_id in sorted(LEGACY_ACCOUNT_IDS.items()):
        present = any(name in env for name in credential_variables.get(provider, ()))
        state = AccountState.AVAILABLE if present else AccountState.UNKNOWN
        accounts.append(Account(id=account_id, provider=provider, state=state.value))
    return tuple(accounts)
