"""Chains written before issue 15 (no derived-claim flag, raw role, no findings, part of the
decision) still verify and report: the chain format did not change, only the payload grew keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_route_shadow.chain import DecisionChain
from otel_route_shadow.cli import main
from otel_route_shadow.core import PolicySnapshot
from otel_route_shadow.demo import factory
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow import observe, record_payload

NEW_KEYS = {  # what issue 15 added to a record: a record without them is what an older chain holds
    attr.HOST_ROLE,
    attr.CLAIM_MISMATCH,
    attr.FINDING,
    attr.FORBID_DIRECT_BYPASS,
    attr.TIED_POLICIES,
    attr.DECISION_TRANSPORT,
    attr.REPO_IDENTITY_VERSION,
    attr.ACCOUNTS,
    attr.ACCOUNTS_OMITTED,
}


def _old_style_chain(path: Path) -> None:
    log = DecisionChain(path)
    settings = factory.FactorySettings()
    for number, job in enumerate(factory.plan_jobs(24, settings)):
        record = observe("seam", factory.context_for(job, "agentic"), PolicySnapshot())
        old = {k: v for k, v in record.attributes.items() if k not in NEW_KEYS}
        old[attr.ROLE] = job.loop.role  # the raw host role, as records carried it then
        old[attr.AGREED] = True  # no findings then
        old.pop(attr.DIVERGENCE, None)
        log.append(record_payload(number + 1, number + 1, 1_700_000_000_000_000_000 + number, old))


def test_an_old_chain_still_verifies_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chain = tmp_path / "chain.jsonl"
    _old_style_chain(chain)
    assert main(["verify", str(chain)]) == 0
    assert "intact" in capsys.readouterr().out
    assert main(["report", str(chain), "--by", "role,principal,mechanism"]) == 0
    text = capsys.readouterr().out
    assert "spawns 24" in text and "adr_review" in text
    assert main(["report", str(chain), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "route-shadow-report"
