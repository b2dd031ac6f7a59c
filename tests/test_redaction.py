"""The credential redactor (ADR-0085): every listed shape is scrubbed, ordinary text is untouched, and
scrubbing is idempotent and never carries the secret."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from otel_route_shadow.core.redaction import REDACTED, json_pointer_token, redact_text, redact_value

ANTHROPIC = "sk-ant-api03-" + "Ab3_dE-9" * 11 + "AA"
OPENAI = "sk-proj-" + "a1B2c3D4e5" * 5
OPENAI_LEGACY = "sk-" + "a1B2c3D4e5" * 2 + "T3BlbkFJ" + "f6G7h8I9j0" * 2
ZAI = "0123456789abcdef0123456789abcdef.AbCdEfGhIjKlMnOp"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB_CLASSIC = "ghp_" + "A1b2C3d4E5" * 4
GITHUB_FINE = "github_pat_11ABCDEFG0" + "x_Y1z2" * 10
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nq2VaLue+/x==\n-----END RSA PRIVATE KEY-----"
NOTE_SIGNER = "PRIVATE+KEY+log.example/route-shadow+1234abcd+AZ1y+fK3mQ0pLr9vT2sWcXeB7nH5jD8gA4uI6oE0tRq="

SECRETS = {
    "anthropic": ANTHROPIC,
    "openai": OPENAI,
    "openai-legacy": OPENAI_LEGACY,
    "zai": ZAI,
    "jwt": JWT,
    "aws": AWS,
    "github-classic": GITHUB_CLASSIC,
    "github-fine-grained": GITHUB_FINE,
    "pem": PEM,
    "note-signer": NOTE_SIGNER,
}


@pytest.mark.parametrize("name", sorted(SECRETS))
@pytest.mark.parametrize("template", ["{}", "key {} end", "x={};", '{{"k": "{}"}}', "({})", "\n{}\n"])
def test_bare_credential_shapes_are_scrubbed(name: str, template: str) -> None:
    secret = SECRETS[name]
    text = template.format(secret)
    out, count = redact_text(text)
    assert count >= 1
    assert secret not in out
    assert REDACTED in out
    # Nothing recognisable from the secret survives, not even its tail.
    assert secret[-8:] not in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abcdef123456.xyz-_~+/=", "Authorization: Bearer [REDACTED]"),
        ("bearer\tTOKENVALUE1234", "bearer\t[REDACTED]"),
        ("password=hunter2&user=bob", "password=[REDACTED]&user=bob"),
        ("PASSWORD: s3cret!", "PASSWORD: [REDACTED]"),
        ('{"api_key": "abc def ghi"}', '{"api_key": [REDACTED]}'),
        ("api-key=k1; apikey=k2", "api-key=[REDACTED]; apikey=[REDACTED]"),
        ("token=abc", "token=[REDACTED]"),
        ("access_token=xyz123 refresh_token='r t'", "access_token=[REDACTED] refresh_token=[REDACTED]"),
        ("client_secret: zzz", "client_secret: [REDACTED]"),
        ("X-Api-Key: k123", "X-Api-Key: [REDACTED]"),
        ("pwd=p passwd=q passphrase=r", "pwd=[REDACTED] passwd=[REDACTED] passphrase=[REDACTED]"),
        ("credentials=a:b", "credentials=[REDACTED]"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEv truncated", "[REDACTED]"),
        ("before " + PEM + " after", "before [REDACTED] after"),
        ("invalid int value: 'PRIVATE+KEY+a+d066b050+Afx3X2RdG'", "invalid int value: '[REDACTED]'"),
        ("PRIVATE+KEY+a+b+c;password: hunter2", "[REDACTED];password: [REDACTED]"),
        ("PRIVATE+KEY+a+b+c&token= s3cr3tvalue", "[REDACTED]&token= [REDACTED]"),
        (
            "k=PRIVATE+KEY+a+b+c,Authorization:Bearer abcdefghijkl",
            "k=[REDACTED],Authorization:Bearer [REDACTED]",
        ),
    ],
)
def test_pairs_and_schemes_keep_their_key(text: str, expected: str) -> None:
    assert redact_text(text)[0] == expected


@pytest.mark.parametrize(
    "text",
    [
        "selected",
        "managed-policy",
        "route_shadow.outcome",
        "provider=zai",
        "claude-opus-4-1",
        "glm-4.6",
        "acme/widgets",
        "harness-direct",
        "max_tokens=100",
        "tokens: 5",
        "risk-assessment-for-the-quarter",
        "task-abcdefghijklmnopqrstuvwxyz0123",
        "0123456789abcdef" * 4,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "The spawn was routed to the z.ai harness because credit failover moved it.",
        "",
        "abc",
        "eyJ",
        "AKIA",
        "sk-short",
        "password=[REDACTED]",
        'password="[REDACTED]"',
        "Bearer [REDACTED]",
    ],
)
def test_ordinary_text_is_returned_as_the_same_object(text: str) -> None:
    out, count = redact_text(text)
    assert count == 0
    assert out is text


def test_count_counts_each_replacement() -> None:
    text = f"{AWS} and {GITHUB_CLASSIC} and password=x"
    out, count = redact_text(text)
    assert count == 3
    assert out == "[REDACTED] and [REDACTED] and password=[REDACTED]"


def test_boundaries() -> None:
    assert redact_text("mask-" + "a" * 30)[1] == 0  # a bare "sk-" inside a word is not a key
    assert redact_text("acme/desk-management-frontend-app")[1] == 0
    assert redact_text("task-" + OPENAI_LEGACY[3:])[0] == "ta[REDACTED]"  # ...but the legacy marker is
    assert redact_text("x" + ANTHROPIC)[0] == "x[REDACTED]"  # named prefixes match anywhere
    assert redact_text("x-" + ANTHROPIC)[0] == "x-[REDACTED]"  # a hyphen is a boundary
    assert redact_text("f" + ZAI)[0] == "f[REDACTED]"  # a longer hex run still loses its last 32


_FRAGMENTS = [
    "password=",
    "token:",
    "Bearer ",
    "sk-",
    "eyJ",
    "AKIA",
    "ghp_",
    "-----BEGIN PRIVATE KEY-----",
    "PRIVATE+KEY+",
]
_ALPHABET = st.sampled_from([*"abcxyzABCXYZ0189-_.=:/ \n\"'", *_FRAGMENTS])


@given(st.lists(st.one_of(_ALPHABET, st.sampled_from(list(SECRETS.values()))), max_size=12).map("".join))
def test_redaction_is_idempotent(text: str) -> None:
    once, _ = redact_text(text)
    twice, count = redact_text(once)
    assert twice == once
    assert count == 0


@given(st.sampled_from(sorted(SECRETS)), st.text(max_size=20), st.text(max_size=20))
def test_secret_never_survives_in_any_context(name: str, before: str, after: str) -> None:
    secret = SECRETS[name]
    out, count = redact_text(f"{before} {secret} {after}")
    assert count >= 1
    assert secret not in out


@given(
    st.lists(st.sampled_from(sorted(SECRETS)), min_size=2, max_size=4),
    st.sampled_from(["", "-", "_", "x", "9"]),
)
def test_glued_secrets_all_go(names: list[str], glue: str) -> None:
    """A secret directly after another (so its boundary check sees the first secret) is still found."""
    text = glue.join(SECRETS[name] for name in names)
    out, _ = redact_text(text)
    for name in names:
        assert SECRETS[name][-8:] not in out, (name, out)


def test_redact_value_copies_and_reports_paths() -> None:
    original = {
        "a": ["x", "password=1", ("tuple", AWS)],
        ANTHROPIC: 1,
        "b/c": {"token=abc": "d", "n": 5, "ok": True, "none": None},
        "clean": "fine",
    }
    out, paths = redact_value(original, "/root")
    assert out["a"] == ["x", "password=[REDACTED]", ("tuple", "[REDACTED]")]
    assert isinstance(out["a"][2], tuple)
    assert out[REDACTED] == 1
    assert out["b/c"] == {"token=[REDACTED]": "d", "n": 5, "ok": True, "none": None}
    assert paths == ["/root/a/1", "/root/a/2/1", f"/root/{REDACTED}", "/root/b~1c/token=[REDACTED]"]
    assert original["a"][1] == "password=1"  # the input is not modified
    assert ANTHROPIC not in repr(out) and ANTHROPIC not in repr(paths)


def test_redact_value_keeps_colliding_scrubbed_keys() -> None:
    out, paths = redact_value({AWS: 1, "AKIAABCDEFGHIJKLMNOP": 2})
    assert out == {REDACTED: 1, f"{REDACTED}#2": 2}
    assert paths == [f"/{REDACTED}", f"/{REDACTED}#2"]


def test_redact_value_leaves_clean_values_equal() -> None:
    value = {"kind": "route-shadow", "attributes": {"route_shadow.rung": 3, "x": [1, 2, None]}}
    out, paths = redact_value(value)
    assert out == value and paths == []


def test_values_under_credential_named_keys_are_scrubbed_whole() -> None:
    value = {
        "password": "hunter2",
        "client_secret": "abc",
        "X-Api-Key": "k",
        "auth": {"token": "t", "token_count": 3, "max_tokens": "100"},
        "authorization": "Basic dXNlcjpwYXNz",
        "pwd": "",
        "secret": REDACTED,
        "tokens": "fine",
    }
    out, paths = redact_value(value)
    assert out == {
        "password": REDACTED,
        "client_secret": REDACTED,
        "X-Api-Key": REDACTED,
        "auth": {"token": REDACTED, "token_count": 3, "max_tokens": "100"},
        "authorization": REDACTED,
        "pwd": "",
        "secret": REDACTED,
        "tokens": "fine",
    }
    assert paths == ["/password", "/client_secret", "/X-Api-Key", "/auth/token", "/authorization"]
    assert redact_value(out) == (out, [])


def test_json_pointer_escaping() -> None:
    assert json_pointer_token("a/b~c") == "a~1b~0c"
    assert json_pointer_token("plain") == "plain"


def test_the_sanitizer_remembers_only_strings_it_found_clean() -> None:
    from otel_route_shadow.chain import sanitize
    from otel_route_shadow.chain.sanitize import sanitize_payload

    secret = "token sk-ant-api03-" + "A1b2C3d4" * 8
    clean = "route_shadow.some.attribute.name"
    for _ in range(2):  # the second walk takes the remembered path for the clean string
        payload, marks = sanitize_payload({clean: clean, "note": secret})
        assert payload[clean] == clean and "sk-ant" not in payload["note"]
        assert [m.path for m in marks] == ["/note"]
    assert clean in sanitize._CLEAN
    assert not any("sk-ant" in text for text in sanitize._CLEAN)


@pytest.mark.parametrize("name", ["o'hara.example/log", 'say"what/log', "a,b.example/log", "host:8443/log"])
@pytest.mark.parametrize(
    "template", ["{}", "token={}", "Bearer {}", "secret: '{}'", "{};password: p", "x {} y"]
)
def test_a_note_signer_key_goes_whole_whatever_its_name_holds(name: str, template: str) -> None:
    """A key's name may hold quotes, commas and colons: the branch stopped at a quote, and a ``token=``
    pair or a ``Bearer`` word before the key took it up to a comma or colon, leaving the seed."""
    from otel_route_shadow.tlog import Signer

    key = Signer.generate(name).secret_string()
    seed = key.split("+", 4)[4]
    out, _ = redact_text(template.format(key))
    assert not [seed[i : i + 8] for i in range(len(seed) - 7) if seed[i : i + 8] in out], out
    assert redact_text(out) == (out, 0)


def test_the_signer_key_format_named_in_an_error_survives_redaction() -> None:
    """The parser's own hint spelled the format with a literal prefix, which was then scrubbed."""
    from otel_route_shadow.tlog import NoteError, Signer

    with pytest.raises(NoteError) as refused:
        Signer.parse("PUBLIC+KEY+a+12345678+x")
    assert redact_text(str(refused.value)) == (str(refused.value), 0)


EYJ_IN_MATERIAL = "PRIVATE+KEY+log.example/a+ee1ecc1a+AQPoMxPeyJ5LHAOIWVR/Las3VIT3CKVBP/Th/SHotlcG"
PEM_BODY = "MIIEowIBAAKCAQEA7"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (EYJ_IN_MATERIAL, ""),  # a JWT-looking run inside a key's material stopped the branch
        ("PRIVATE+KEY+a+1234abcd9+AZ1yfK3mQ0pLr9vT2sWcXeB7nH5jD8gA4uI6oE0tRq", ""),  # a 9-character id
        ("private_key: " + PEM, "private_key: "),  # a PEM block as a pair's value: its body was left
        ("password=" + PEM, "password="),
        ("Authorization: Bearer " + PEM, "Authorization: Bearer "),
    ],
)
def test_a_credential_inside_another_shape_goes_whole(text: str, kept: str) -> None:
    out, _ = redact_text(text)
    assert out == kept + REDACTED, out


def test_every_glued_or_wrapped_note_key_and_secret_goes() -> None:
    """Keys with odd names glued before and after every other shape, in pairs and Bearer values: a
    name like ``task-scheduler`` stopped the branch at its ``sk-``, and a value starting a character
    before the key took it up to a comma, colon or quote; the seed was left."""
    from otel_route_shadow.tlog import Signer

    names = [
        "example.com/task-scheduler-production",
        "o'hara/log",
        'say"what',
        "a,b",
        "host:8443/x",
        "x;y&z<w>",
    ]
    keys = [Signer.generate(name).secret_string() for name in names] + [EYJ_IN_MATERIAL]
    wrappers = ["{}", "password={}", "token: {}", 'secret="{}"', "api_key='{}'", "Bearer {}", "x{}y"]
    for key in keys:
        seed = key.split("+", 4)[4]
        for other in SECRETS.values():
            for glue in ["", "x", "9", "-", "_", "=", "'", '"', ":", " ", ",", "+", "/", "."]:
                for body in (key + glue + other, other + glue + key):
                    for wrapper in wrappers:
                        out, _ = redact_text(wrapper.format(body))
                        assert not [
                            seed[i : i + 8] for i in range(len(seed) - 7) if seed[i : i + 8] in out
                        ], out
                        assert other[-8:] not in out and PEM_BODY not in out, out
                        assert redact_text(out) == (out, 0), out


# -- cost on hostile input (row 2e of docs/benchmarks.md times it; these pin the behaviour) ---------------

_B64URL_PLAIN = "abcdfhijklmnopqrtuvwxz0123456789_"
"""Base64url characters that spell no credential start (no "sk-", "gh", "eyJ", "AKIA")."""


def test_jwt_branch_scans_a_long_base64url_run_once() -> None:
    """Every "eyJ" of a long run without a dot scanned the run to its end and failed: quadratic
    ("-" + "eyJ" * 33333 took 3.5 s). The header scan now stops at the next "eyJ"; such a run is no
    token and is left as it is, whatever its length or what follows it."""
    for text in [
        "-" + "eyJ" * 5000,
        "-" + "eyJ" * 5000 + ".",
        "-" + "eyJa" * 4000 + " x",
        "x=" + "eyJ" * 5000,
    ]:
        out, count = redact_text(text)
        assert count == 0
        assert out is text


def test_a_jwt_whose_header_holds_eyj_again_goes_whole() -> None:
    """The JWT branch matches at the header's last "eyJ" that leaves room for the rest; the replacement
    still starts at the first one, so no part of the header is left."""
    payload, signature = "eyJzdWIiOiIxMjM0NTY3ODkwIn0", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
    headers = [
        "eyJhbGciOiJIUzI1NiJ9eyJraWQiOiJrMSJ9",  # a second "eyJ" far from the dot
        "eyJhbGciOiJIUzI1NiJ9eyJhYg",  # ...within 10 characters of it (no start matches there)
        "eyJhbGciOiJIeyJ",  # ...right before it
        "eyJ" + "eyJ" * 50 + "abcdefgh",  # the run of the quadratic case, as a header
        "eyJeyJabcde",  # 8 characters after the first "eyJ" only when the second is counted
    ]
    for header in headers:
        token = f"{header}.{payload}.{signature}"
        for before, after in [("", ""), ("Authorization: ", " end"), ("x", ";"), ('{"t":"', '"}')]:
            out, count = redact_text(before + token + after)
            assert (out, count) == (before + REDACTED + after, 1), (header, before, out)


def test_a_header_too_short_from_its_first_eyj_is_no_jwt() -> None:
    """A dot 8 characters after the first "eyJ" or fewer is no token, however many "eyJ" the run holds."""
    for text in ["-eyJeyJab.abcdefghij.sig", "-eyJabcde.abcdefghij.sig", "-eyJ.abcdefghij.sig"]:
        assert redact_text(text) == (text, 0)


@pytest.mark.parametrize(
    "key",
    ["sk-ant-AbCd", "ghp_" + "A1b2C3d4E5" * 2 + "abcd", "AKIAIOSFODNN7EXAMPLE", "sk-proj-T3BlbkFJ"],
)
def test_a_key_inside_a_jwt_header_goes_with_the_token(key: str) -> None:
    """A key matched in a header before the "eyJ" the JWT branch matches at came first; one whose length
    runs past that "eyJ" hid the token, and its payload and signature were left."""
    header = "eyJhbGciOiJIUzI1NiJ9" + key + "eyJhYmNkZWZnaGlqa2xt"
    token = f"{header}.eyJzdWIiOiJ4In0xyz.c2lnbmF0dXJlYWJj"
    for before in ["", " ", "x.", "\n"]:
        out, count = redact_text(before + token + " after")
        assert (out, count) == (before + REDACTED + " after", 1), (key, before, out)


@given(
    st.sampled_from(["", " ", "(", "Authorization: Bearer ", "id="]),
    st.lists(
        st.sampled_from(["eyJ", "sk-", "sk-ant-", "ghp_", "AKIA", "A", "a", "0", "_", "-", "x" * 8]),
        max_size=12,
    ),
    st.text(_B64URL_PLAIN, min_size=8, max_size=20),
    st.text(_B64URL_PLAIN, max_size=20),
)
def test_a_jwt_goes_whole_whatever_its_header_holds(
    before: str, chunks: list[str], payload: str, signature: str
) -> None:
    header = "eyJ" + "".join(chunks)
    assume(len(header) >= 11)
    text = f"{before}{header}.eyJ{payload}.{signature} end"
    out, count = redact_text(text)
    assert count == 1
    assert out.endswith(f"{REDACTED} end")
    assert REDACTED not in out[: -len(f"{REDACTED} end")]  # the header's first "eyJ" went with the rest
    assert header not in out and "eyJ" not in out.removeprefix(before)


def test_a_chain_of_glued_bare_sk_keys_goes_in_one_pass() -> None:
    """A bare "sk-" key glued to the secret before it fails its boundary check until that secret is
    replaced; a chain of them went one key per pass, and past the 16th pass the rest were left."""
    key = "sk-" + "a1B2c3D4e5" * 2
    for glued in [key * 40, AWS + key * 40, key * 20 + GITHUB_CLASSIC + key * 20]:
        out, count = redact_text(" " + glued + " end")
        assert "a1B2c3D4e5" not in out and "A1b2C3d4E5" not in out, out
        assert out == " " + REDACTED * count + " end"
        assert redact_text(out) == (out, 0)


def _hostile(unit: str, head: str = "", tail: str = "", size: int = 20_000) -> str:
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


HOSTILE = [
    _hostile("eyJ", "-"),
    _hostile("eyJ", "-", ".bbbbbbbbbb."),
    _hostile("eyJaaaaaaaaa."),
    _hostile("eyJ", "-eyJaaaaaaaaa."),
    _hostile("sk-eyJ", "-"),
    _hostile("AKIAIOSFODNN7EXAMPLEeyJ", "-eyJ"),
    _hostile("AKIAIOSFODNN7EXAMPLEeyJ", "-eyJ", "abcdefgh.ijklmnop.sig"),
    _hostile("sk-ant-" + "a" * 20 + "eyJ", "-eyJ"),
    _hostile("eyJsk-AKIAghp_"),
    _hostile("sk-" + "a1B2c3D4e5" * 2, " "),
    _hostile("token="),
    _hostile('token="'),
    _hostile("Bearer "),
    _hostile("-----BEGIN RSA PRIVATE KEY"),
    _hostile("PRIVATE+KEY+a+b+"),
    _hostile("0123456789abcdef0123456789abcdef."),
    _hostile("a", "ghp_"),
]


@pytest.mark.parametrize("text", HOSTILE, ids=[f"{text[:24]!r}x{len(text)}" for text in HOSTILE])
def test_hostile_input_is_scrubbed_idempotently(text: str) -> None:
    """Strings built from one credential prefix repeated (the shapes the cost audit timed): what comes out
    holds nothing the patterns match again."""
    out, _ = redact_text(text)
    assert redact_text(out)[1] == 0


_PREFIXES = [
    "eyJ",
    "eyJaaaaaaaaa.",
    "sk-",
    "sk-ant-",
    "ghp_",
    "github_pat_",
    "AKIA",
    "0123456789abcdef0123456789abcdef.",
    "token=",
    'token="',
    "Bearer ",
    "-----BEGIN RSA PRIVATE KEY-----",
    "PRIVATE+KEY+",
    "a1B2c3D4e5",
    "AAAAAAAA",
    ".",
    "-",
    " ",
]


@given(st.lists(st.tuples(st.sampled_from(_PREFIXES), st.integers(1, 40)), max_size=8))
def test_repeated_credential_prefixes_are_scrubbed_idempotently(runs: list[tuple[str, int]]) -> None:
    text = "".join(prefix * times for prefix, times in runs)
    once, _ = redact_text(text)
    assert redact_text(once) == (once, 0)


@pytest.mark.parametrize(
    "text",
    [
        " sk-abcdefghijkl-----BEGIN RSA PRIVATE KEY-----\nMIIEsecretbody",
        " AKIA0123456789AB-----BEGIN PRIVATE KEY-----\nMIIEsecretbody",
        " ghp_" + "a" * 29 + "PRIVATE+KEY+name+0123abcd+AQ" + "x" * 42,
        " sk-" + "b" * 19 + "PRIVATE+KEY+name+0123abcd+AQ" + "x" * 42,
    ],
    ids=["sk-before-pem", "aws-before-pem", "ghp-before-note-key", "sk-before-note-key"],
)
def test_a_key_shape_never_takes_the_start_of_a_block_glued_after_it(text: str) -> None:
    """A shape's minimum run took the first characters of a PEM block or note key glued after it
    ("-----BEG", "P"), so that block's own branch no longer matched and its body was left."""
    redacted, count = redact_text(text)
    assert count >= 1 and "secretbody" not in redacted and "x" * 42 not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "sk-ant-api03------BEGINq8Zr2LmN0pXwYv7TtKd3",
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.-----BEGINsig_abcdefghijklmnop end",
    ],
    ids=["key", "jwt-signature"],
)
def test_a_bare_begin_inside_a_key_is_part_of_it(text: str) -> None:
    """Keeping a shape's minimum off a PEM block's start must not stop at a bare "-----BEGIN" that
    starts no private key block: the key (or the JWT's signature) was left in clear."""
    redacted, _ = redact_text(text)
    assert "q8Zr2LmN0pXwYv7TtKd3" not in redacted and "sig_abcdefghijklmnop" not in redacted


def test_a_payload_key_refused_by_the_chain_is_never_quoted() -> None:
    # A non-ASCII or non-string key was quoted whole in the error, which reaches logs.
    from otel_route_shadow.chain import ChainPayloadError
    from otel_route_shadow.chain.sanitize import sanitize_payload

    for key in ("sk-ant-api03-" + "é" * 30, b"sk-ant-api03-abcdefghijklmnop"):
        with pytest.raises(ChainPayloadError) as caught:
            sanitize_payload({"kind": "x", "nested": {key: 1}})
        assert "sk-ant" not in str(caught.value) and "/nested" in str(caught.value)


def test_many_payload_keys_that_scrub_alike_are_renamed_one_try_each(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each renamed key tried every suffix already taken: quadratic in the keys that scrub alike.
    from otel_route_shadow.chain import sanitize

    tries = 0
    real = sanitize.unique_key

    class Counting(dict[str, object]):
        def __contains__(self, key: object) -> bool:
            nonlocal tries
            tries += 1
            return super().__contains__(key)

    def counted(key: str, taken: object, suffixes: dict[str, int] | None = None) -> str:
        return real(key, Counting(taken), suffixes)  # type: ignore[arg-type]

    monkeypatch.setattr(sanitize, "unique_key", counted)
    keys = {f"token=sk-ant-api03-{i:020d}abcdefgh": i for i in range(300)}
    payload, _ = sanitize.sanitize_payload({"kind": "x", "fields": keys})
    assert len(payload["fields"]) == 300
    assert tries < 3 * 300
