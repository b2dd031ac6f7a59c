"""The main job, as a user runs it: `otel-route-shadow demo`."""

from __future__ import annotations

import json
import re
import shlex
import stat
from pathlib import Path

import pytest

from otel_route_shadow.cli import main
from otel_route_shadow.shadow.attributes import ATTRIBUTES

README = Path(__file__).resolve().parents[2] / "docs" / "instrumenting.md"


def test_demo_writes_a_verified_chain_and_summarises_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--out", str(tmp_path), "--spawns", "80", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == 80
    assert summary["chain"]["intact"] is True and summary["chain"]["records"] == 80
    assert set(summary["spawns_by_mechanism"]) == {
        "role-dial",
        "repo-override",
        "fleet-ratchet",
        "credit-failover",
    }
    assert 0 < summary["agreement_rate"] < 1
    assert summary["bypass_spawns"] > 0
    # The credit failover engages for a quarter of the run: implement (claude-opus) lands on GLM.
    # pr_unstick asks for claude-opus too, and its z.ai dial defies it on every spawn.
    assert summary["findings"]["requirement-defied"] > 0
    assert set(summary["spawns_by_mechanism_class"]) == {"policy-gap", "transient"}
    assert summary["claim_mismatches"] == 0  # the demo's extractor tells the truth
    # A second run continues the same chain and spends no policy revision.
    assert main(["demo", "--out", str(tmp_path), "--spawns", "20", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["records"] == 20 and again["chain"]["records"] == 100
    assert again["snapshot"] == summary["snapshot"]


def test_demo_prints_spans_and_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path), "--spawns", "12"]) == 0
    out = capsys.readouterr().out
    assert out.count("span invoke_agent") + out.count("span chat") == 12
    assert "agreement" in out and "bypass traffic" in out and "intact" in out


def test_demo_signs_its_checkpoints_with_a_key_it_generates_and_prints_the_auditors_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "demo"
    assert main(["demo", "--out", str(out_dir), "--spawns", "12", "--quiet"]) == 0
    out = capsys.readouterr().out
    key_file, vkey_file = out_dir / "log.key", out_dir / "log.vkey"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    secret = key_file.read_text().strip()
    vkey = vkey_file.read_text().strip()
    material = secret.split("+", 4)[4]  # PRIVATE+KEY+name+hash+material: the material may itself hold "+"
    assert secret not in out and material not in out  # the private key is never printed
    assert f"log key            {vkey} " in out
    command = re.search(r"auditor's check    (otel-route-shadow verify .*)", out)
    assert command is not None
    assert command.group(1) == f"otel-route-shadow verify {out_dir / 'chain.jsonl'} --key {vkey_file}"
    assert main(shlex.split(command.group(1))[1:]) == 0
    assert "consistent with 1 checkpoint(s), largest size 12" in capsys.readouterr().out
    # A second run signs with the same key: the auditor's line still holds, over both checkpoints.
    assert main(["demo", "--out", str(out_dir), "--spawns", "5", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["auditor"] == {"verifier_key": vkey, "verify": command.group(1)}
    assert main(shlex.split(command.group(1))[1:]) == 0
    assert "consistent with 2 checkpoint(s), largest size 17" in capsys.readouterr().out


def test_the_auditors_check_runs_as_printed_from_a_folder_with_a_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The line was printed unquoted: pasted into a shell, "verify" got two arguments and failed.
    assert main(["demo", "--out", str(tmp_path / "route shadow"), "--spawns", "3", "--quiet"]) == 0
    command = re.search(r"auditor's check    otel-route-shadow (verify .*)", capsys.readouterr().out)
    assert command is not None and main(shlex.split(command.group(1))) == 0


def test_the_demo_signs_with_the_key_the_environment_names_not_one_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A host that named its signing key (and so its origin) got checkpoints signed with the demo's own
    key instead, under another name than its origin: the plugin then wrote them unsigned."""
    key = tmp_path / "host.key"
    assert main(["key", "generate", "--name", "example.com/route-shadow/host-a", "--out", str(key)]) == 0
    vkey = capsys.readouterr().out.split()[-1]
    monkeypatch.setenv("OTEL_PYTHON_ROUTE_SHADOW_SIGNING_KEY", str(key))
    out_dir = tmp_path / "demo"
    assert main(["demo", "--out", str(out_dir), "--spawns", "6", "--quiet"]) == 0
    capsys.readouterr()
    assert not (out_dir / "log.key").exists()
    assert (out_dir / "log.vkey").read_text().strip() == vkey
    assert main(["verify", str(out_dir / "chain.jsonl"), "--key", vkey]) == 0
    assert "consistent with 1 checkpoint(s), largest size 6" in capsys.readouterr().out


def test_demo_refuses_a_folder_whose_chain_has_no_demo_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "chain.jsonl").write_text("")
    assert main(["demo", "--out", str(tmp_path), "--spawns", "3", "--quiet"]) == 2
    assert "without the demo's signing key" in capsys.readouterr().err
    assert not (tmp_path / "log.key").exists()


def test_demo_refuses_an_invalid_policy_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"policies": [{"id": "a", "match": {"repo_ids": ["Not/Canonical"]}}]}))
    assert main(["demo", "--out", str(tmp_path / "out"), "--policies", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "non-canonical-repo-id" in err and "Traceback" not in err


def test_demo_refuses_a_missing_policy_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path), "--policies", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_readme_documents_every_span_attribute_once() -> None:
    text = README.read_text()
    documented = re.findall(r"^\| `(route_shadow\.[a-z_.]+)` \|", text, re.MULTILINE)
    assert sorted(documented) == sorted(spec.key for spec in ATTRIBUTES)
