"""The fleet: one report over many hosts' logs. Each log is verified against its newest checkpoint
before a single figure is used; a log that does not verify is named, left out of every figure, and
the exit status says so; the fleet's figures are the sums of its healthy logs' own reports."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_analysis_support import RECORDED_POLICIES, SCENARIO, build_chain, rewrite_chain, snapshot_of

from otel_route_shadow.analysis import (
    EXCLUDED,
    INCLUDED,
    FleetError,
    build_fleet_report,
    build_report,
    cited_loader,
    fleet_replay,
    replay,
)
from otel_route_shadow.cli import main
from otel_route_shadow.cli.exit_codes import EXIT_FINDING, EXIT_OK, EXIT_USAGE
from otel_route_shadow.core import RoutingPolicy
from otel_route_shadow.logstore import Checkpointer, tlog_dir
from otel_route_shadow.store import RoutingPolicyStore
from otel_route_shadow.tlog import Signer

HOUR = 3_600 * 10**9


def make_log(
    folder: Path,
    name: str,
    origin: str,
    entries: Any = SCENARIO,
    start_ns: int = 1_790_000_000 * 10**9,
    duration: Any = None,
    snapshot: Any = None,
) -> tuple[Path, Signer]:
    """A chain of ``entries`` under ``folder/name.jsonl`` with a signed checkpoint over all of it
    (``duration``, ``snapshot``: see ``build_chain``)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    build_chain(path, entries, snapshot, start_ns=start_ns, duration=duration)
    signer = Signer.generate(origin)
    assert Checkpointer(str(path), origin, signer).checkpoint() is not None
    return path, signer


@pytest.fixture
def hosts(tmp_path: Path) -> tuple[Path, list[Path], list[str]]:
    """Three hosts' logs in one folder: alpha and beta healthy, gamma tampered after its checkpoint."""
    folder = tmp_path / "fleet"
    alpha, a = make_log(folder, "alpha", "alpha.example/route-shadow")
    beta, b = make_log(
        folder, "beta", "beta.example/route-shadow", SCENARIO[1:4], start_ns=1_790_500_000 * 10**9
    )
    gamma, c = make_log(folder, "gamma", "gamma.example/route-shadow", SCENARIO[2:])
    lines = gamma.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b"acme/other", b"acme/OTHER", 1)
    gamma.write_bytes(b"\n".join(lines))
    keys = [str(signer.verifier()) for signer in (a, b, c)]
    return folder, [alpha, beta, gamma], keys


FIGURES = ("spawns", "agreed", "diverged", "managed", "bypass")


def _sum_rows(rows: list[dict[str, Any]], name: str) -> dict[Any, dict[str, int]]:
    out: dict[Any, dict[str, int]] = {}
    for row in rows:
        key = json.dumps(row["key"] if "key" in row else row[name], sort_keys=True)
        into = out.setdefault(key, dict.fromkeys(FIGURES, 0))
        for figure in FIGURES:
            into[figure] += row[figure]
    return out


def _counts(data: dict[str, Any]) -> dict[str, Any]:
    """The counted figures of a report's JSON form."""
    noise = data["noise"]
    return {
        "totals": {figure: data["totals"][figure] for figure in FIGURES},
        "outcomes": data["outcomes"],
        "divergences": data["divergences"],
        "policy_sources": data["policy_sources"],
        "held_reasons": data["held_reasons"],
        "rejected_reasons": data["rejected_reasons"],
        "mechanisms": _sum_rows(data["mechanisms"], "mechanism"),
        "repo": _sum_rows(data["groups"]["repo"], "repo"),
        "role": _sum_rows(data["groups"]["role"], "role"),
        "noise": {
            part: (noise[part]["spawns"], noise[part]["flaps"], noise[part]["transitions"])
            for part in ("total", "stable", "flapping")
        },
        "gaps": {
            k: data["policy_gaps"]["total"][k] for k in ("spawns", "persistent", "policy_gap", "transient")
        },
        "served": {state: data["served"][state] for state in ("same", "differs", "unknown")},
        "cohorts": {
            json.dumps([row["mechanism"], row["route"]], sort_keys=True): {
                "spawns": row["spawns"],
                "agreed": row["agreed"],
                "shadow_errors": row["shadow_errors"],
            }
            for row in data["cohorts"]["rows"]
        },
    }


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, dict):
        return {
            key: _add(
                a.get(key, 0 if not isinstance(b.get(key), dict) else {}),
                b.get(key, 0 if not isinstance(a.get(key), dict) else {}),
            )
            for key in a.keys() | b.keys()
        }
    if isinstance(a, tuple):
        return tuple(x + y for x, y in zip(a, b, strict=True))
    return a + b


def test_fleet_figures_are_the_sum_of_the_healthy_hosts_and_the_tampered_one_is_excluded(
    hosts: tuple[Path, list[Path], list[str]],
) -> None:
    from otel_route_shadow.tlog import Verifier

    folder, (alpha, beta, _gamma), keys = hosts
    fleet = build_fleet_report([str(folder)], verifiers=[Verifier.parse(k) for k in keys])
    assert fleet.fleet is not None
    status = {Path(log.path).name: log for log in fleet.fleet.logs}
    assert status["alpha.jsonl"].status == INCLUDED and status["beta.jsonl"].status == INCLUDED
    assert status["gamma.jsonl"].status == EXCLUDED
    assert "does not verify" in (status["gamma.jsonl"].reason or "")
    singles = [build_report(path).as_dict() for path in (alpha, beta)]
    data = fleet.as_dict()
    assert _counts(data) == _add(_counts(singles[0]), _counts(singles[1]))
    hosts_rows = {row["key"]["host"]: row["spawns"] for row in data["groups"]["host"]}
    assert hosts_rows == {"alpha.example/route-shadow": 17, "beta.example/route-shadow": 10}
    assert data["fleet"]["excluded"] == 1 and data["chain"]["records"] == 27


def test_the_report_command_names_the_excluded_log_and_exits_with_a_finding(
    hosts: tuple[Path, list[Path], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    _folder, (alpha, beta, gamma), keys = hosts
    args = ["report", str(alpha), str(beta), str(gamma), "--json", "--no-progress"]
    for key in keys:
        args += ["--key", key]
    assert main(args) == EXIT_FINDING
    data = json.loads(capsys.readouterr().out)
    excluded = [log for log in data["fleet"]["hosts"] if log["status"] == EXCLUDED]
    assert [Path(log["path"]).name for log in excluded] == ["gamma.jsonl"]
    assert data["totals"]["spawns"] == 27
    assert (
        main(["report", str(alpha), str(beta), "--no-progress", *[arg for k in keys for arg in ("--key", k)]])
        == EXIT_OK
    )
    text = capsys.readouterr().out
    assert "alpha.example/route-shadow" in text and "beta.example/route-shadow" in text


def test_a_rehashed_copy_that_verifies_on_its_own_is_excluded_by_its_checkpoint(tmp_path: Path) -> None:
    folder = tmp_path / "fleet"
    alpha, _ = make_log(folder, "alpha", "alpha.example/route-shadow")
    forged = folder / "forged.jsonl"

    def edit(seq: int, payload: dict[str, Any]) -> dict[str, Any]:
        if seq == 2:
            payload["attributes"]["route_shadow.repo"] = "acme/forged"
        return payload

    rewrite_chain(alpha, forged, edit)
    shutil.copytree(tlog_dir(str(alpha)), tlog_dir(str(forged)))
    (Path(tlog_dir(str(alpha))) / "checkpoint").unlink()  # alpha: no checkpoint, nothing vouches for it
    report = build_fleet_report([str(folder)])
    assert report.fleet is not None
    reasons = {Path(log.path).name: log.reason or "" for log in report.fleet.excluded}
    assert "not consistent with its checkpoint" in reasons["forged.jsonl"]
    assert "no usable checkpoint" in reasons["alpha.jsonl"]
    assert report.spawns == 0


def test_two_logs_with_one_origin_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, _ = make_log(tmp_path / "a", "host", "same.example/route-shadow")
    two, _ = make_log(tmp_path / "b", "host", "same.example/route-shadow", SCENARIO[:2])
    with pytest.raises(FleetError, match="both logs of origin"):
        build_fleet_report([str(one), str(two)])
    assert main(["report", str(one), str(two), "--no-progress"]) == EXIT_USAGE
    assert "both logs of origin 'same.example/route-shadow'" in capsys.readouterr().err


def test_a_signature_by_no_given_key_excludes_the_log(tmp_path: Path) -> None:
    from otel_route_shadow.tlog import Verifier

    alpha, _ = make_log(tmp_path, "alpha", "alpha.example/route-shadow")
    stranger = Signer.generate("alpha.example/route-shadow").verifier()
    report = build_fleet_report([str(alpha)], verifiers=[Verifier.parse(str(stranger))])
    assert report.fleet is not None and report.fleet.excluded[0].reason is not None
    assert "not signed by any given key valid for its size" in report.fleet.excluded[0].reason


def test_a_log_signed_by_another_hosts_key_is_excluded_not_counted_under_the_origin_it_claims(
    tmp_path: Path,
) -> None:
    # Every host's key given, a host's key vouched for a log naming another host's origin: the
    # fleet counted it as beta's log, which beta's key never signed.
    from otel_route_shadow.logstore import LogStore
    from otel_route_shadow.tlog import parse_note, sign_note

    alpha, alpha_signer = make_log(tmp_path, "alpha", "alpha.example/route-shadow")
    beta, beta_signer = make_log(tmp_path, "beta", "beta.example/route-shadow", SCENARIO[1:4])
    published = Path(LogStore(beta).file("checkpoint"))  # beta's checkpoint, signed again by alpha's key only
    published.write_text(sign_note(parse_note(published.read_text()).text, [alpha_signer]))
    report = build_fleet_report([str(alpha), str(beta)], verifiers=[alpha_signer.verifier(), beta_signer.verifier()])
    assert report.fleet is not None
    assert [log.path for log in report.fleet.excluded] == [str(beta)]
    assert [log.path for log in report.fleet.included] == [str(alpha)]


def test_a_fleets_chain_line_names_no_head_it_does_not_have(tmp_path: Path) -> None:
    # A fleet has no one head: its line said "verified: 17 records, head None".
    make_log(tmp_path, "alpha", "alpha.example/route-shadow")
    line = build_fleet_report([str(tmp_path)]).chain.describe()
    assert line.startswith("verified: ") and "None" not in line


def test_fleet_whatif_is_the_sum_of_the_hosts_replays(hosts: tuple[Path, list[Path], list[str]]) -> None:
    folder, (alpha, beta, _gamma), _keys = hosts
    candidate = snapshot_of([], revision=7)
    fleet = fleet_replay([str(folder)], candidate).as_dict()
    singles = [replay(path, candidate).as_dict() for path in (alpha, beta)]
    for figure in ("replayed", "changed"):
        assert fleet["totals"][figure] == sum(single["totals"][figure] for single in singles)
    assert {row["key"]["host"] for row in fleet["groups"]["host"]} == {
        "alpha.example/route-shadow",
        "beta.example/route-shadow",
    }


def test_the_html_page_lists_the_hosts_and_names_the_excluded_log_escaped(
    hosts: tuple[Path, list[Path], list[str]], tmp_path: Path
) -> None:
    folder, _paths, _keys = hosts
    hostile = folder / "<b>x.jsonl"
    hostile.write_bytes(b"")
    page = tmp_path / "fleet.html"
    assert main(["report", str(folder), "--no-progress", "--html", str(page)]) == EXIT_FINDING
    html = page.read_text(encoding="utf-8")
    assert "alpha.example/route-shadow" in html and "beta.example/route-shadow" in html
    assert "EXCLUDED: " in html and "gamma.jsonl" in html
    assert "<b>x" not in html and "&lt;b&gt;x.jsonl" in html


def test_checking_the_logs_in_worker_processes_gives_the_same_fleet(
    hosts: tuple[Path, list[Path], list[str]],
) -> None:
    folder, _paths, _keys = hosts
    one = build_fleet_report([str(folder)], jobs=1).as_dict()
    two = build_fleet_report([str(folder)], jobs=2).as_dict()
    for data in (one, two):  # the checkpoint's age is the clock's
        for host in data["fleet"]["hosts"]:
            host["evidence"].pop("age_seconds")
    assert one == two


def test_divergent_decisions_name_their_host(hosts: tuple[Path, list[Path], list[str]]) -> None:
    folder, _paths, _keys = hosts
    report = build_fleet_report([str(folder)])
    examples = [example for rows in report.divergent.values() for example in rows]
    assert examples and all(example["host"].endswith(".example/route-shadow") for example in examples)
    from otel_route_shadow.cli.report_text import format_report

    assert "alpha.example/route-shadow 1" in format_report(report)


def test_the_whatif_command_over_a_fleet_names_the_excluded_log(
    hosts: tuple[Path, list[Path], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _paths, keys = hosts
    policies = str(Path(__file__).resolve().parent.parent / "examples" / "policies.json")
    args = ["whatif", str(folder), "--policies", policies, "--json", "--no-progress"]
    assert main([*args, *[arg for k in keys for arg in ("--key", k)]]) == EXIT_FINDING
    data = json.loads(capsys.readouterr().out)
    assert [Path(h["path"]).name for h in data["fleet"]["hosts"] if h["status"] == EXCLUDED] == [
        "gamma.jsonl"
    ]
    assert data["totals"]["replayed"] == 27


def test_allow_unverified_takes_one_chain_only(
    hosts: tuple[Path, list[Path], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _paths, _keys = hosts
    assert main(["report", str(folder), "--allow-unverified", "--no-progress"]) == EXIT_USAGE
    assert "--allow-unverified takes one chain" in capsys.readouterr().err


def test_a_log_whose_checkpoint_misses_the_policys_quorum_is_excluded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    from witness_support import Cosigner

    alpha, a = make_log(tmp_path / "fleet", "alpha", "alpha.example/route-shadow")
    beta, b = make_log(tmp_path / "fleet", "beta", "beta.example/route-shadow", SCENARIO[:2])
    witness = Cosigner("witness.example/w0")
    target = Path(tlog_dir(str(alpha))) / "checkpoint"
    note = target.read_text(encoding="utf-8")
    target.write_text(
        note + witness.line(note.split("\n\n", 1)[0] + "\n", int(time.time()) - 60), encoding="utf-8"
    )
    policy = tmp_path / "fleet.policy"
    policy.write_text(
        f"log {a.verifier()}\nlog {b.verifier()}\nwitness w0 {witness.verifier}\nquorum w0\n",
        encoding="utf-8",
    )
    code = main(["report", str(alpha), str(beta), "--witness-policy", str(policy), "--json", "--no-progress"])
    assert code == EXIT_FINDING
    data = json.loads(capsys.readouterr().out)
    status = {Path(h["path"]).name: h for h in data["fleet"]["hosts"]}
    assert status["alpha.jsonl"]["status"] == INCLUDED
    assert status["beta.jsonl"]["status"] == EXCLUDED
    assert "quorum" in status["beta.jsonl"]["reason"]
    assert data["totals"]["spawns"] == 17


def test_a_fleet_report_with_a_store_sums_its_logs_policy_usage(tmp_path: Path) -> None:
    store = tmp_path / "store"
    saved = RoutingPolicyStore(store).save([RoutingPolicy.model_validate(p) for p in RECORDED_POLICIES])
    snapshot = cited_loader(store)(saved.revision)
    folder = tmp_path / "fleet"
    alpha, _ = make_log(folder, "alpha", "alpha.example/rs", SCENARIO, snapshot=snapshot)
    beta, _ = make_log(folder, "beta", "beta.example/rs", SCENARIO[1:4], snapshot=snapshot)
    fleet = build_fleet_report([str(folder)], cited_loader=cited_loader(store), jobs=2)
    singles = [build_report(path, cited_loader=cited_loader(store)) for path in (alpha, beta)]
    (table,) = fleet.usage
    assert table.spawns == sum(single.usage[0].spawns for single in singles) == fleet.spawns
    rows = {row["policy_id"]: row for row in table.as_dict()["policies"]}
    for single in singles:
        for row in single.usage[0].as_dict()["policies"]:
            rows[row["policy_id"]]["decided"] -= row["decided"]
    assert all(row["decided"] == 0 for row in rows.values())


def _without_fleet(report: Any) -> dict[str, Any]:
    data = report.as_dict()
    data.pop("fleet")
    return dict(data)


def test_a_log_counted_in_the_same_read_as_its_leaves_gives_the_figures_of_one_checked_first(
    hosts: tuple[Path, list[Path], list[str]],
) -> None:
    """With keys each healthy log is hashed as it is counted (one read); without, its chain is checked
    as a whole, then counted: the same figures, and the tampered log excluded either way."""
    from otel_route_shadow.tlog import Verifier

    folder, _paths, keys = hosts
    one_read = build_fleet_report([str(folder)], verifiers=[Verifier.parse(k) for k in keys])
    checked_first = build_fleet_report([str(folder)])
    assert _without_fleet(one_read) == _without_fleet(checked_first)
    assert one_read.fleet is not None and len(one_read.fleet.excluded) == 1
    two_jobs = build_fleet_report([str(folder)], verifiers=[Verifier.parse(k) for k in keys], jobs=2)
    assert _without_fleet(two_jobs) == _without_fleet(one_read)


def test_a_broken_line_after_the_checkpoint_excludes_the_log_counted_in_one_read(tmp_path: Path) -> None:
    """The lines after an authenticated checkpoint are checked, not only counted (as ``verify --key``):
    a log with any is checked as a whole, and a broken one there excludes it."""
    folder = tmp_path / "fleet"
    alpha, signer = make_log(folder, "alpha", "alpha.example/route-shadow")
    build_chain(alpha, [SCENARIO[2]], start_ns=1_791_000_000 * 10**9)  # after the checkpoint
    healthy = build_fleet_report([str(folder)], verifiers=[signer.verifier()])
    assert healthy.fleet is not None and healthy.fleet.logs[0].status == INCLUDED
    assert healthy.fleet.logs[0].records == 17 + SCENARIO[2].count and healthy.spawns == 17
    lines = alpha.read_bytes().split(b"\n")
    assert b"acme/other" in lines[-2]
    lines[-2] = lines[-2].replace(b"acme/other", b"acme/OTHER", 1)
    alpha.write_bytes(b"\n".join(lines))
    broken = build_fleet_report([str(folder)], verifiers=[signer.verifier()])
    assert broken.fleet is not None and broken.fleet.logs[0].status == EXCLUDED
    assert "does not verify" in (broken.fleet.logs[0].reason or "")


def test_a_fleet_of_8_mib_or_more_is_counted_in_one_worker_per_cpu_unless_jobs_says_otherwise(
    hosts: tuple[Path, list[Path], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet's default is what one chain's report does: a worker process beside its reading for a
    read of 8 MiB or more on a machine with two or more CPUs, this process otherwise. With ``--jobs 1``
    as its default, a fleet was counted on one CPU while one chain was verified on a second."""
    from otel_route_shadow.analysis import fleet as fleet_module
    from otel_route_shadow.analysis.fleet import fleet_jobs, prepare_log

    _folder, paths, _keys = hosts
    pending = [prepare_log(str(path), [], None) for path in paths]
    monkeypatch.setattr(fleet_module.os, "cpu_count", lambda: 8)
    assert fleet_jobs(pending, None) == 1  # a few KiB: pool start-up would cost more than it saves
    assert fleet_jobs(pending, 2) == 2
    monkeypatch.setattr(fleet_module, "CONCURRENT_MIN_BYTES", sum(path.stat().st_size for path in paths))
    assert fleet_jobs(pending, None) == 3  # one per CPU, at most one per log
    assert fleet_jobs(pending, 1) == 1
    assert fleet_jobs(pending[:1], None) == 1
    monkeypatch.setattr(fleet_module.os, "cpu_count", lambda: 1)
    assert fleet_jobs(pending, None) == 1


def _fleet_in_a_daemon(folder: str, keys: list[str], answers: Any) -> None:
    from otel_route_shadow.tlog import Verifier

    try:
        report = build_fleet_report([folder], verifiers=[Verifier.parse(k) for k in keys], jobs=2)
        answers.put(report.spawns)
    except BaseException as exc:  # the parent asserts on what happened
        answers.put(f"{type(exc).__name__}: {exc}")


def test_a_fleet_read_in_a_daemonic_process_counts_its_logs_in_that_process(
    hosts: tuple[Path, list[Path], list[str]],
) -> None:
    """A daemonic process may start no worker (multiprocessing refuses with AssertionError): the logs
    are counted in the process itself, as a single chain's report then verifies before it reads."""
    from otel_route_shadow.processes import mp_context
    from otel_route_shadow.tlog import Verifier

    folder, _paths, keys = hosts
    expected = build_fleet_report([str(folder)], verifiers=[Verifier.parse(k) for k in keys]).spawns
    context = mp_context()
    answers = context.Queue()
    daemon = context.Process(target=_fleet_in_a_daemon, args=(str(folder), keys, answers), daemon=True)
    daemon.start()
    try:
        assert answers.get(timeout=120) == expected
    finally:
        daemon.join(timeout=30)
    assert daemon.exitcode == 0


def test_a_fleet_of_cut_chains_is_sized_by_their_segments_not_their_live_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cut chain keeps most of its bytes in its segments: sized by its live file alone, a fleet of
    large cut logs was read in this process while one of them alone was verified beside its reading."""
    from otel_route_shadow.analysis import fleet as fleet_module
    from otel_route_shadow.analysis.fleet import fleet_jobs, prepare_log
    from otel_route_shadow.analysis.source import stored_bytes
    from otel_route_shadow.logstore.cutting import cut_signed

    pending = []
    for number, name in enumerate(("alpha", "beta")):
        path = tmp_path / f"{name}.jsonl"
        build_chain(path, SCENARIO, start_ns=(1_790_000_000 + number * 500_000) * 10**9)
        origin = f"{name}.example/route-shadow"
        checkpointer = Checkpointer(str(path), origin, Signer.generate(origin))
        checkpointer.checkpoint()
        assert cut_signed(checkpointer, None) is not None
        pending.append(prepare_log(str(path), [], None))
    live = sum(Path(log.path).stat().st_size for log in pending)
    stored = sum(stored_bytes(log.path) for log in pending)
    assert stored > 10 * live
    monkeypatch.setattr(fleet_module.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(fleet_module, "CONCURRENT_MIN_BYTES", stored)
    assert fleet_jobs(pending, None) == 2


def test_one_flapping_key_of_two_hosts_is_two_rows_each_named_after_its_host(tmp_path: Path) -> None:
    from otel_route_shadow.cli.report_text import format_report
    from otel_route_shadow.cli.whatif_text import format_whatif

    folder = tmp_path / "fleet"
    make_log(folder, "alpha", "alpha.example/route-shadow")
    make_log(folder, "beta", "beta.example/route-shadow")
    key = "acme/project-x / reviewer / (none) / agentic / (none)"
    report = format_report(build_fleet_report([str(folder)]))
    assert "host: decision key (" in report
    for host in ("alpha", "beta"):
        assert f"{host}.example/route-shadow: {key}" in report
    assert "host: decision key" not in format_report(build_report(folder / "alpha.jsonl"))
    whatif = format_whatif(fleet_replay([str(folder)], snapshot_of([], revision=7)))
    assert "host: decision key" in whatif and f"beta.example/route-shadow: {key}" in whatif


def test_two_signed_checkpoints_of_one_size_with_two_roots_exclude_the_log_as_a_fork(tmp_path: Path) -> None:
    # A one-shot fleet report checked each host's newest checkpoint only: a fork its key signed, in its
    # own checkpoints file, went unseen and the log was counted.
    from otel_route_shadow.logstore import LogStore
    from otel_route_shadow.tlog import Checkpoint, sign_note

    origin = "alpha.example/route-shadow"
    path, signer = make_log(tmp_path, "alpha", origin)
    size = len(path.read_bytes().splitlines())
    keys = [signer.verifier()]
    assert _excluded(path, keys) == []
    stranger = Signer.generate(origin)  # a key not given: its note proves nothing
    LogStore(path).append_note(sign_note(Checkpoint(origin, size, b"\x01" * 32).text(), [stranger]))
    assert _excluded(path, keys) == []
    LogStore(path).append_note(sign_note(Checkpoint(origin, size, b"\x02" * 32).text(), [signer]))
    ((excluded, reason),) = _excluded(path, keys)
    assert excluded == str(path) and reason is not None
    assert reason.startswith(f"a fork: its checkpoints file holds two checkpoints of {size} records signed by")
    assert "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=" in reason


def test_a_fork_is_seen_when_one_of_its_roots_was_first_noted_by_a_key_not_given(tmp_path: Path) -> None:
    # The first note of each root stood for it: a root noted first with another key's signature (the
    # same tree, signed again by a key the fleet is not given) hid that its own key signed it too.
    from otel_route_shadow.logstore import LogStore
    from otel_route_shadow.tlog import Checkpoint, sign_note

    origin = "alpha.example/route-shadow"
    path, signer = make_log(tmp_path, "alpha", origin)
    size = len(path.read_bytes().splitlines())
    forked = Checkpoint(origin, size, b"\x02" * 32).text()
    LogStore(path).append_note(sign_note(forked, [Signer.generate(origin)]))
    LogStore(path).append_note(sign_note(forked, [signer]))
    ((excluded, reason),) = _excluded(path, [signer.verifier()])
    assert excluded == str(path) and reason is not None and reason.startswith("a fork: ")


def _excluded(path: Path, keys: list[Any]) -> list[tuple[str, str | None]]:
    fleet = build_fleet_report([str(path)], verifiers=keys).fleet
    assert fleet is not None
    return [(log.path, log.reason) for log in fleet.excluded]
