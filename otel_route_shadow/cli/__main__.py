"""``python -m otel_route_shadow.cli``: the same command as ``otel-route-shadow``."""

import sys

from otel_route_shadow.cli import main

sys.exit(main())
