"""``explain --store``: a hand-edited snapshot holds every decision with snapshot-unavailable, an
absent store resolves through legacy compatibility, and repair + save resolves again."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from otel_route_shadow.cli import main
from otel_route_shadow.core import canonical_json
from otel_route_shadow.store import CURRENT_FILE

POLICIES = {
    "policies": [
        {
            "id": "project-x-on-zai",
            "match": {"repo_ids": ["acme/project-x"]},
            "action": {"provider_lock": "zai-harness", "requirement_map": {"long-context": "glm-4.6"}},
        }
    ]
}
CONTEXT = {
    "repo": "acme/project-x",
    "role": "implementer",
    "request_face": "agentic",
    "accounts": [
        {"id": "anthropic-default", "provider": "anthropic", "state": "available"},
        {"id": "zai-default", "provider": "zai", "state": "available"},
    ],
    "legacy_route": {
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "account": "anthropic-default",
        "transport": "harness-direct",
        "mechanism": "role-dial",
    },
}


def _explain(
    capsys: pytest.CaptureFixture[str], store: Path, context: Path
) -> tuple[int, dict[str, object], str]:
    code = main(["explain", "--store", str(store), "--context", str(context)])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out else {}), err


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    policies = tmp_path / "policies.json"
    policies.write_text(json.dumps(POLICIES), "utf-8")
    context = tmp_path / "context.json"
    context.write_text(json.dumps(CONTEXT), "utf-8")
    return tmp_path / "store", policies, context


def test_explain_against_a_store_through_its_whole_life(
    capsys: pytest.CaptureFixture[str], files: tuple[Path, Path, Path]
) -> None:
    store, policies, context = files

    code, decision, err = _explain(capsys, store, context)
    assert code == 0
    assert (decision["outcome"], decision["policy_source"]) == ("selected", "legacy-compatibility")
    assert decision["snapshot_revision"] == 0
    assert "no policy snapshot saved" in err

    assert main(["policy", "save", str(policies), "--store", str(store)]) == 0
    capsys.readouterr()
    code, decision, _ = _explain(capsys, store, context)
    assert code == 0
    assert (decision["outcome"], decision["policy_id"], decision["provider"]) == (
        "selected",
        "project-x-on-zai",
        "zai",
    )
    assert decision["snapshot_revision"] == 1

    # A hand edit that keeps the policy valid but does not update the hash: held, never routed.
    current = store / CURRENT_FILE
    current.write_text(current.read_text("utf-8").replace('"zai-harness"', '"anthropic-harness"'), "utf-8")
    code, decision, err = _explain(capsys, store, context)
    assert code == 0
    assert (decision["outcome"], decision["reason"]) == ("held", "snapshot-unavailable")
    assert (decision["snapshot_revision"], decision["provider"]) == (0, None)
    assert "corrupt" in err and "every decision holds with snapshot-unavailable" in err

    assert main(["policy", "save", str(policies), "--store", str(store)]) == 1
    assert main(["policy", "repair", "--store", str(store)]) == 0
    capsys.readouterr()
    code, decision, _ = _explain(capsys, store, context)
    assert (code, decision["policy_source"], decision["snapshot_revision"]) == (0, "legacy-compatibility", 0)

    assert main(["policy", "save", str(policies), "--store", str(store)]) == 0
    capsys.readouterr()
    code, decision, _ = _explain(capsys, store, context)
    assert (code, decision["policy_id"], decision["snapshot_revision"]) == (0, "project-x-on-zai", 2)


def test_explain_holds_on_a_hand_edit_that_recomputes_the_hash(
    capsys: pytest.CaptureFixture[str], files: tuple[Path, Path, Path]
) -> None:
    store, policies, context = files
    assert main(["policy", "save", str(policies), "--store", str(store)]) == 0
    document = json.loads((store / CURRENT_FILE).read_text("utf-8"))
    document["policies"][0]["action"]["provider_lock"] = "anthropic-harness"
    document["policies"][0]["action"]["requirement_map"] = {}
    document["content_hash"] = hashlib.sha256(canonical_json(document["policies"])).hexdigest()
    (store / CURRENT_FILE).write_text(json.dumps(document), "utf-8")
    capsys.readouterr()
    code, decision, err = _explain(capsys, store, context)
    assert (code, decision["outcome"], decision["reason"]) == (0, "held", "snapshot-unavailable")
    assert "history's copy of its own revision 1" in err


def test_explain_with_a_store_path_that_is_a_file_exits_2(
    capsys: pytest.CaptureFixture[str], files: tuple[Path, Path, Path]
) -> None:
    store, _, context = files
    store.write_text("x", "utf-8")
    code, decision, err = _explain(capsys, store, context)
    assert (code, decision) == (2, {})
    assert err.count("\n") == 1 and "not a directory" in err


def test_the_bundled_corrupt_store_example_holds(capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[1] / "examples"
    if not (root / "corrupt-store").is_dir():
        pytest.skip("examples/corrupt-store not present")
    code, decision, _ = _explain(
        capsys, root / "corrupt-store", root / "contexts" / "selected-managed-policy.json"
    )
    assert (code, decision["outcome"], decision["reason"]) == (0, "held", "snapshot-unavailable")
