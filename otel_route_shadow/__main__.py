"""``python -m otel_route_shadow``: the same command as ``otel-route-shadow`` (run only then: importing the
package never loads the command line)."""

import sys

from otel_route_shadow.cli import main

sys.exit(main())
