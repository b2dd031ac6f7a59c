"""The C2SP tlog-policy draft: parsing (every refusal names its line), quorum evaluation, and checking a
checkpoint note against a policy (the log's signature, the witnesses' cosignatures, the quorum)."""

from __future__ import annotations

import contextlib
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from witness_support import Cosigner

from otel_route_shadow.tlog import (
    AttestationError,
    Checkpoint,
    PolicyLog,
    Signer,
    WitnessPolicy,
    WitnessPolicyError,
    attest_checkpoint,
    parse_witness_policy,
    sign_note,
)
from otel_route_shadow.tlog.attestation import AttestationFault
from otel_route_shadow.tlog.policy import MAX_POLICY_BYTES, PolicyGroup, PolicyWitness

ORIGIN = "example.com/route-shadow/policy"
NOW = 1_800_000_000
LOG = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(32)))
WITNESSES = [
    Cosigner(f"w{n}.example", Ed25519PrivateKey.from_private_bytes(bytes([n + 1]) * 32)) for n in range(6)
]
X1, X2, X3, Y1, Y2, Y3 = (str(w.verifier) for w in WITNESSES)

EXAMPLE = f"""log {LOG.verifier()}

witness X1 {X1}
witness X2 {X2}
witness X3 {X3}
group X-witnesses 2 X1 X2 X3

witness Y1 {Y1}
witness Y2 {Y2}
witness Y3 {Y3}
group Y-witnesses any Y1 Y2 Y3

group X-and-Y all X-witnesses Y-witnesses
quorum X-and-Y
"""


def test_the_drafts_example_parses() -> None:
    policy = parse_witness_policy(EXAMPLE)
    assert policy.logs == (PolicyLog(LOG.verifier()),)
    assert [w.name for w in policy.witnesses] == ["X1", "X2", "X3", "Y1", "Y2", "Y3"]
    assert policy.groups == (
        PolicyGroup("X-witnesses", 2, ("X1", "X2", "X3")),
        PolicyGroup("Y-witnesses", 1, ("Y1", "Y2", "Y3")),
        PolicyGroup("X-and-Y", 2, ("X-witnesses", "Y-witnesses")),
    )
    assert policy.quorum == "X-and-Y"


@pytest.mark.parametrize(
    ("cosigned", "met", "missing"),
    [
        ({"X1", "X2", "Y3"}, True, ("X3", "Y1", "Y2")),
        ({"X1", "X2", "X3", "Y1", "Y2", "Y3"}, True, ()),
        ({"X1", "Y1", "Y2", "Y3"}, False, ("X2", "X3")),
        ({"X1", "X2", "X3"}, False, ("Y1", "Y2", "Y3")),
        (set(), False, ("X1", "X2", "X3", "Y1", "Y2", "Y3")),
        ({"X2", "X3", "Y2", "unknown"}, True, ("X1", "Y1", "Y3")),
    ],
)
def test_the_quorum_of_the_example(cosigned: set[str], met: bool, missing: tuple[str, ...]) -> None:
    verdict = parse_witness_policy(EXAMPLE).evaluate(cosigned)
    assert (verdict.met, verdict.missing) == (met, missing)


def test_quorum_none_needs_no_witness_and_a_single_witness_quorum_needs_it() -> None:
    assert parse_witness_policy(f"log {LOG.verifier()}\nquorum none\n").evaluate([]).met
    policy = parse_witness_policy(f"witness A {X1}\nwitness B {X2}\nquorum A\n")
    assert policy.evaluate(["A"]).met and not policy.evaluate(["B"]).met
    assert policy.evaluate(["B"]).missing == ("A",)


def test_whitespace_comments_urls_and_a_missing_final_newline() -> None:
    text = (
        f"# trusted logs\n  \t\nlog\t{LOG.verifier()}   https://log.example/\n"
        f"   # a witness\nwitness  A {X1} https://w1.example/submit  \n\tquorum A"
    )
    policy = parse_witness_policy(text)
    assert policy.logs[0].url == "https://log.example/"
    assert policy.witnesses == (PolicyWitness("A", WITNESSES[0].verifier, "https://w1.example/submit"),)
    assert parse_witness_policy(text.encode()) == policy


REFUSALS = [
    ("quorum none\nquorum none\n", 2, "a second quorum line"),
    (f"witness A {X1}\n", None, "no quorum line"),
    ("", None, "no quorum line"),
    (f"witness A {X1}\nquorum B\n", 2, "neither none nor a witness or group defined above"),
    (f"quorum A\nwitness A {X1}\n", 1, "neither none nor a witness or group defined above"),  # torchwood accepts
    (f"witness A {X1}\nwitness A {X2}\nquorum A\n", 2, "already defined"),
    (f"witness A {X1}\nwitness B {X1}\nquorum A\n", 2, "same public key"),  # torchwood accepts
    (f"log {LOG.verifier()}\nlog {LOG.verifier()}\nquorum none\n", 2, "same public key"),
    (f"witness none {X1}\nquorum none\n", 1, "predefined"),  # torchwood accepts
    (f"witness A {X1}\ngroup G any A none\nquorum G\n", 2, "cannot be a group member"),
    (f"witness A {X1}\ngroup G any A A\nquorum G\n", 2, "listed twice"),  # torchwood accepts
    (f"witness A {X1}\ngroup G any B\nquorum G\n", 2, "not a witness or group defined above"),
    (f"witness A {X1}\ngroup G any\nquorum G\n", 2, "one member at least"),
    (f"witness A {X1}\ngroup G 0 A\nquorum G\n", 2, "threshold"),
    (f"witness A {X1}\ngroup G 2 A\nquorum G\n", 2, "threshold"),
    (f"witness A {X1}\ngroup G 01 A\nquorum G\n", 2, "threshold"),  # torchwood accepts
    (f"witness A {X1}\ngroup G +1 A\nquorum G\n", 2, "threshold"),  # torchwood accepts
    (f"witness A {X1}\ngroup G ANY A\nquorum G\n", 2, "threshold"),
    (f"witness A {LOG.verifier()!s}\nquorum A\n", 1, "type 0x04"),
    (f"log {X1}\nquorum none\n", 1, "the log key"),
    (f"witness A {X1} https://w.example/ extra\nquorum A\n", 1, "witness line"),  # torchwood accepts
    (f"witness A {X1} # the first\nquorum A\n", 1, "'#'"),  # torchwood accepts
    (f"witness A\u00a0B {X1}\nquorum none\n", 1, "Unicode space"),
    (f"witness A {X1}\r\nquorum A\r\n", 1, "control character (0x0d)"),
    ("quorum none\x00\n", 1, "control character (0x00)"),
    ("quorum none\nlogs x\n", 2, "not a keyword"),
    ("quorum\n", 1, "a quorum line"),
    ("quorum a b\n", 1, "a quorum line"),
]


@pytest.mark.parametrize(("text", "line", "problem"), REFUSALS)
def test_each_refusal_names_its_line(text: str, line: int | None, problem: str) -> None:
    with pytest.raises(WitnessPolicyError) as caught:
        parse_witness_policy(text)
    assert caught.value.line == line
    assert problem in str(caught.value)
    assert str(caught.value).startswith(f"line {line}: " if line else "")


def test_bytes_that_are_not_utf8_are_refused_with_their_line() -> None:
    with pytest.raises(WitnessPolicyError) as caught:
        parse_witness_policy(b"quorum none\n# \xff\n")
    assert caught.value.line == 2


def test_a_policy_larger_than_the_bound_is_refused() -> None:
    with pytest.raises(WitnessPolicyError, match="larger than"):
        parse_witness_policy("#" * MAX_POLICY_BYTES + "\nquorum none\n")


def _policies() -> st.SearchStrategy[WitnessPolicy]:
    names = st.lists(st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,12}", fullmatch=True), unique=True, max_size=6)

    @st.composite
    def build(draw: st.DrawFn) -> WitnessPolicy:
        chosen = [n for n in draw(names) if n != "none"]
        witnesses = tuple(
            PolicyWitness(n, WITNESSES[i].verifier, draw(st.none() | st.just(f"https://{i}.example/w")))
            for i, n in enumerate(chosen)
        )
        defined = [w.name for w in witnesses]
        groups = []
        for g in range(draw(st.integers(0, 3))):
            if not defined:
                break
            members = draw(st.lists(st.sampled_from(defined), min_size=1, unique=True))
            name = f"group{g}"
            groups.append(PolicyGroup(name, draw(st.integers(1, len(members))), tuple(members)))
            defined.append(name)
        quorum = draw(st.none() | st.sampled_from(defined)) if defined else None
        logs = (PolicyLog(LOG.verifier(), draw(st.none() | st.just("https://log.example/"))),)
        return WitnessPolicy(draw(st.sampled_from([(), logs])), witnesses, tuple(groups), quorum)

    return build()


def format_witness_policy(policy: WitnessPolicy) -> str:
    """The policy's text: logs, witnesses, groups (in order), then the quorum line."""

    def optional_url(line: str, url: str | None) -> str:
        return f"{line} {url}" if url is not None else line

    lines = [optional_url(f"log {log.verifier}", log.url) for log in policy.logs]
    lines += [optional_url(f"witness {w.name} {w.verifier}", w.url) for w in policy.witnesses]
    lines += [f"group {g.name} {g.threshold} {' '.join(g.members)}" for g in policy.groups]
    lines.append(f"quorum {policy.quorum or 'none'}")
    return "".join(line + "\n" for line in lines)


@given(_policies())
def test_formatting_and_parsing_round_trip(policy: WitnessPolicy) -> None:
    assert parse_witness_policy(format_witness_policy(policy)) == policy


@given(_policies(), st.sets(st.sampled_from([f"n{i}" for i in range(3)])))
def test_the_quorum_is_monotone_and_missing_never_holds_a_cosigner(policy: WitnessPolicy, extra: set[str]) -> None:
    names = [w.name for w in policy.witnesses]
    some = set(names[::2])
    verdict = policy.evaluate(some | extra)
    assert not set(verdict.missing) & some
    if verdict.met:
        assert policy.evaluate(names).met  # more cosignatures never lose the quorum
    assert policy.evaluate(names).missing == ()


@given(st.binary(max_size=400))
def test_parsing_any_bytes_raises_only_policy_error(data: bytes) -> None:
    try:
        parse_witness_policy(data)
    except WitnessPolicyError as exc:
        assert exc.line is None or exc.line >= 1


@given(
    st.lists(
        st.sampled_from(
            [
                "log",
                "witness",
                "group",
                "quorum",
                "none",
                "any",
                "all",
                "1",
                "2",
                "A",
                "B",
                X1,
                X2,
                str(LOG.verifier()),
                "#",
                "\t",
                " ",
                "\n",
            ]
        ),
        max_size=30,
    )
)
def test_parsing_near_miss_policies_raises_only_policy_error(tokens: list[str]) -> None:
    with contextlib.suppress(WitnessPolicyError):
        parse_witness_policy(" ".join(tokens))


# --- checking a checkpoint note against a policy -------------------------------------------------------

TEXT = Checkpoint(ORIGIN, 9, hashlib.sha256(b"nine").digest()).text()
NOTE = sign_note(TEXT, [LOG])
TWO = parse_witness_policy(f"log {LOG.verifier()}\nwitness A {X1}\nwitness B {X2}\ngroup both all A B\nquorum both\n")


def test_a_note_cosigned_by_the_quorum_is_attested() -> None:
    note = NOTE + WITNESSES[0].line(TEXT, NOW) + WITNESSES[1].line(TEXT, NOW - 1)
    attestation = attest_checkpoint(note, TWO, now=NOW)
    assert attestation.checkpoint.size == 9 and attestation.log == LOG.verifier()
    assert [(c.name, c.timestamp, c.counted) for c in attestation.cosignatures] == [
        ("A", NOW, True),
        ("B", NOW - 1, True),
    ]
    assert attestation.quorum.met and attestation.quorum.missing == ()


def test_a_missing_or_future_cosignature_leaves_the_quorum_unmet_and_names_the_witness() -> None:
    attestation = attest_checkpoint(NOTE + WITNESSES[0].line(TEXT, NOW), TWO, now=NOW)
    assert not attestation.quorum.met and attestation.quorum.missing == ("B",)
    future = NOTE + WITNESSES[0].line(TEXT, NOW) + WITNESSES[1].line(TEXT, NOW + 3600)
    attestation = attest_checkpoint(future, TWO, now=NOW)
    assert not attestation.quorum.met and attestation.quorum.missing == ("B",)
    assert [(c.name, c.counted) for c in attestation.cosignatures] == [("A", True), ("B", False)]


@pytest.mark.parametrize(
    ("note", "fault"),
    [
        ("garbage", AttestationFault.NOTE),
        (sign_note("not\na\ncheckpoint\nat all\n", [LOG]), AttestationFault.CHECKPOINT),
        (
            sign_note(Checkpoint("example.com/other", 1, bytes(32)).text(), [LOG]),
            AttestationFault.UNKNOWN_ORIGIN,
        ),
        (TEXT + "\n" + WITNESSES[0].line(TEXT, NOW), AttestationFault.LOG_SIGNATURE),
        (NOTE.replace(TEXT, TEXT.replace("\n9\n", "\n8\n")), AttestationFault.LOG_SIGNATURE),
        (
            NOTE + WITNESSES[5].line(TEXT, NOW, key_id=WITNESSES[0].verifier.key_id, name="w0.example"),
            AttestationFault.COSIGNATURE,
        ),
    ],
)
def test_a_note_that_is_not_authentic_is_refused_with_its_step(note: str, fault: AttestationFault) -> None:
    with pytest.raises(AttestationError) as caught:
        attest_checkpoint(note, TWO, now=NOW)
    assert caught.value.fault is fault
    if fault is AttestationFault.COSIGNATURE:
        assert caught.value.witness == "A"


def test_a_log_key_given_by_the_caller_counts_when_the_policy_lists_none() -> None:
    policy = parse_witness_policy(f"witness A {X1}\nquorum A\n")
    with pytest.raises(AttestationError) as caught:
        attest_checkpoint(NOTE, policy, now=NOW)
    assert caught.value.fault is AttestationFault.UNKNOWN_ORIGIN
    attestation = attest_checkpoint(
        NOTE + WITNESSES[0].line(TEXT, NOW), policy, now=NOW, logs=[LOG.verifier()]
    )
    assert attestation.quorum.met
