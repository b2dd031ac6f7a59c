"""The package's logger, ``otel_route_shadow``: every line it passes on is redacted of credential-shaped
strings (a path, a URL or an exception's text the host or an operator gave may hold one)."""

from __future__ import annotations

import logging
from typing import Final

from otel_route_shadow.core import redact_text

__all__ = ["LOG", "redacting"]


class _Redacting(logging.Filter):
    """Formats the record's message once and keeps it redacted (its arguments then go)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:
            return True
        redacted, count = redact_text(text)
        if count:
            record.msg, record.args = redacted, None
        return True


def redacting(logger: logging.Logger) -> logging.Logger:
    """``logger`` with every line it passes on redacted (the filter is added once)."""
    if not any(isinstance(f, _Redacting) for f in logger.filters):
        logger.addFilter(_Redacting())
    return logger


LOG: Final = redacting(logging.getLogger("otel_route_shadow"))
