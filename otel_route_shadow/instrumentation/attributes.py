"""Re-export of :mod:`otel_route_shadow.shadow.attributes`, the one attribute table."""

from otel_route_shadow.shadow.attributes import *  # noqa: F403
