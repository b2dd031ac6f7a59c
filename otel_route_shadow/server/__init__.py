"""A read-only HTTP server of the C2SP tlog-tiles API for one or more chains' logs.

Shell code on the network (it imports core, chain and tlog, never instrumentation or cli): each log
under its origin (``/<origin>/checkpoint``, ``/<origin>/tile/<L>/<N>[.p/<W>]``,
``/<origin>/tile/entries/<N>[.p/<W>]``), every resource authenticated against the log's checkpoint
before it is sent (``logstore.PublishedLog``), only GET and HEAD, every request, header and connection
count bounded (``protocol.Limits``), a stop that finishes what is being answered. What a witness's
pull-mode feeder, a mirror or an auditor reads. ``otel-route-shadow serve`` runs it.
"""

from __future__ import annotations

from otel_route_shadow.server.listener import LogServer
from otel_route_shadow.server.protocol import Limits, Request
from otel_route_shadow.server.site import LogSite, Response, SiteError, prefix_problem

__all__ = ["Limits", "LogServer", "LogSite", "Request", "Response", "SiteError", "prefix_problem"]
