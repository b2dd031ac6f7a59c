"""One tlog-witness add-checkpoint request against a fake witness on loopback: the request body, and every
kind of answer (good, refusals, bad ones), each contained as a typed outcome and never accepted as a
cosignature unless it verifies with the witness's key."""

from __future__ import annotations

import base64
import datetime
import hashlib
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.x509.oid import NameOID
from hypothesis import given
from hypothesis import strategies as st
from witness_support import Cosigner, FakeWitness, fake_witness, free_port

from otel_route_shadow.tlog import Checkpoint, Signer, sign_note, verify_cosignatures
from otel_route_shadow.witness import (
    MAX_RESPONSE_BYTES,
    Connection,
    PushOutcome,
    TransportError,
    WitnessConfigError,
    WitnessEndpoint,
    add_checkpoint,
    add_checkpoint_body,
    interpret_answer,
)

ORIGIN = "example.com/route-shadow/client"
NOW = 1_800_000_000
LOG = Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes([3]) * 32))
TEXT = Checkpoint(ORIGIN, 12, hashlib.sha256(b"twelve").digest()).text()
NOTE = sign_note(TEXT, [LOG])
WITNESS = Cosigner("witness.example/w1", Ed25519PrivateKey.from_private_bytes(bytes([4]) * 32))
OTHER = Cosigner("other.example/w2", Ed25519PrivateKey.from_private_bytes(bytes([5]) * 32))
PROOF = [hashlib.sha256(bytes([n])).digest() for n in range(3)]


def _text_of(body: bytes) -> str:
    note = body.split(b"\n\n", 1)[1].decode()
    return note.split("\n\n", 1)[0] + "\n"


def _cosign(*cosigners: Cosigner, timestamp: int = NOW - 1):
    def respond(body: bytes, _: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        text = _text_of(body)
        return 200, {}, "".join(c.line(text, timestamp) for c in cosigners).encode()

    return respond


def _fixed(status: int, body: bytes, headers: dict[str, str] | None = None):
    return lambda _body, _fake: (status, headers or {}, body)


def _push(fake: FakeWitness | str, *, timeout: float = 10.0, tls: ssl.SSLContext | None = None):
    url = fake if isinstance(fake, str) else fake.url
    endpoint = WitnessEndpoint.parse("w1", WITNESS.verifier, url)
    return add_checkpoint(
        endpoint, 5, PROOF, NOTE, now=NOW, skew=300, timeout=timeout, connect_timeout=2, tls=tls
    )


def test_the_request_body_is_old_size_proof_lines_blank_line_note() -> None:
    body = add_checkpoint_body(5, PROOF, NOTE).decode()
    lines = body.split("\n")
    assert lines[0] == "old 5"
    assert [len(base64.b64decode(line)) for line in lines[1:4]] == [32, 32, 32]
    assert body.endswith("\n\n" + NOTE) and lines[4] == ""
    assert add_checkpoint_body(0, [], NOTE).decode() == "old 0\n\n" + NOTE
    for old, proof in ((0, PROOF[:1]), (-1, []), (5, PROOF * 22)):
        with pytest.raises(ValueError):
            add_checkpoint_body(old, proof, NOTE)


def test_a_valid_cosignature_is_accepted_and_the_request_is_what_was_sent() -> None:
    with fake_witness(_cosign(WITNESS)) as fake:
        answer = _push(fake)
    assert answer.outcome is PushOutcome.COSIGNED and answer.status == 200
    assert answer.cosignatures == (WITNESS.line(TEXT, NOW - 1),)
    assert fake.bodies == [add_checkpoint_body(5, PROOF, NOTE)]


def test_only_the_witnesss_own_lines_are_kept_from_an_answer() -> None:
    with fake_witness(_cosign(OTHER, WITNESS)) as fake:
        answer = _push(fake)
    assert answer.outcome is PushOutcome.COSIGNED and answer.cosignatures == (WITNESS.line(TEXT, NOW - 1),)


@pytest.mark.parametrize(
    ("respond", "detail"),
    [
        (_fixed(200, b"garbage\n"), "the cosignature lines"),
        (_fixed(200, b""), "the cosignature lines"),
        (_fixed(200, b"\xff\xfe\n"), "not UTF-8"),
        (_cosign(OTHER), "no cosignature by the witness's key"),
        (_cosign(Cosigner("witness.example/w1")), "no cosignature by the witness's key"),
        (_cosign(WITNESS, timestamp=NOW + 3600), "future"),
        (_fixed(302, b"", {"Location": "http://elsewhere/"}), "unexpected status 302"),
        (_fixed(409, b"7\n"), "text/x.tlog.size"),
        (_fixed(409, b"seven\n", {"Content-Type": "text/x.tlog.size"}), "not a tree size"),
        (_fixed(409, b"07\n", {"Content-Type": "text/x.tlog.size"}), "not a tree size"),
        (_fixed(200, b"x" * (MAX_RESPONSE_BYTES + 1)), "larger than allowed"),
    ],
)
def test_a_bad_answer_is_contained_and_never_a_cosignature(respond, detail: str) -> None:
    with fake_witness(respond) as fake:
        answer = _push(fake)
    assert answer.outcome is PushOutcome.BAD_ANSWER and answer.cosignatures == ()
    assert detail in answer.detail


def test_a_cosignature_line_by_the_witnesss_name_and_key_id_but_another_key_is_a_bad_answer() -> None:
    forger = Cosigner("witness.example/w1")

    def respond(body: bytes, _: FakeWitness) -> tuple[int, dict[str, str], bytes]:
        return 200, {}, forger.line(_text_of(body), NOW, key_id=WITNESS.verifier.key_id).encode()

    with fake_witness(respond) as fake:
        answer = _push(fake)
    assert answer.outcome is PushOutcome.BAD_ANSWER and "does not verify" in answer.detail


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (400, PushOutcome.BAD_REQUEST),
        (403, PushOutcome.FORBIDDEN),
        (404, PushOutcome.UNKNOWN_LOG),
        (422, PushOutcome.BAD_PROOF),
        (500, PushOutcome.SERVER_ERROR),
        (503, PushOutcome.SERVER_ERROR),
    ],
)
def test_refusals_map_to_their_outcome_with_a_printable_detail(status: int, outcome: PushOutcome) -> None:
    key = b"sk-ant-api03-" + b"a" * 40
    with fake_witness(_fixed(status, b"no \x1b[31mway, " + key + b"\nsecond line")) as fake:
        answer = _push(fake)
    assert (answer.outcome, answer.status, answer.cosignatures) == (outcome, status, ())
    assert answer.detail == "no \\x1b[31mway, [REDACTED]"  # the escape shown, the credential-shaped string not


def test_a_conflict_gives_the_witnesss_size() -> None:
    headers = {"Content-Type": "text/x.tlog.size; charset=utf-8"}
    with fake_witness(_fixed(409, b"1030\n", headers)) as fake:
        answer = _push(fake)
    assert (answer.outcome, answer.witness_size) == (PushOutcome.CONFLICT, 1030)


def _hold(body: bytes, fake: FakeWitness) -> tuple[int, dict[str, str], bytes]:
    fake.release.wait(60)
    return 200, {}, b""


def test_a_witness_that_never_answers_times_out() -> None:
    with fake_witness(_hold) as fake:
        answer = _push(fake, timeout=0.3)
    assert answer.outcome is PushOutcome.TIMEOUT and answer.cosignatures == ()


@pytest.fixture
def dripping_server() -> Iterator[int]:
    """A server that sends a valid status line, then one header byte at a time, forever."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not stop.wait(0.02):
                try:
                    conn.sendall(b"X")
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    listener.close()
    thread.join(5)


def test_a_witness_that_drips_its_answer_is_cut_at_the_deadline(dripping_server: int) -> None:
    answer = _push(f"http://127.0.0.1:{dripping_server}", timeout=0.5)
    assert answer.outcome is PushOutcome.TIMEOUT


def test_a_closed_port_is_unreachable_and_not_http_is_a_bad_answer() -> None:
    assert _push(f"http://127.0.0.1:{free_port()}").outcome is PushOutcome.UNREACHABLE
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        answer = _push(f"http://127.0.0.1:{listener.getsockname()[1]}")
    finally:
        listener.close()
        thread.join(5)
    assert answer.outcome is PushOutcome.BAD_ANSWER


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = generate_private_key(SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def test_https_with_a_trusted_certificate_cosigns_and_an_untrusted_one_is_unreachable(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    with fake_witness(_cosign(WITNESS)) as fake:
        server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_context.load_cert_chain(cert, key)
        fake.server.socket = server_context.wrap_socket(fake.server.socket, server_side=True)
        trusted = ssl.create_default_context(cafile=str(cert))
        url = f"https://localhost:{fake.port}"
        assert _push(url, tls=trusted).outcome is PushOutcome.COSIGNED
        assert _push(url).outcome is PushOutcome.UNREACHABLE  # the system's roots do not know it


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://w.example/", "http:// or https://"),
        ("https://user:secret@w.example/", "user information"),
        ("https://w.example/?x=1", "query or a fragment"),
        ("https://w.example/#f", "query or a fragment"),
        ("https://w.example:0/", "port"),
        ("https://w.example:99999/", "port"),
        ("https:///path", "no host"),
        ("https://w.example/ x", "spaces"),
        ("https://w.example/\n", "control"),
        ("https://w.example/\u00e9/", "non-ASCII"),
        ("https://a..b/", "not a valid host name"),
        ("https://[::1/", "cannot be parsed"),
    ],
)
def test_a_witness_url_that_cannot_be_pushed_to_is_refused(url: str, problem: str) -> None:
    with pytest.raises(WitnessConfigError, match=problem) as caught:
        WitnessEndpoint.parse("w1", WITNESS.verifier, url)
    assert "secret" not in str(caught.value)


def test_an_endpoint_splits_its_url() -> None:
    endpoint = WitnessEndpoint.parse("w1", WITNESS.verifier, "https://w.example/prefix/")
    assert (endpoint.host, endpoint.port, endpoint.path, endpoint.tls) == ("w.example", 443, "/prefix", True)
    endpoint = WitnessEndpoint.parse("w1", WITNESS.verifier, "http://[::1]:8080")
    assert (endpoint.host, endpoint.port, endpoint.path, endpoint.tls) == ("::1", 8080, "", False)


@given(
    st.integers(100, 599),
    st.sampled_from(["", "text/plain", "text/x.tlog.size", "application/json"]),
    st.binary(max_size=300)
    | st.builds(lambda tail: WITNESS.line(TEXT, NOW).encode() + tail, st.binary(max_size=40)),
)
def test_any_answer_is_an_outcome_and_only_verified_lines_are_accepted(
    status: int, media: str, body: bytes
) -> None:
    endpoint = WitnessEndpoint.parse("w1", WITNESS.verifier, "http://127.0.0.1:1")
    answer = interpret_answer(endpoint, NOTE, status, media, body, NOW, 300)
    assert isinstance(answer.outcome, PushOutcome)
    if answer.outcome is PushOutcome.COSIGNED:
        assert status == 200 and answer.cosignatures
        found = verify_cosignatures(NOTE + "".join(answer.cosignatures), [WITNESS.verifier], now=NOW)
        assert len(found.verified) == 1 and found.ignored == 1
    else:
        assert answer.cosignatures == ()
    assert answer.detail.isprintable()


@pytest.mark.parametrize(
    ("host", "path", "problem"),
    [("a..b", "/o/", "not a valid host name"), ("127.0.0.1", "/\u00e9/", "not plain ASCII")],
)
def test_a_host_or_path_http_cannot_carry_is_a_transport_error_not_a_crash(
    host: str, path: str, problem: str
) -> None:
    """The IDNA encoding of the name lookup raised UnicodeError, http.client UnicodeEncodeError: neither
    was the transport's error, so a caller that contains those crashed."""
    with socket.socket() as listening:  # the connection is made (the backlog); the request is not sent
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        connection = Connection(host, listening.getsockname()[1], None, 5.0)
        with pytest.raises(TransportError, match=problem):
            connection.request("GET", path, None, timeout=5.0, max_bytes=1024)
        connection.close()


@pytest.mark.parametrize(
    ("answer", "fault"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000000000\r\n\r\nabc", "too-large"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\nabc", "too-large"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 40 + b"\r\nabc", "timeout"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n16345785d8a0000\r\nabc", "timeout"),
    ],
)
def test_an_answer_announcing_more_than_memory_holds_is_a_transport_error_not_a_crash(
    answer: bytes, fault: str
) -> None:
    """Regression: the body was read whole, and ``http.client`` allocates a declared length or chunk size
    at once whatever the byte cap: 10^17 bytes raised ``MemoryError``, 2^63 or a 40-digit chunk size
    ``OverflowError``, out of every fleet report reading that remote. It is read a block at a time; a
    declared length past the cap is refused unread, and the connection is closed."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        done = threading.Event()

        def serve() -> None:
            conn, _ = listening.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(answer)
                done.wait(10)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        connection = Connection("127.0.0.1", listening.getsockname()[1], None, 5.0)
        try:
            with pytest.raises(TransportError) as caught:
                connection.request("GET", "/", None, timeout=0.5, max_bytes=MAX_RESPONSE_BYTES)
        finally:
            done.set()
            thread.join(5)
        assert caught.value.fault.value == fault
        assert connection._connection.raw is None  # closed


@pytest.mark.parametrize(
    ("answer", "detail"),
    [
        (b"HTTP/1.1 409 Conflict\r\nContent-Length: 100\r\n\r\n5\n", "ended before its declared length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nabc", "a bad chunk size"),
    ],
)
def test_an_answer_cut_short_or_with_a_negative_chunk_size_is_malformed(answer: bytes, detail: str) -> None:
    """Regression: a body shorter than its declared length was taken whole (a 409 cut to ``5\\n`` read as
    the witness's size), and a negative chunk size was an unreachable witness "whose path or host is not
    plain ASCII" (a transient fault, retried for ever, never recorded)."""
    with socket.create_server(("127.0.0.1", 0)) as listening:

        def serve() -> None:
            conn, _ = listening.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(answer)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        connection = Connection("127.0.0.1", listening.getsockname()[1], None, 5.0)
        try:
            with pytest.raises(TransportError, match=detail) as caught:
                connection.request("GET", "/", None, timeout=5.0, max_bytes=MAX_RESPONSE_BYTES)
        finally:
            thread.join(5)
            connection.close()
        assert caught.value.fault.value == "malformed"
