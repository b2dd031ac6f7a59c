"""The HTML report is one self-contained file: inline SVG charts, nothing fetched, everything escaped."""

from __future__ import annotations

import re
from pathlib import Path

from test_analysis_support import build_chain, context

from otel_route_shadow.analysis import build_report
from otel_route_shadow.analysis.window import TimeWindow, format_ns, parse_bound
from otel_route_shadow.cli.report_html import render_html

_EXTERNAL = re.compile(r"""(?:src|href|xlink:href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def _assert_self_contained(html: str) -> None:
    assert "<script" not in html.lower()
    assert "<link" not in html.lower()
    assert "<iframe" not in html.lower()
    assert "http://" not in html and "https://" not in html
    assert not _EXTERNAL.search(html)
    assert "@import" not in html and "url(" not in html


def test_html_report_is_self_contained_with_charts(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain)
    html = render_html(build_report(chain))
    _assert_self_contained(html)
    assert html.count("<svg") == 2
    assert 'aria-label="divergence by mechanism"' in html
    assert 'aria-label="agreement over time"' in html
    assert "credit-failover" in html and "provider-differs" in html
    assert "UNVERIFIED" not in html


def test_chain_values_are_escaped(tmp_path: Path) -> None:
    from test_analysis_support import Entry

    evil = '<script>alert("x")</script>'
    chain = tmp_path / "chain.jsonl"
    # A host's role is recorded canonically (an unknown one is absent): the principal stays verbatim.
    build_chain(
        chain,
        [Entry("X", context("acme/x", "reviewer", "agentic", "anthropic", "role-dial", principal=evil), 2)],
    )
    html = render_html(build_report(chain, by=["principal"]))
    _assert_self_contained(html)
    assert "&lt;script&gt;" in html


def test_flagged_report_says_so_everywhere(tmp_path: Path) -> None:
    chain = tmp_path / "chain.jsonl"
    build_chain(chain)
    text = chain.read_text(encoding="utf-8")
    chain.write_text(text.replace("acme/other", "acme/0ther", 1), encoding="utf-8")
    html = render_html(build_report(chain, allow_unverified=True))
    _assert_self_contained(html)
    assert html.count('class="flag"') == 2
    assert html.count("[UNVERIFIED]") >= 10


def test_time_bounds() -> None:
    assert parse_bound("2026-09-01") == 1_788_220_800 * 10**9
    assert parse_bound("2026-09-01", upper=True) == (1_788_220_800 + 86_400) * 10**9
    assert parse_bound("2026-09-01T02:00:00+02:00") == parse_bound("2026-09-01T00:00:00Z")
    assert parse_bound("2026-09-01T00:00:00") == parse_bound("2026-09-01T00:00:00Z")
    assert format_ns(1_788_220_800 * 10**9 + 5) == "2026-09-01T00:00:00.000000005Z"
    window = TimeWindow.parse("2026-09-01", "2026-09-01")
    assert window.contains(parse_bound("2026-09-01T23:59:59Z"))
    assert not window.contains(parse_bound("2026-09-02T00:00:00Z"))


def test_control_and_bidi_characters_of_chain_values_are_escaped_in_the_html(tmp_path: Path) -> None:
    # html.escape leaves them: an escape sequence or NUL went into the file raw, and a right-to-left
    # override reversed the text shown after it in its cell.
    from test_analysis_support import SCENARIO, append_observations

    chain = tmp_path / "chain.jsonl"
    hostile = {"route_shadow.principal_id": "evil\x1b[2J\x00\u202etxt.exe"}
    append_observations(chain, [(SCENARIO[0].context, hostile)])
    html = render_html(build_report(chain, by=["principal"]))
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202e]", html)
    assert "evil\\x1b[2J\\x00\\u202etxt.exe" in html
