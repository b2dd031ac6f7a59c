"""The demo factory: a small agent factory with four seams, run under the real instrumentation."""

from otel_route_shadow.demo.factory import FactorySettings, dispatch, plan_jobs
from otel_route_shadow.demo.run import DEFAULT_PROJECT, format_summary, run_demo

__all__ = ["DEFAULT_PROJECT", "FactorySettings", "dispatch", "format_summary", "plan_jobs", "run_demo"]
