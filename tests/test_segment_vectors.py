"""Published test vectors for segmented chains (``tests/vectors/segments``): a chain cut twice by the real
writer, and damaged variants with the verdict and exit code ``verify`` gives each, without a key and with
the vectors' public test key. Checked three ways, as ``tests/test_chain_vectors.py`` checks the one-file
vectors: our ``verify``, an independent verifier of the anchor rules written from ``docs/chain-format.md``
section 14.4 with the standard library only, and regeneration (the committed files are exactly what the
writer produces today).

The anchors carry checkpoints signed by a PUBLIC test key (seed = SHA-256 of ``otel-route-shadow segment
test vectors``: never use it for anything else). Ed25519 signs deterministically, so the bytes do not vary.

Regenerate after a deliberate format change with ``python tests/test_segment_vectors.py``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from segment_support import append
from test_chain_support import forge, relink
from test_chain_vectors import GENESIS, SEGMENT_REASONS, _check

from otel_route_shadow.chain import verify_chain
from otel_route_shadow.cli import main
from otel_route_shadow.logstore import Checkpointer, cut_signed
from otel_route_shadow.tlog import Signer, parse_note, sign_note

VECTORS = Path(__file__).resolve().parent / "vectors" / "segments"
ORIGIN = "example.com/route-shadow/segment-vectors"
LIVE = "chain.jsonl"
FOLDER = LIVE + ".segments"
SEG0, SEG4, SEG7 = (f"{FOLDER}/{first:016d}.jsonl" for first in (0, 4, 7))
SIZES = (4, 3, 3)
"""Records per file: segment 0 (seq 0-3), segment 4 (its anchor, seq 4-6), the live file (its anchor, seq 7-9)."""


def vector_signer() -> Signer:
    seed = hashlib.sha256(b"otel-route-shadow segment test vectors").digest()
    return Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(seed))


def forger_signer() -> Signer:
    """Another key under the log's name: what a forger without the log's key signs with."""
    seed = hashlib.sha256(b"otel-route-shadow segment test vectors: a forger's key").digest()
    return Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(seed))


# -- building the vectors -----------------------------------------------------------------------------------

Files = dict[str, list[bytes]]
"""A chain's files, by path relative to its folder: their lines (LF included)."""


def _valid_chain(scratch: Path) -> tuple[Files, bytes]:
    """The chain cut by the real writer (``logstore.cut_signed``, as ``rotate --key`` does), and the log's
    ``checkpoints`` file."""
    chain, signer, written = scratch / LIVE, vector_signer(), 0
    for index, size in enumerate(SIZES):
        own = size - (1 if index else 0)  # the anchor counts in the file it begins
        append(chain, written, own)
        written += own
        if index < len(SIZES) - 1:
            made = cut_signed(Checkpointer(str(chain), ORIGIN, signer), None, 60.0, catch_up=None)
            assert made is not None and made.checkpoint is not None
    files = {name: (scratch / name).read_bytes().splitlines(keepends=True) for name in (SEG0, SEG4, LIVE)}
    return files, (scratch / (LIVE + ".tlog") / "checkpoints").read_bytes()


def _record(line: bytes) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(line)
    return parsed


def _reanchor(lines: list[bytes], prev: str | None = None, **changes: Any) -> list[bytes]:
    """``lines`` (a file beginning with its anchor) with the anchor's payload changed (and its link, to
    ``prev``), its hash recomputed and the records after it relinked: what a forger with the format spec
    writes."""
    anchor = _record(lines[0])
    line, _ = forge(anchor["seq"], prev or anchor["prev_hash"], {**anchor["payload"], **changes})
    return relink([line, *lines[1:]], 1)


def build_vectors(out: Path) -> None:
    """Write every case folder, ``checkpoints``, ``verifier.txt`` and ``manifest.json`` into ``out``;
    deterministic."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.iterdir():
        if stale.is_dir():
            shutil.rmtree(stale)
        else:
            stale.unlink()
    with tempfile.TemporaryDirectory() as scratch:
        valid, checkpoints = _valid_chain(Path(scratch))
    (out / "checkpoints").write_bytes(checkpoints)
    (out / "verifier.txt").write_text(f"{vector_signer().verifier()}\n", "ascii")
    anchor4, anchor7 = _record(valid[SEG4][0])["payload"], _record(valid[LIVE][0])["payload"]
    for line in (valid[SEG4][0], valid[LIVE][0]):  # the forger's encoder writes what the writer wrote
        record = _record(line)
        assert forge(record["seq"], record["prev_hash"], record["payload"])[0] == line
    cases: list[dict[str, Any]] = []

    def case(
        name: str, files: Files, expect: dict[str, Any], about: str, key: dict[str, Any] | None = None
    ) -> None:
        """``head_hash``: the record hash on line ``records`` of the chain's files read in order."""
        for path, lines in files.items():
            (out / name / path).parent.mkdir(parents=True, exist_ok=True)
            (out / name / path).write_bytes(b"".join(lines))
        ordered = [line for path in [*sorted(p for p in files if p != LIVE), LIVE] for line in files[path]]

        def with_head(expected: dict[str, Any]) -> dict[str, Any]:
            verified = expected["records"]
            return {
                **expected,
                "head_hash": _record(ordered[verified - 1])["record_hash"] if verified else None,
            }

        entry = {"name": name, "about": about, **with_head(expect)}
        if key is not None:
            entry["key"] = with_head(key)
        cases.append(entry)

    def intact(records: int = 10) -> dict[str, Any]:
        return {
            "verdict": "intact",
            "reason": None,
            "first_bad_seq": None,
            "file": LIVE,
            "line": None,
            "records": records,
            "exit": 0,
        }

    def broken(reason: str, seq: int, file: str, line: int, records: int | None = None) -> dict[str, Any]:
        return {
            "verdict": "broken",
            "reason": reason,
            "first_bad_seq": seq,
            "file": file,
            "line": line,
            "records": seq if records is None else records,
            "exit": 1,
        }

    case("valid", valid, intact(), "seq 0-3 in segment 0, 4-6 in segment 4 (its anchor first), 7-9 live")
    case(
        "segment-missing",
        {SEG0: valid[SEG0], LIVE: valid[LIVE]},
        broken("segment-missing", 4, LIVE, 1),
        "segment 4 deleted: the live file's anchor (seq 7) is past the end of segment 0 (seq 3)",
    )
    case(
        "first-segment-missing",
        {SEG4: valid[SEG4], LIVE: valid[LIVE]},
        broken("segment-missing", 0, SEG4, 1),
        "segment 0 deleted: the first file's name says seq 4, the chain begins at seq 0",
    )
    case(
        "segments-swapped",
        {SEG0: valid[SEG4], SEG4: valid[SEG0], LIVE: valid[LIVE]},
        broken("segment-misplaced", 0, SEG0, 1),
        "the two closed segments' contents swapped (their names kept): 0000000000000000.jsonl begins at seq 4",
    )
    case(
        "segment-duplicated",
        {**valid, SEG7: valid[LIVE]},
        broken("segment-misplaced", 10, LIVE, 1),
        "a copy of the live file kept as closed segment 7: the live file's anchor (seq 7) is within it",
    )
    edited = list(valid[SEG4])
    edited[1] = edited[1].replace(b"agent-", b"AGENT-", 1)
    case(
        "segment-edited",
        {**valid, SEG4: edited},
        broken("hash-mismatch", 5, SEG4, 2),
        "a payload in closed segment 4 edited (its SHA-256 no longer the anchor's): the record's own hash "
        "fails first, as the segment is read before the next file's anchor is checked",
    )
    case(
        "segment-torn",
        {**valid, SEG0: [*valid[SEG0], b'{"payload":{"kind":"route-shadow"']},
        broken("segment-edited", 4, SEG0, 1),
        "bytes without a newline appended to closed segment 0: every record verifies, the file ends mid-line",
    )
    rewritten = relink(edited, 1)
    case(
        "segment-rewritten",
        {**valid, SEG4: rewritten},
        broken("anchor-mismatch", 7, LIVE, 1),
        "closed segment 4 edited and its hashes recomputed: the live file's anchor names another last "
        "record hash",
    )
    case(
        "anchor-wrong-sha256",
        {**valid, LIVE: _reanchor(valid[LIVE], sha256=hashlib.sha256(b"another file").hexdigest())},
        broken("segment-edited", 7, LIVE, 1),
        "the live file's anchor names another SHA-256 for segment 4 (anchor hash recomputed, file relinked)",
    )
    case(
        "anchor-wrong-last-seq",
        {**valid, LIVE: _reanchor(valid[LIVE], last_seq=anchor7["last_seq"] - 1)},
        broken("anchor-mismatch", 7, LIVE, 1),
        "the live file's anchor names last_seq 5 (anchor hash recomputed, file relinked)",
    )
    case(
        "anchor-wrong-record-hash",
        {**valid, LIVE: _reanchor(valid[LIVE], last_record_hash=_record(valid[SEG4][1])["record_hash"])},
        broken("anchor-mismatch", 7, LIVE, 1),
        "the live file's anchor names the hash of seq 5 as segment 4's last record (its prev_hash kept; "
        "anchor hash recomputed, file relinked)",
    )
    case(
        "anchor-removed",
        {**valid, LIVE: valid[LIVE][1:]},
        broken("anchor-mismatch", 7, LIVE, 1),
        "the live file's anchor line deleted: its first record (seq 8) is not an anchor",
    )
    case(
        "anchor-checkpoint-wrong-size",
        {**valid, LIVE: _reanchor(valid[LIVE], checkpoint=anchor4["checkpoint"])},
        broken("anchor-mismatch", 7, LIVE, 1),
        "the live file's anchor carries the (validly signed) checkpoint of size 4, not of its seq 7",
    )
    forged_note = sign_note(parse_note(anchor7["checkpoint"]).text, [forger_signer()])
    case(
        "forged-anchor",
        {**valid, LIVE: _reanchor(valid[LIVE], checkpoint=forged_note)},
        intact(),
        "the live file's anchor carries a checkpoint of the right size and root signed by another key under "
        "the log's name (anchor hash recomputed, file relinked): only a verifier holding the log's key sees it",
        key=broken("anchor-mismatch", 7, LIVE, 1),
    )
    last = _record(rewritten[-1])["record_hash"]
    whole = b"".join(rewritten)
    forged_live = _reanchor(
        valid[LIVE], last, last_record_hash=last, sha256=hashlib.sha256(whole).hexdigest(), bytes=len(whole)
    )
    case(
        "history-rewritten",
        {**valid, SEG4: rewritten, LIVE: forged_live},
        intact(),
        "segment 4 edited and rehashed, the live file's anchor rewritten to name it (its checkpoint kept) and "
        "the live file relinked: every link and anchor field holds; the anchor's signed checkpoint of size 7 "
        "has another root (verify --key: record-changed)",
        key={**intact(), "exit": 1},
    )
    duplicated = [*valid[LIVE][:2], valid[SEG0][2], *valid[LIVE][2:]]
    case(
        "record-duplicated-across-segments",
        {**valid, LIVE: duplicated},
        broken("forked", 2, LIVE, 3, records=9),
        "record 2 of segment 0 repeated in the live file after seq 8: verify says forked (it looks for the "
        "earlier record in the line's own file only), section 8 case 3 reordered-or-duplicated",
    )

    (out / "manifest.json").write_text(
        json.dumps(
            {
                "format_version": 1,
                "origin": ORIGIN,
                "verifier_key": "verifier.txt",
                "checkpoints": "checkpoints",
                "live_file": LIVE,
                "cases": cases,
            },
            indent=2,
            ensure_ascii=False,
        )
        + "\n",
        "utf-8",
    )


# -- an independent verifier of the anchor rules, written from docs/chain-format.md with the standard ---------
# -- library only (section 8's line checks are test_chain_vectors' own independent ``_check``) ---------------

SEGMENT_NAME = re.compile(r"[0-9]{16}\.jsonl")
ANCHOR_FIELDS = ("segment", "first_seq", "last_seq", "last_record_hash")

# Ed25519 verification (RFC 8032, section 5.1.7), for the signed notes of 13.3.
_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
Point = tuple[int, int, int, int]


def _add(a: Point, b: Point) -> Point:
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    e, h = (y1 - x1) * (y2 - x2) % _P, (y1 + x1) * (y2 + x2) % _P
    c, d = 2 * t1 * t2 * _D % _P, 2 * z1 * z2 % _P
    e, f, g, h = h - e, d - c, d + c, h + e
    return e * f % _P, g * h % _P, f * g % _P, e * h % _P


def _times(scalar: int, point: Point) -> Point:
    result: Point = (0, 1, 1, 0)
    while scalar:
        if scalar & 1:
            result = _add(result, point)
        point, scalar = _add(point, point), scalar >> 1
    return result


def _point(encoded: bytes) -> Point | None:
    y = int.from_bytes(encoded, "little")
    sign, y = y >> 255, y & ((1 << 255) - 1)
    if y >= _P:
        return None
    u = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    x = pow(u, (_P + 3) // 8, _P)
    if (x * x - u) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - u) % _P or (x == 0 and sign):
        return None
    if x & 1 != sign:
        x = _P - x
    return x, y, 1, x * y % _P


_BASE = _point((4 * pow(5, _P - 2, _P) % _P).to_bytes(32, "little"))


def ed25519_verify(public: bytes, message: bytes, signature: bytes) -> bool:
    a, r = _point(public), _point(signature[:32])
    s = int.from_bytes(signature[32:], "little")
    if a is None or r is None or _BASE is None or len(signature) != 64 or s >= _L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % _L
    left, right = _times(s, _BASE), _add(r, _times(k, a))
    return (left[0] * right[2] - right[0] * left[2]) % _P == 0 and (
        left[1] * right[2] - right[1] * left[2]
    ) % _P == 0


def _checkpoint(note: object, keys: list[str]) -> tuple[int, bytes] | None:
    """(size, root) of a checkpoint note (13.2, 13.3): parsed only when no key is given, else only when
    signed by one of ``keys`` (verifier key strings); None otherwise."""
    if not isinstance(note, str):
        return None
    text, blank, block = note.partition("\n\n")  # an unsigned note is its text alone
    text = text + "\n" if blank else note
    lines = text.split("\n")
    if (
        len(lines) != 4
        or lines[3]
        or not re.fullmatch(r"0|[1-9][0-9]*", lines[1])
        or (block and not block.endswith("\n"))
    ):
        return None
    try:
        size, root = int(lines[1]), base64.b64decode(lines[2], validate=True)
        if len(root) != 32:
            return None
        signatures = [line.split(" ") for line in block.splitlines()]
        for key in keys:
            name, key_id, material = key.split("+", 2)  # a name holds no "+"; base64 may
            public = base64.b64decode(material)[1:]
            for dash, signer, blob in signatures:
                signature = base64.b64decode(blob)
                ours = (dash, signer, signature[:4].hex()) == ("\u2014", name, key_id)
                if ours and ed25519_verify(public, text.encode(), signature[4:]):
                    return size, root
    except ValueError:
        return None
    return None if keys else (size, root)


def _mth(hashes: list[bytes]) -> bytes:
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + _mth(hashes[:k]) + _mth(hashes[k:])).digest()


def _first_record(lines: list[bytes]) -> dict[str, Any] | None:
    """The file's first line, when it is a JSON object with an integer ``seq``."""
    try:
        first = json.loads(lines[0]) if lines else None
    except ValueError:
        return None
    return first if isinstance(first, dict) and type(first.get("seq")) is int else None


def _placement(
    path: Path, lines: list[bytes], expected: int, previous: dict[str, Any] | None, keys: list[str]
) -> str | None:
    """Why the file does not follow the chain before it (ending at seq ``expected - 1``, its last file
    ``previous``), in the order of the table of 14.4; None when it does."""
    first = _first_record(lines)
    if path.name != LIVE:
        start = int(path.name[:16])
        if start != expected:
            return "segment-missing" if start > expected else "segment-misplaced"
        if first is not None and first["seq"] != start:
            return "segment-misplaced"
    if previous is None:
        return None
    payload = first.get("payload") if first is not None else None
    if not isinstance(payload, dict) or payload.get("kind") != "segment-anchor":
        return "anchor-mismatch"
    assert first is not None
    if first["seq"] != expected:  # past the previous file's end, or within it (11: "its place")
        return "segment-missing" if first["seq"] > expected else "segment-misplaced"
    if any(payload.get(field) != previous[field] for field in ANCHOR_FIELDS):
        return "anchor-mismatch"
    if payload.get("sha256") != previous["sha256"] or payload.get("bytes") != previous["bytes"]:
        return "segment-edited"
    note = payload.get("checkpoint")
    if note is not None and (_checkpoint(note, keys) or (-1,))[0] != first["seq"]:
        return "anchor-mismatch"
    return None


def _walk(lines: list[bytes], expected: int, prev: str, hashes: list[str]) -> tuple[str, int, int] | None:
    """Section 8's walk over one file's lines, going on from seq ``expected`` linked to ``prev`` (the
    verified prefix ``hashes`` grows); (reason, first bad seq, line) at the first that fails."""
    for number, raw in enumerate(lines, start=1):
        status, value = _check(raw)
        if status == "bad":
            return value, expected, number
        seq, link, record_hash, _ = value
        if seq == expected and link == prev:
            hashes.append(record_hash)
            expected, prev = seq + 1, record_hash
        elif seq == expected:
            return "link-broken", expected, number
        elif seq < expected:
            return ("reordered-or-duplicated" if hashes[seq] == record_hash else "forked"), seq, number
        elif link == prev:
            return "seq-gap", expected, number
        else:
            later = any(
                status == "ok" and value[:2] == (expected, prev)
                for status, value in map(_check, lines[number:])
            )
            return ("reordered-or-duplicated" if later else "record-removed"), expected, number
    return None


def auditor_verify(
    live: Path, keys: list[str] | None = None, checkpoints: Path | None = None
) -> dict[str, Any]:
    """The verdict on the chain whose live file is ``live``, and the exit code of ``verify`` (14.4). With
    ``keys`` (verifier key strings), the anchors' checkpoints must be signed by one of them, and every
    checkpoint (those of the file ``checkpoints``, the anchors') must have the root of the tree of the
    chain's first ``size`` lines (13.1, 13.7)."""
    folder = live.parent / (live.name + ".segments")
    closed = sorted(p for p in folder.iterdir() if SEGMENT_NAME.fullmatch(p.name)) if folder.is_dir() else []
    keys = keys or []
    notes = (
        [json.loads(line)["note"] for line in checkpoints.read_bytes().splitlines()] if checkpoints else []
    )
    hashes: list[str] = []
    leaves: list[bytes] = []
    previous: dict[str, Any] | None = None

    def result(
        path: Path, verdict: str, reason: str | None, seq: int | None, line: int | None
    ) -> dict[str, Any]:
        signed = [_checkpoint(note, keys) for note in notes] if keys and verdict == "intact" else []
        holds = all(s is not None and s[0] <= len(leaves) and _mth(leaves[: s[0]]) == s[1] for s in signed)
        return {
            "verdict": verdict,
            "reason": reason,
            "first_bad_seq": seq,
            "file": str(path.relative_to(live.parent)),
            "line": line,
            "records": len(hashes),
            "head_hash": hashes[-1] if hashes else None,
            "exit": 0 if verdict == "intact" and holds else 1,
        }

    for path in [*closed, live]:
        data = path.read_bytes()
        lines = data.split(b"\n")[:-1]  # complete lines; the bytes after the last LF are not a line
        expected = len(hashes)
        fault = _placement(path, lines, expected, previous, keys)
        if fault is not None:
            return result(path, "broken", fault, expected, 1)
        if previous is not None and json.loads(lines[0])["payload"]["checkpoint"] is not None:
            notes.append(json.loads(lines[0])["payload"]["checkpoint"])
        leaves += [hashlib.sha256(b"\x00" + line).digest() for line in lines]
        bad = _walk(lines, expected, hashes[-1] if hashes else GENESIS, hashes)
        if bad is not None:
            return result(path, "broken", *bad)
        torn = not data.endswith(b"\n") and bool(data)
        if path == live:
            return result(
                path,
                *(
                    ("torn-tail", "torn-tail", len(hashes), len(lines) + 1)
                    if torn
                    else ("intact", None, None, None)
                ),
            )
        if torn:
            return result(path, "broken", "segment-edited", len(hashes), 1)
        previous = {
            "segment": path.name,
            "first_seq": expected,
            "last_seq": len(hashes) - 1,
            "last_record_hash": hashes[-1] if hashes else None,
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
        }
    raise AssertionError("a chain's files end with its live file")


# -- the tests ---------------------------------------------------------------------------------------------

MANIFEST = (
    json.loads((VECTORS / "manifest.json").read_text("utf-8"))["cases"]
    if (VECTORS / "manifest.json").exists()
    else []
)
FIELDS = ("verdict", "reason", "first_bad_seq", "file", "line", "records", "head_hash")
WITH_KEY = ("--key", str(VECTORS / "verifier.txt"), "--checkpoint", str(VECTORS / "checkpoints"))


def _cli(live: Path, *options: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["verify", str(live), "--json", "--no-progress", *options])
    found: dict[str, Any] = json.loads(out.getvalue())
    found["exit"] = code
    found["file"] = str(Path(found["path"]).relative_to(live.parent))
    return found


@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
@pytest.mark.parametrize("case", MANIFEST, ids=[case["name"] for case in MANIFEST])
def test_vector_verdicts(case: dict[str, Any], keyed: bool) -> None:
    """``verify`` without a key and with ``--key verifier.txt --checkpoint checkpoints`` agrees with the
    manifest (``key``, where a case has one, is the keyed verdict)."""
    live = VECTORS / case["name"] / LIVE
    expected = case.get("key", case) if keyed else case
    if not keyed:
        ours = verify_chain(live).to_dict()
        ours["file"] = str(Path(ours["path"]).relative_to(live.parent))
        assert {k: ours[k] for k in FIELDS} == {k: expected[k] for k in FIELDS}
    found = _cli(live, *(WITH_KEY if keyed else ()))
    assert {k: found[k] for k in (*FIELDS, "exit")} == {k: expected[k] for k in (*FIELDS, "exit")}


DOC_READINGS: dict[str, dict[str, Any]] = {
    "record-duplicated-across-segments": {"reason": "reordered-or-duplicated"},
}
"""Where docs/chain-format.md reads otherwise than ``verify`` does, what the independent verifier gives.
Section 8, case 3: a record already in the verified prefix, with the same hash, is a duplicate; ``verify``
looks for the earlier record in the line's own file only (``chain.diagnosis``), so a record repeated from
an earlier segment is ``forked`` there."""


@pytest.mark.parametrize("keyed", [False, True], ids=["no-key", "key"])
@pytest.mark.parametrize("case", MANIFEST, ids=[case["name"] for case in MANIFEST])
def test_independent_verifier_agrees(case: dict[str, Any], keyed: bool) -> None:
    """The verifier written from the format document gives the manifest's verdicts, but for the readings
    of :data:`DOC_READINGS`."""
    live = VECTORS / case["name"] / LIVE
    expected = {**(case.get("key", case) if keyed else case), **DOC_READINGS.get(case["name"], {})}
    key = (VECTORS / "verifier.txt").read_text("ascii").strip()
    found = auditor_verify(live, [key], VECTORS / "checkpoints") if keyed else auditor_verify(live)
    assert {k: found[k] for k in (*FIELDS, "exit")} == {k: expected[k] for k in (*FIELDS, "exit")}


def test_the_independent_verifier_checks_signatures() -> None:
    """Its Ed25519 and note parsing accept the log's signature and nothing else (the vectors alone show
    only that it refuses another key's)."""
    key = (VECTORS / "verifier.txt").read_text("ascii").strip()
    note = json.loads((VECTORS / "checkpoints").read_bytes().splitlines()[0])["note"]
    assert _checkpoint(note, [key]) == _checkpoint(note, []) is not None
    assert _checkpoint(note.replace("\n4\n", "\n5\n", 1), [key]) is None  # the log's key id, a bad signature
    assert _checkpoint(note.partition("\n\n")[0] + "\n", [key]) is None  # unsigned
    assert _checkpoint(note.partition("\n\n")[0] + "\n", []) == _checkpoint(note, [])


def test_vectors_cover_every_segment_reason() -> None:
    assert {case["reason"] for case in MANIFEST} >= SEGMENT_REASONS
    assert {case["name"] for case in MANIFEST} >= set(DOC_READINGS)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_vectors_are_what_the_writer_produces_today(tmp_path: Path) -> None:
    build_vectors(tmp_path)
    committed = _tree(VECTORS)
    assert _tree(tmp_path) == committed
    for name in committed:
        assert (tmp_path / name).read_bytes() == (VECTORS / name).read_bytes(), name


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    build_vectors(VECTORS)
    print(f"wrote vectors to {VECTORS}", file=sys.stderr)


@pytest.mark.parametrize(("case", "expected"), [("valid", 0), ("forged-anchor", 1), ("history-rewritten", 1)])
def test_verify_key_of_a_segmented_chain_without_its_log_folder_checks_its_anchors_checkpoints(
    tmp_path: Path, case: str, expected: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # --key alone read only CHAIN.tlog/checkpoints: a segmented chain copied without it was exit 2, though
    # its anchors carry signed checkpoints.
    shutil.copytree(VECTORS / case, tmp_path / case)
    chain = tmp_path / case / "chain.jsonl"
    assert main(["verify", str(chain), "--key", str(VECTORS / "verifier.txt")]) == expected
    if expected == 0:
        assert "consistent with 2 checkpoint(s), largest size 7" in capsys.readouterr().out
