"""A log's key set (a rotated key): the strict key-set file and the one authentication rule, a checkpoint
of size n is authentic iff it carries a valid signature by a key whose window contains n."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from otel_route_shadow.tlog import (
    Checkpoint,
    KeySetError,
    KeyWindow,
    Signer,
    authenticate,
    parse_key_set,
    sign_note,
)
from otel_route_shadow.tlog.authentication import OutsideWindow, UnknownKey

ORIGIN = "example.com/route-shadow/rotating"
OLD = Signer.generate(ORIGIN)
NEW = Signer.generate(ORIGIN)
STRANGER = Signer.generate(ORIGIN)
ROOT = bytes(range(32))


def note(size: int, *signers: Signer) -> str:
    return sign_note(Checkpoint(ORIGIN, size, ROOT).text(), list(signers))


def key_set(*lines: str) -> tuple[KeyWindow, ...]:
    return parse_key_set("".join(line + "\n" for line in lines).encode("ascii"))


ROTATION = key_set(
    "# the log rotated its key at size 100; both signed sizes 100 to 149",
    f"{OLD.verifier()} 0 150",
    "",
    f"{NEW.verifier()} 100",
)


def test_a_key_set_file_reads_each_key_with_its_window() -> None:
    assert (KeyWindow(OLD.verifier(), 0, 150), KeyWindow(NEW.verifier(), 100)) == ROTATION
    assert [str(w) for w in ROTATION] == [f"{OLD.verifier()} 0 150", f"{NEW.verifier()} 100"]
    assert KeyWindow.parse(str(OLD.verifier())) == KeyWindow(OLD.verifier(), 0, None)


@pytest.mark.parametrize(
    ("size", "signers", "signed_by"),
    [
        (99, (OLD,), (OLD,)),
        (120, (OLD, NEW), (OLD, NEW)),
        (120, (OLD,), (OLD,)),
        (120, (NEW,), (NEW,)),
        (150, (OLD, NEW), (NEW,)),
        (5000, (NEW,), (NEW,)),
    ],
)
def test_a_checkpoint_is_authentic_when_a_key_valid_for_its_size_signed_it(
    size: int, signers: tuple[Signer, ...], signed_by: tuple[Signer, ...]
) -> None:
    found = authenticate(note(size, *signers), ROTATION)
    assert found.checkpoint.size == size
    assert found.signed_by == tuple(str(s.verifier()) for s in signed_by)


@pytest.mark.parametrize(("size", "signer"), [(150, OLD), (99, NEW), (0, NEW)])
def test_a_checkpoint_signed_only_by_a_key_outside_its_window_is_refused_by_name(
    size: int, signer: Signer
) -> None:
    with pytest.raises(OutsideWindow) as caught:
        authenticate(note(size, signer), ROTATION)
    assert caught.value.reason == "key-outside-window"
    assert caught.value.checkpoint is not None and caught.value.checkpoint.size == size
    assert f"{ORIGIN}+{signer.verifier().key_id:08x}" in str(caught.value)


def test_a_key_of_the_same_name_outside_the_key_set_is_still_unknown() -> None:
    with pytest.raises(UnknownKey):
        authenticate(note(120, STRANGER), ROTATION)


def test_bare_verifier_keys_are_valid_for_every_size() -> None:
    assert authenticate(note(10**12, OLD), [OLD.verifier(), NEW.verifier()]).signed_by == (
        str(OLD.verifier()),
    )


@given(
    size=st.integers(0, 2**63 - 1),
    start=st.integers(0, 2**62),
    length=st.one_of(
        st.none(), st.integers(1, 2**62 - 1)
    ),  # until_size stays below 2**63, as the format says
)
@example(size=2**63 - 2, start=2**62, length=2**62 - 1)  # the largest window the format allows
def test_the_window_rule_is_exactly_from_inclusive_until_exclusive(
    size: int, start: int, length: int | None
) -> None:
    until = None if length is None else start + length
    window = KeyWindow(OLD.verifier(), start, until)
    assert KeyWindow.parse(str(window)) == window
    inside = start <= size and (until is None or size < until)
    signed = note(size, OLD)
    if inside:
        assert authenticate(signed, [window]).signed_by == (str(OLD.verifier()),)
    else:
        with pytest.raises(OutsideWindow):
            authenticate(signed, [window])


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        (f"{OLD.verifier()}\n", 1, "expected <verifier key>"),
        (f"# ok\n{OLD.verifier()} 0 0\n", 2, "larger than from_size"),
        (f"{OLD.verifier()} 5 3\n", 1, "larger than from_size"),
        (f"{OLD.verifier()}  0\n", 1, "one space apart"),
        (f"{OLD.verifier()} 0 1 2\n", 1, "one space apart"),
        (f"{OLD.verifier()} 007\n", 1, "leading zeros"),
        (f"{OLD.verifier()} -1\n", 1, "without sign"),
        (f"{OLD.verifier()} {2**63}\n", 1, "below 2**63"),
        (f"{OLD.verifier()} 0\n{OLD.verifier()} 100\n", 2, "the key of line 1 again"),
        (f"{OLD.verifier()} 0\nexample.com/x+00000000+AAAA 0\n", 2, "not a verifier key"),
        ("\n# nothing\n", None, "no key"),
        (f"{OLD.verifier()}\t0\n", None, "a tab"),
        (f"{OLD.verifier()} 0\r\n", None, "carriage return"),
        ("ключ 0\n", None, "not ASCII"),
    ],
)
def test_a_bad_key_set_line_is_named_by_number(text: str, line: int | None, problem: str) -> None:
    with pytest.raises(KeySetError) as caught:
        parse_key_set(text.encode("utf-8"))
    assert caught.value.line == line
    assert problem in str(caught.value)


def test_a_signing_key_in_a_key_set_is_refused_and_never_echoed() -> None:
    secret = OLD.secret_string()
    for text in (f"{secret} 0\n", f"{secret}\n", f"{NEW.verifier()} 0\n{secret}\n"):
        with pytest.raises(KeySetError) as caught:
            parse_key_set(text.encode("ascii"))
        assert "signing key" in str(caught.value)
        assert secret.split("+", 4)[4][:12] not in str(caught.value)


@given(st.binary(max_size=300))
def test_any_bytes_parse_or_raise_key_set_error(data: bytes) -> None:
    try:
        windows = parse_key_set(data)
    except KeySetError:
        return
    assert windows
