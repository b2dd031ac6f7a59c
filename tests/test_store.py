"""RoutingPolicyStore: revisions, the order-independent hash, history, diff (ADR-0139 D5)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_route_shadow.core import (
    EMPTY_SET_HASH,
    LegacyRoute,
    PolicySnapshot,
    ReasonCode,
    RouteContext,
    RoutingPolicy,
    explain,
    policy_set_hash,
)
from otel_route_shadow.store import (
    CURRENT_FILE,
    HISTORY_DIR,
    InvalidPolicySetError,
    RevisionCorruptError,
    RevisionNotFoundError,
    RoutingPolicyStore,
    SnapshotLoad,
    decode_snapshot,
    revision_file_name,
)


def _policy(pid: str, **fields: Any) -> RoutingPolicy:
    return RoutingPolicy.model_validate({"id": pid, **fields})


def _set_a() -> list[RoutingPolicy]:
    return [
        _policy("reviewers-on-glm", match={"roles": ["reviewer"]}, action={"provider_lock": "zai-harness"}),
        _policy(
            "web-opus",
            priority=5,
            match={"repo_ids": ["acme/web"], "roles": ["planner", "implementer"]},
            action={"requirement_map": {"high-reasoning": "claude-opus-4-1"}},
        ),
        _policy("triage", match={"principal_ids": ["triage_honeypot"]}, enabled=False),
    ]


def _sha256_of_policies_array(path: Path) -> str:
    """The recipe in docs/policy-store.md, with nothing but the standard library."""
    document = json.loads(path.read_text("utf-8"))
    encoded = json.dumps(document["policies"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def test_a_store_never_written_is_absent_and_resolves_normally(tmp_path: Path) -> None:
    load = RoutingPolicyStore(tmp_path / "store").load()
    assert load.state == "absent"
    assert load.snapshot == PolicySnapshot()
    assert (load.revision, load.content_hash, load.available, load.problem) == (0, EMPTY_SET_HASH, True, None)


def test_an_empty_existing_directory_is_absent(tmp_path: Path) -> None:
    assert RoutingPolicyStore(tmp_path).load().state == "absent"


def test_save_then_load_round_trips_with_revision_and_hash(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path / "store")
    result = store.save(_set_a())
    assert isinstance(result, SnapshotLoad)
    assert (result.state, result.revision, result.created, result.policy_count) == ("ok", 1, True, 3)
    assert result.content_hash == policy_set_hash(_set_a())
    load = RoutingPolicyStore(tmp_path / "store").load()
    assert (load.state, load.revision, load.content_hash) == ("ok", 1, result.content_hash)
    assert {p.id for p in load.snapshot.policies} == {"reviewers-on-glm", "web-opus", "triage"}
    assert load.snapshot.available
    assert load.saved_at == result.saved_at


def test_the_stored_hash_is_recomputable_from_the_file_alone(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    result = store.save(_set_a())
    assert _sha256_of_policies_array(tmp_path / CURRENT_FILE) == result.content_hash
    assert _sha256_of_policies_array(tmp_path / HISTORY_DIR / revision_file_name(1)) == result.content_hash


def test_the_same_set_in_any_order_has_the_same_hash_and_saves_no_new_revision(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    first = store.save(_set_a())
    again = store.save(list(reversed(_set_a())))
    assert again.content_hash == first.content_hash
    assert (again.revision, again.created) == (1, False)
    assert sorted(p.name for p in (tmp_path / HISTORY_DIR).iterdir()) == [revision_file_name(1)]


def test_revisions_only_grow_and_every_revision_is_kept(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    sets = [_set_a(), _set_a()[:1], _set_a()[1:], []]
    results = [store.save(policies) for policies in sets]
    assert [r.revision for r in results] == [1, 2, 3, 4]
    for result, policies in zip(results, sets, strict=True):
        replayed = store.revision(result.revision)
        assert replayed.content_hash == policy_set_hash(policies) == result.content_hash
        assert replayed.revision == result.revision
    assert store.load().revision == 4
    assert store.load().content_hash == EMPTY_SET_HASH


def test_saving_a_set_that_was_current_before_issues_a_new_revision(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save(_set_a())
    store.save(_set_a()[:1])
    back = store.save(_set_a())
    assert (back.revision, back.created) == (3, True)
    assert store.revision(3).content_hash == store.revision(1).content_hash


def test_revision_zero_is_the_empty_set(tmp_path: Path) -> None:
    assert RoutingPolicyStore(tmp_path).revision(0) == PolicySnapshot()


def test_a_revision_that_was_never_written_is_a_clear_error(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save(_set_a())
    with pytest.raises(RevisionNotFoundError, match="revision 7 is not in the history"):
        store.revision(7)
    with pytest.raises(RevisionNotFoundError):
        store.revision(-1)


def test_a_corrupt_historical_revision_is_a_clear_error(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save(_set_a())
    store.save(_set_a()[:1])
    (tmp_path / HISTORY_DIR / revision_file_name(1)).write_text("{", "utf-8")
    with pytest.raises(RevisionCorruptError, match=r"revision 1 .* is corrupt: invalid JSON"):
        store.revision(1)
    assert store.load().state == "ok"  # revision 2 is current and intact


def test_a_history_file_holding_another_revision_is_corrupt(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save(_set_a())
    history = tmp_path / HISTORY_DIR
    (history / revision_file_name(5)).write_bytes((history / revision_file_name(1)).read_bytes())
    with pytest.raises(RevisionCorruptError, match="holds revision 1, not 5"):
        store.revision(5)


@pytest.mark.parametrize(
    ("policies", "code"),
    [
        (
            [
                _policy("a", match={"roles": ["reviewer"]}, action={"provider_lock": "zai-harness"}),
                _policy("b", match={"roles": ["reviewer"]}, action={"provider_lock": "anthropic-harness"}),
            ],
            ReasonCode.EQUAL_PRECEDENCE_CONFLICT,
        ),
        (
            [_policy("a", action={"requirement_map": {"claude-opus": "glm-5.3"}})],
            ReasonCode.LITERAL_FAMILY_MAPPED_TO_FOREIGN_MODEL,
        ),
        ([_policy("a", match={"repo_ids": ["Acme/Web"]})], ReasonCode.NON_CANONICAL_REPO_ID),
        ([_policy("a"), _policy("a", priority=1)], ReasonCode.DUPLICATE_POLICY_ID),
    ],
)
def test_save_refuses_an_invalid_set_with_its_codes_and_writes_nothing(
    tmp_path: Path, policies: list[RoutingPolicy], code: ReasonCode
) -> None:
    store = RoutingPolicyStore(tmp_path / "store")
    with pytest.raises(InvalidPolicySetError) as caught:
        store.save(policies)
    assert code in {problem.code for problem in caught.value.problems}
    assert code.value in str(caught.value)
    assert not (tmp_path / "store").exists()


def test_save_refuses_raw_garbage_with_malformed_policy(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    with pytest.raises(InvalidPolicySetError) as caught:
        store.save([{"id": "x", "priority": "high"}])  # type: ignore[list-item]
    assert {p.code for p in caught.value.problems} == {ReasonCode.MALFORMED_POLICY}
    assert store.load().state == "absent"


def test_history_lists_every_revision_and_marks_the_current_one(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save(_set_a())
    store.save(_set_a()[:2])
    entries = store.history()
    assert [(e.revision, e.state, e.current, e.policy_count) for e in entries] == [
        (1, "ok", False, 3),
        (2, "ok", True, 2),
    ]
    assert all(e.saved_at for e in entries)


def test_history_reports_missing_runs_and_corrupt_entries(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    for policies in (_set_a(), _set_a()[:1], _set_a()[1:], _set_a()[2:], []):
        store.save(policies)
    history = tmp_path / HISTORY_DIR
    (history / revision_file_name(2)).unlink()
    (history / revision_file_name(3)).unlink()
    (history / revision_file_name(4)).write_text("[]", "utf-8")
    entries = store.history()
    assert [(e.revision, e.through, e.state) for e in entries] == [
        (1, None, "ok"),
        (2, 3, "missing"),
        (4, None, "corrupt"),
        (5, None, "ok"),
    ]
    assert "expected a JSON object" in (entries[2].problem or "")


def test_a_planted_huge_revision_number_does_not_blow_up_history(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save(_set_a())
    (tmp_path / HISTORY_DIR / "9999999999999.json").write_text("{}", "utf-8")
    entries = store.history()
    assert [(e.revision, e.through, e.state) for e in entries] == [
        (1, None, "ok"),
        (2, 9999999999998, "missing"),
        (9999999999999, None, "corrupt"),
    ]


def test_diff_names_added_removed_and_changed_fields(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path)
    store.save(_set_a())
    changed = [
        _policy(
            "reviewers-on-glm", match={"roles": ["reviewer"]}, action={"provider_lock": "anthropic-harness"}
        ),
        _policy(
            "web-opus",
            priority=7,
            match={"repo_ids": ["acme/web"], "roles": ["planner"]},
            action={"requirement_map": {"high-reasoning": "claude-opus-4-1", "fast": "claude-haiku-4"}},
        ),
        _policy("new-one", match={"request_faces": ["one-shot"]}),
    ]
    store.save(changed)
    diff = store.diff(1, 2)
    assert (diff.from_revision, diff.to_revision) == (1, 2)
    assert diff.added == ("new-one",)
    assert diff.removed == ("triage",)
    fields = {c.policy_id: [(f.path, f.before, f.after) for f in c.fields] for c in diff.changed}
    assert fields == {
        "reviewers-on-glm": [("action.provider_lock", "zai-harness", "anthropic-harness")],
        "web-opus": [
            ("action.requirement_map.fast", None, "claude-haiku-4"),
            ("match.roles", ["implementer", "planner"], ["planner"]),
            ("priority", 5, 7),
        ],
    }
    assert store.diff(2, 2).identical
    assert store.diff(0, 1).added == ("reviewers-on-glm", "triage", "web-opus")


def test_an_unavailable_snapshot_makes_explain_hold(tmp_path: Path) -> None:
    from otel_route_shadow.core import LegacyRoute, RouteContext

    store = RoutingPolicyStore(tmp_path)
    store.save(_set_a())
    (tmp_path / CURRENT_FILE).write_text("{", "utf-8")
    load = store.load()
    assert (load.state, load.revision, load.available, load.snapshot.policies) == ("corrupt", 0, False, ())
    context = RouteContext(
        role="reviewer",
        request_face="agentic",
        legacy_route=LegacyRoute(provider="anthropic", transport="harness-direct", mechanism="role-dial"),
    )
    decision = explain(context, load.snapshot)
    assert (decision.outcome, decision.reason) == ("held", "snapshot-unavailable")


_ROLE = st.sampled_from(["planner", "implementer", "reviewer", "triager", "summarizer"])
_POLICY = st.builds(
    lambda pid, roles, priority, lock, enabled: _policy(
        pid,
        priority=priority,
        enabled=enabled,
        match={"roles": roles, "principal_ids": [pid]},
        action={"provider_lock": lock},
    ),
    st.text(alphabet="abcdefghij0123456789", min_size=1, max_size=8),
    st.lists(_ROLE, max_size=3),
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
    st.sampled_from([None, "zai-harness", "anthropic-harness"]),
    st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_POLICY, max_size=6, unique_by=lambda p: p.id), st.randoms())
def test_the_stored_hash_is_order_independent_and_survives_a_round_trip(
    policies: list[RoutingPolicy], rnd: Any
) -> None:
    from otel_route_shadow.store import encode_snapshot

    shuffled = list(policies)
    rnd.shuffle(shuffled)
    data_a, hash_a = encode_snapshot(1, "2026-01-01T00:00:00Z", tuple(policies))
    data_b, hash_b = encode_snapshot(1, "2026-01-01T00:00:00Z", tuple(shuffled))
    assert hash_a == hash_b == policy_set_hash(policies)
    assert data_a == data_b  # the stored form is canonical, not insertion-ordered
    assert decode_snapshot(data_a).content_hash == hash_a


@settings(max_examples=60, deadline=None)
@given(_POLICY, st.sampled_from(["priority", "enabled", "roles", "lock", "faces"]))
def test_any_field_change_changes_the_hash(policy: RoutingPolicy, field: str) -> None:
    dump = policy.model_dump(mode="json")
    if field == "priority":
        dump["priority"] = dump["priority"] + 1 if dump["priority"] < 2**31 - 1 else 0
    elif field == "enabled":
        dump["enabled"] = not dump["enabled"]
    elif field == "roles":
        dump["match"]["roles"] = [] if dump["match"]["roles"] else ["planner"]
    elif field == "lock":
        dump["action"]["provider_lock"] = "zai-harness" if dump["action"]["provider_lock"] is None else None
    else:
        dump["match"]["request_faces"] = ["agentic"]
    assert policy_set_hash([RoutingPolicy.model_validate(dump)]) != policy_set_hash([policy])


def _covered_set() -> list[RoutingPolicy]:
    """``narrow`` never decides: ``wide`` names the same role with a higher priority."""
    return [
        _policy("wide", priority=5, match={"roles": ["reviewer", "planner"]}),
        _policy("narrow", priority=1, match={"roles": ["reviewer"]}, action={"provider_lock": "zai-harness"}),
    ]


def test_save_accepts_an_unreachable_policy_and_returns_the_warning(tmp_path: Path) -> None:
    result = RoutingPolicyStore(tmp_path / "store").save(_covered_set())
    assert result.created and result.revision == 1
    assert [(p.code, p.policy_id, p.related) for p in result.warnings] == [
        (ReasonCode.UNREACHABLE_POLICY, "narrow", ("wide",))
    ]
    assert result.to_dict()["warnings"][0]["code"] == "unreachable-policy"


def test_a_strict_save_refuses_an_unreachable_policy_and_writes_nothing(tmp_path: Path) -> None:
    store = RoutingPolicyStore(tmp_path / "store")
    with pytest.raises(InvalidPolicySetError) as caught:
        store.save(_covered_set(), strict=True)
    assert [p.code for p in caught.value.problems] == [ReasonCode.UNREACHABLE_POLICY]
    assert not (tmp_path / "store").exists()


def _rewrite_both_copies(root: Path, policies: list[dict[str, Any]]) -> None:
    from otel_route_shadow.core import canonical_json, digest

    for path in (root / CURRENT_FILE, root / HISTORY_DIR / revision_file_name(1)):
        document = json.loads(path.read_text("utf-8"))
        document["policies"] = sorted(policies, key=canonical_json)
        document["content_hash"] = digest(document["policies"])
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", "utf-8")


def test_a_load_trusts_the_snapshot_by_its_hash_and_does_not_revalidate_the_set(tmp_path: Path) -> None:
    """Issue 16: every spawn re-validated the whole set (58 s at 8,000 policies). A load now checks
    the hash and the history copy; a set that only a double hand edit could produce (a conflict,
    both copies rewritten with the hash recomputed) loads, and the resolver holds it as a conflict."""
    root = tmp_path / "store"
    RoutingPolicyStore(root).save([_policy("a", match={"roles": ["reviewer"]})])
    conflicting = [
        _policy("a", match={"roles": ["reviewer"]}).model_dump(mode="json"),
        _policy("b", match={"roles": ["reviewer"]}, action={"provider_lock": "zai-harness"}).model_dump(
            mode="json"
        ),
    ]
    _rewrite_both_copies(root, conflicting)
    load = RoutingPolicyStore(root).load()
    assert load.state == "ok" and load.policy_count == 2
    context = RouteContext(
        role="reviewer",
        request_face="agentic",
        legacy_route=LegacyRoute(provider="anthropic", transport="harness-direct", mechanism="role-dial"),
    )
    decision = explain(context, load.snapshot)
    assert (decision.reason, decision.tied_policies) == ("policy-conflict", ("a", "b"))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(_set_a() + _covered_set()), unique_by=lambda p: p.id))
def test_what_save_returns_is_what_a_load_of_the_written_file_returns(policies: list[RoutingPolicy]) -> None:
    """save() no longer decodes what it wrote: the snapshot it returns must equal a fresh load's."""
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        saved = RoutingPolicyStore(root).save(policies)
        loaded = RoutingPolicyStore(root).load()
        assert loaded.state == "ok" and loaded.snapshot == saved.snapshot
        document = json.loads((Path(root) / CURRENT_FILE).read_text("utf-8"))
        assert list(document) == ["content_hash", "format", "policies", "revision", "saved_at"]
        assert document["content_hash"] == policy_set_hash(policies) == saved.content_hash


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(st.characters(codec="utf-8"), max_size=6),
        st.one_of(
            st.text(st.characters(codec="utf-8"), max_size=12),
            st.integers(-(2**53), 2**53),
            st.booleans(),
            st.none(),
            st.lists(st.text(st.characters(codec="utf-8"), max_size=8), max_size=3),
        ),
        max_size=5,
    )
)
def test_the_fast_snapshot_reader_encodes_exactly_like_the_canonical_encoder(value: dict[str, Any]) -> None:
    """The load's fast path re-encodes policies with orjson; it must agree with canonical_json."""
    import orjson

    from otel_route_shadow.core import canonical_json

    assert orjson.dumps(value, option=orjson.OPT_SORT_KEYS) == canonical_json(value)


def test_a_snapshot_in_the_older_indented_layout_still_loads(tmp_path: Path) -> None:
    """Files written before the one-policy-per-line layout take the strict path and verify."""
    root = tmp_path / "store"
    saved = RoutingPolicyStore(root).save(_set_a())
    for path in (root / CURRENT_FILE, root / HISTORY_DIR / revision_file_name(1)):
        document = json.loads(path.read_text("utf-8"))
        path.write_text(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n", "utf-8")
    load = RoutingPolicyStore(root).load()
    assert load.state == "ok" and load.snapshot == saved.snapshot
