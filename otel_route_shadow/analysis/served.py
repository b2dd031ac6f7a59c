"""The served route as the record tells it: what actually served a spawn, beside the route its legacy
mechanism chose (gateways and provider clients fall back on their own). The attribute names
are defined in ``shadow/attributes.py`` and the values in ``core/served.py``, where the recorder takes
them from.

A record may carry ``route_shadow.served.status`` (``same``, ``differs`` or ``unknown``), the served
``provider`` and ``model``, and where the host learnt them (``source``: ``response-hook`` or
``descendant-span``). A record without them (every chain written before the served route was recorded)
is ``unknown``: nothing reported is never read as agreement. ``route_shadow.finding`` holds one finding
code or several, comma-separated and sorted (``requirement-defied,served-differs``); a
``served-differs`` finding makes the served state ``differs`` whatever the status says.

A served route that differs is a disagreement only after a real fallback (``served_disagrees``): the
record's ``route_shadow.served.why`` is ``fallback``, or its finding says ``served-differs``. A
record whose served route differs by an alias, load balancing or for no known reason counts as
``differs`` in the served figures, not as disagreement. A ``differs`` record without ``why`` (written
before the reason was recorded) is a disagreement, as it always was.
"""

from __future__ import annotations

from typing import Any, Final

from otel_route_shadow.core import SERVED_DIFFERS, ServedStatus, ServedWhy

__all__ = [
    "DIFFERS",
    "SAME",
    "SERVED_DIFFERS",
    "SERVED_STATES",
    "UNKNOWN",
    "finding_codes",
    "served_disagrees",
    "served_state",
]

SAME: Final = ServedStatus.SAME.value
DIFFERS: Final = ServedStatus.DIFFERS.value
UNKNOWN: Final = ServedStatus.UNKNOWN.value
SERVED_STATES: Final = (SAME, DIFFERS, UNKNOWN)


def finding_codes(value: Any) -> frozenset[str]:
    """The codes of a ``route_shadow.finding`` value: one code or comma-separated codes; none when
    the value is absent or not a string."""
    if not isinstance(value, str):
        return frozenset()
    return frozenset(code for code in (part.strip() for part in value.split(",")) if code)


def served_state(status: Any, codes: frozenset[str]) -> str:
    """``differs`` when the status or a ``served-differs`` finding says so; ``same`` only when the
    status says so; ``unknown`` otherwise (absent, or a value no recorder writes)."""
    if status == DIFFERS or SERVED_DIFFERS in codes:
        return DIFFERS
    if status == SAME:
        return SAME
    return UNKNOWN


def served_disagrees(status: Any, codes: frozenset[str], why: Any) -> bool:
    """The served route counts against agreement (see the module docstring)."""
    if SERVED_DIFFERS in codes:
        return True
    return status == DIFFERS and (why is None or why == ServedWhy.FALLBACK.value)
