"""The HTML report as an operator sees it: rendered in a real browser (headless Chromium from Debian's
packages), its layout read back after layout, not only its markup (issue 27 item 5).

Two reports are rendered: the demo's (400 spawns through the real instrumentation, its checkpoints
signed) and a synthetic run of 400 spawns over minutes with flapping keys and served routes. A copy
of each page gets a probe script (the report itself has none) that measures the laid-out page and
writes what it found into the DOM, which ``--dump-dom`` prints: every legend entry inside its legend
and not clipped, every colour of the bars named in the legend, no chart text outside its SVG's
viewBox, more than one point on the timeline, every ``<details>`` collapsed, no horizontal overflow.
A screenshot of each is taken as well (kept in the test's temporary folder).

`make test` installs Chromium and sets ``ROUTE_SHADOW_CHROMIUM``: there, a missing browser fails the
test. Elsewhere, without Chromium, the test is skipped and says how to get it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_analysis_support import ACCOUNTS, append_observations, served

from otel_route_shadow.analysis import build_report
from otel_route_shadow.cli.report_html import render_html
from otel_route_shadow.core import LegacyStage, RouteContext, build_legacy_route

pytestmark = pytest.mark.slow

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1280,2000",
)
BROWSER_TIMEOUT_S = 120

PROBE = """
<script>
(function () {
  const inside = (r, box) => r.left >= box.left - 0.5 && r.right <= box.right + 0.5 && r.width > 0 && r.height > 0;
  const facts = {};
  facts.overflow = document.documentElement.scrollWidth - document.documentElement.clientWidth;
  facts.legends = [...document.querySelectorAll("ul.legend")].map((ul) => {
    const box = ul.getBoundingClientRect();
    return [...ul.querySelectorAll("li")].map((li) => ({
      text: li.textContent,
      color: getComputedStyle(li.querySelector(".swatch")).backgroundColor,
      inside: inside(li.getBoundingClientRect(), box),
      clipped: li.scrollWidth > li.clientWidth + 0.5,
    }));
  });
  facts.charts = [...document.querySelectorAll("svg.chart")].map((svg) => {
    const vb = svg.viewBox.baseVal;
    const outside = [...svg.querySelectorAll("text")]
      .map((t) => ({ text: t.textContent, b: t.getBBox() }))
      .filter(({ b }) => b.x < -0.5 || b.y < -0.5 || b.x + b.width > vb.width + 0.5 || b.y + b.height > vb.height + 0.5)
      .map(({ text }) => text);
    const box = svg.getBoundingClientRect();
    return {
      label: svg.getAttribute("aria-label"),
      width: box.width,
      onPage: box.right <= document.documentElement.clientWidth + 0.5,
      outside: outside,
      fills: [...new Set([...svg.querySelectorAll("rect")].map((r) => getComputedStyle(r).fill))],
      points: svg.querySelectorAll("circle").length,
    };
  });
  facts.details = [...document.querySelectorAll("details")].map((d) => ({
    open: d.open,
    hidden: [...d.children].filter((c) => c.tagName !== "SUMMARY").every((c) => !c.checkVisibility()),
    collapsed: d.getBoundingClientRect().height <= d.querySelector("summary").getBoundingClientRect().height + 1,
  }));
  facts.scrolled = [...document.querySelectorAll(".wide")].filter((w) => w.scrollWidth > w.clientWidth + 0.5).map((w) => w.textContent.slice(0, 80));
  facts.kpis = [...document.querySelectorAll(".kpi")].map((k) => ({ text: k.textContent, clipped: k.scrollWidth > k.clientWidth + 0.5 }));
  const out = document.createElement("pre");
  out.id = "layout-facts";
  out.textContent = JSON.stringify(facts);
  document.body.appendChild(out);
})();
</script>
"""


@pytest.fixture(scope="module")
def chromium() -> str:
    configured = os.environ.get("ROUTE_SHADOW_CHROMIUM", "")
    if configured:
        if not os.access(configured, os.X_OK):
            pytest.fail(f"ROUTE_SHADOW_CHROMIUM={configured}: no browser there (`make test` installs it)")
        return configured
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip(
            "headless Chromium is not installed (Debian: apt-get install chromium chromium-driver); "
            "`make test` installs it and runs this test"
        )
    return found


def _browse(chromium: str, page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT_S,
        check=False,
    )


def layout_facts(chromium: str, html: str, folder: Path) -> dict[str, Any]:
    """The page rendered, its layout measured by the probe; a screenshot beside it."""
    page, probed = folder / "report.html", folder / "probed.html"
    page.write_text(html, encoding="utf-8")
    probed.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    done = _browse(chromium, probed, folder / "profile-dom", "--dump-dom")
    found = re.search(r'<pre id="layout-facts">(.*?)</pre>', done.stdout, re.S)
    assert found is not None, f"no layout facts from Chromium (exit {done.returncode}): {done.stderr[-2000:]}"
    shot = folder / "report.png"
    _browse(chromium, page, folder / "profile-shot", f"--screenshot={shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    facts: dict[str, Any] = json.loads(
        found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    )
    return facts


def assert_readable(facts: dict[str, Any], codes: set[str], *, details: bool = True) -> None:
    assert facts["overflow"] <= 0, "the page scrolls sideways"
    assert facts["scrolled"] == [], "a table is wider than the page"
    (entries,) = facts["legends"]
    assert {entry["text"] for entry in entries} == {"agreed", *codes}, "every colour has its legend entry"
    assert all(entry["inside"] and not entry["clipped"] for entry in entries), entries
    charts = {chart["label"]: chart for chart in facts["charts"]}
    bars = charts["divergence by mechanism"]
    assert set(bars["fills"]) <= {entry["color"] for entry in entries}, (
        "a bar colour the legend does not name"
    )
    for chart in charts.values():
        assert chart["outside"] == [], f"{chart['label']}: text outside the chart: {chart['outside']}"
        assert chart["onPage"] and chart["width"] > 400
    assert charts["agreement over time"]["points"] > 1
    assert bool(facts["details"]) == details
    assert all(not d["open"] and d["hidden"] and d["collapsed"] for d in facts["details"]), facts["details"]
    assert not [kpi for kpi in facts["kpis"] if kpi["clipped"]]


def test_the_demo_report_reads_at_a_glance(chromium: str, tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "otel_route_shadow.cli"]
    key = tmp_path / "log.key"
    subprocess.run(
        [*cli, "key", "generate", "--name", "demo.example/log", "--out", str(key)],
        check=True,
        capture_output=True,
    )
    demo = subprocess.run(
        [*cli, "demo", "--spawns", "400", "--out", str(tmp_path / "demo"), "--quiet"],
        env={**os.environ, "OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY": str(key)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr
    report = build_report(tmp_path / "demo" / "chain.jsonl")
    assert report.spawns == 400 and report.evidence is not None and report.evidence.signed_by
    html = render_html(report)
    assert "demo.example/log+" in html and "not verified here" in html
    assert_readable(layout_facts(chromium, html, tmp_path), set(report.divergences))


def _context(repo: str, role: str, provider: str, mechanism: str, model: str) -> RouteContext:
    stages = [LegacyStage(mechanism=mechanism, provider=provider, model=model)]
    legacy = build_legacy_route(stages, "agentic", account=f"{provider}-legacy")
    assert legacy is not None
    return RouteContext(
        repo=repo,
        role=role,
        request_face="agentic",
        requirement="claude-opus",
        accounts=ACCOUNTS,
        legacy_route=legacy,
    )


def test_a_minutes_long_run_with_flapping_and_served_routes(chromium: str, tmp_path: Path) -> None:
    repos = ("acme/project-x", "acme/widgets", "acme/a-repository-with-a-rather-long-name-indeed")
    roles = ("reviewer", "implementer", "planner", "triager")
    items = []
    for i in range(400):
        repo, role = repos[i % 3], roles[i % 4]
        failover = repo != repos[1] and (i // 12) % 5 == 4  # a credit failover that comes and goes
        ctx = (
            _context(repo, role, "zai", "credit-failover", "glm-5.1")
            if failover
            else _context(repo, role, "anthropic", "role-dial", "claude-opus-4-1")
        )
        chosen = ctx.legacy_route.provider
        status = ("same", "differs", None, "same")[i % 4] if i % 7 else None
        other = "anthropic" if chosen == "zai" else "zai"
        items.append((ctx, served(status, other if status == "differs" else chosen)))
    chain = tmp_path / "chain.jsonl"
    append_observations(chain, items, step_ns=450_000_000)  # 400 spawns over three minutes
    report = build_report(chain)
    width, points = report.timeline()
    assert width < 60 * 10**9 and len(points) > 10
    assert report.noise.flapping and report.served.get("differs")
    facts = layout_facts(chromium, render_html(report), tmp_path)
    tallies = [report.gap_total, *(tally for rows in report.gaps.values() for _, tally in rows)]
    details = any(len(tally.reasons()[1]) > 1 for tally in tallies)
    assert_readable(facts, set(report.divergences), details=details)
