"""Zero disclosure (the ADR-0138 guards D6 inherits): no secret reaches a span, the chain, a log or
the command line, and no model that reaches them has a credential-shaped field."""

from __future__ import annotations

import ast
import io
import json
import logging
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from otel_route_shadow import core
from otel_route_shadow.cli import main as cli_main
from otel_route_shadow.instrumentation import RouteShadowInstrumentor, shadow_spawn
from otel_route_shadow.shadow import local_account_availability

PACKAGE = Path(__file__).resolve().parent.parent / "otel_route_shadow"

# Each canary: the whole credential-shaped string, and the part that is secret.
CANARIES: dict[str, tuple[str, str]] = {
    "anthropic": ("sk-ant-api03-" + "Qk9" * 14 + "AA", "Qk9Qk9Qk9Qk9"),
    "openai": ("sk-proj-" + "Zq7" * 16, "Zq7Zq7Zq7Zq7"),
    "zai": ("0123456789abcdef0123456789abcdef.CanaryZaiSecret1", "CanaryZaiSecret1"),
    "jwt": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJlY2FuYXJ5", "c2lnbmF0dXJlY2FuYXJ5"),
    "aws": ("AKIACANARYCANARY1234", "CANARYCANARY1234"),
    "github": ("ghp_" + "Cx" * 18, "CxCxCxCxCxCx"),
    "bearer": ("Bearer canaryBearerTokenValue123", "canaryBearerTokenValue123"),
    "password": ("password=hunter2canary", "hunter2canary"),
    "pem": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIcanaryPEMbody\n-----END RSA PRIVATE KEY-----",
        "MIIcanaryPEMbody",
    ),
}
SECRETS = [secret for _, secret in CANARIES.values()]

_CREDENTIAL_FIELD = re.compile(
    r"secret|token|passw|api_?key|credential|private_?key|authorization|bearer|cookie", re.IGNORECASE
)


def _models() -> list[type[BaseModel]]:
    from otel_route_shadow import store

    models: list[type[BaseModel]] = [
        core.RouteContext,
        core.Account,
        core.LegacyRoute,
        core.LegacyStage,
        core.RouteDecision,
        core.PolicyConsideration,
        core.AccountVerdict,
        core.ShadowDecision,
        core.PolicySnapshot,
        core.RoutingPolicy,
        core.RoutingMatch,
        core.RoutingAction,
    ]
    from otel_route_shadow import chain

    for module in (chain, store):
        models.extend(
            obj for obj in vars(module).values() if isinstance(obj, type) and issubclass(obj, BaseModel)
        )
    return list(dict.fromkeys(models))


def _field_names(model: type[BaseModel], seen: set[type[BaseModel]]) -> list[str]:
    if model in seen:
        return []
    seen.add(model)
    names = []
    for name, info in model.model_fields.items():
        names.append(name)
        if info.alias:
            names.append(info.alias)
        annotation = info.annotation
        for arg in (*getattr(annotation, "__args__", ()), annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                names.extend(_field_names(arg, seen))
    return names


@pytest.mark.parametrize("model", _models(), ids=lambda m: m.__name__)
def test_no_model_that_reaches_a_span_or_the_chain_has_a_credential_shaped_field(
    model: type[BaseModel],
) -> None:
    offending = [name for name in _field_names(model, set()) if _CREDENTIAL_FIELD.search(name)]
    assert offending == []


def test_the_package_never_calls_get_secret_value() -> None:
    calls = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "get_secret_value":
                calls.append(f"{path}:{node.lineno}")
            if isinstance(node, ast.Name) and node.id == "get_secret_value":
                calls.append(f"{path}:{node.lineno}")
    assert calls == []


def test_account_availability_reports_presence_never_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARIES["anthropic"][0])
    monkeypatch.delenv("ZAI_API_KEY", raising=False)
    monkeypatch.delenv("GLM_API_KEY", raising=False)
    accounts = local_account_availability()
    text = json.dumps([a.model_dump() for a in accounts])
    assert {a.provider: a.state for a in accounts} == {"anthropic": "available", "zai": "unknown"}
    assert all(secret not in text for secret in SECRETS)


def _poisoned_context() -> dict[str, Any]:
    c = {name: value for name, (value, _) in CANARIES.items()}
    stages = [
        {"mechanism": "role-dial", "provider": "zai", "model": "glm-5.1", "detail": c["bearer"]},
        {"mechanism": c["jwt"], "provider": "anthropic", "model": c["aws"], "detail": c["pem"]},
    ]
    return {
        "repo": None,
        "repo_slug": "acme-" + c["github"],
        "role": c["openai"],
        "principal_id": c["anthropic"],
        "request_face": "agentic",
        "requirement": c["password"],
        "accounts": [
            {"id": c["zai"], "provider": "zai", "state": "available"},
            {"id": "anthropic-legacy", "provider": c["aws"], "state": c["jwt"]},
        ],
        "legacy_route": {
            "provider": "zai",
            "model": c["github"],
            "account": c["anthropic"],
            "transport": "harness-direct",
            "mechanism": "role-dial",
            "mechanism_detail": c["pem"],
            "stages": stages,
        },
    }


def _assert_clean(where: str, text: str) -> None:
    leaked = [secret for secret in SECRETS if secret in text]
    assert leaked == [], f"{where} leaked {leaked}"


def test_canaries_reach_no_span_chain_log_or_cli_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name, (value, _) in CANARIES.items():
        monkeypatch.setenv(f"CANARY_{name.upper()}", value)
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARIES["anthropic"][0])
    monkeypatch.setenv("ZAI_API_KEY", CANARIES["zai"][0])
    caplog.set_level(logging.DEBUG)
    context = _poisoned_context()

    provider = TracerProvider()
    spans = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    chain = tmp_path / "chain.jsonl"
    store_dir = tmp_path / "store"
    from otel_route_shadow.store import RoutingPolicyStore

    RoutingPolicyStore(store_dir).save([core.RoutingPolicy.model_validate({"id": "catch-all"})])
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(tracer_provider=provider, chain_path=chain, seams=(), store=store_dir)
    try:
        with shadow_spawn(context, seam="canary") as record:
            assert record is not None
        # Issue 15's fields: account verdicts (a catch-all policy judges the poisoned accounts), claims that
        # contradict the stages (the derived detail comes from a poisoned stage), the host's raw
        # role, a conversation id.
        lying = {**context, "legacy_route": {**context["legacy_route"], "mechanism": "fleet-ratchet"}}
        with shadow_spawn(lying, seam="canary", conversation_id=CANARIES["bearer"][0]) as record:
            assert record is not None
            assert record.attributes["route_shadow.claim_mismatch"] == "mechanism"
            assert "route_shadow.verdicts.accounts" in record.attributes
            assert "route_shadow.host_role" in record.attributes
        # A shadow-path error message must be scrubbed too.
        with shadow_spawn({**context, "request_face": 17}, seam="canary"):
            pass
    finally:
        instrumentor.uninstrument()

    finished = spans.get_finished_spans()
    assert len(finished) == 2
    span_text = json.dumps([json.loads(s.to_json()) for s in finished])
    _assert_clean("span", span_text)
    _assert_clean("chain", chain.read_text())
    _assert_clean("log", caplog.text)

    context_file = tmp_path / "context.json"
    context_file.write_text(json.dumps(context))
    for argv in (
        ["explain", "--context", str(context_file)],
        ["verify", str(chain)],
        ["verify", str(chain), "--json"],
    ):
        out = io.StringIO()
        with redirect_stdout(out):
            code = cli_main(argv)
        assert code == 0, argv
        _assert_clean(" ".join(argv), out.getvalue())


def test_served_strings_are_redacted_like_every_host_string(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What a response hook or a span of the run says served a spawn (issue 27) is a host's string:
    redacted before it reaches the seam span, the chain or a log line."""
    caplog.set_level(logging.DEBUG)
    c = {name: value for name, (value, _) in CANARIES.items()}
    provider = TracerProvider()
    spans = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    chain = tmp_path / "chain.jsonl"
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(tracer_provider=provider, chain_path=chain, seams=())
    context = {**_poisoned_context(), "principal_id": "canary"}
    try:
        with shadow_spawn(
            context,
            seam="canary-hook",
            response_hook=lambda call, result, error: {"provider": c["bearer"], "model": c["aws"]},
        ):
            pass
        run_attributes = {"gen_ai.provider.name": c["github"], "gen_ai.response.model": c["jwt"]}
        with (
            shadow_spawn(context, seam="canary-run"),
            provider.get_tracer("llm").start_as_current_span("chat", attributes=run_attributes),
        ):
            pass
        with shadow_spawn(  # a mapping no route can be made of: its values never reach the log
            context, seam="canary-garbage", response_hook=lambda call, result, error: {"provider": [c["pem"]]}
        ):
            pass
    finally:
        instrumentor.uninstrument()
    seam_spans = [s for s in spans.get_finished_spans() if "route_shadow.seam" in (s.attributes or {})]
    assert len(seam_spans) == 3
    served = [s.attributes.get("route_shadow.served.model") for s in seam_spans]
    assert served[0] is not None and served[1] is not None  # reported, and redacted
    _assert_clean("span", json.dumps([json.loads(s.to_json()) for s in seam_spans]))
    _assert_clean("chain", chain.read_text())
    _assert_clean("log", caplog.text)


def test_the_checkpoint_signing_key_reaches_no_span_chain_log_checkpoint_or_cli_output(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from otel_route_shadow.logstore import read_signing_keys
    from otel_route_shadow.tlog import Signer

    caplog.set_level(logging.DEBUG)
    key_file = tmp_path / "log.key"
    assert cli_main(["key", "generate", "--name", "example.com/canary", "--out", str(key_file)]) == 0
    verifier = capsys.readouterr().out.strip()
    secret_string = key_file.read_text().strip()
    seed_b64 = secret_string.split("+", 4)[4]
    assert len(seed_b64) == 44
    signer = read_signing_keys(str(key_file))[0]
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    seed_hex = signer._key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()).hex()
    secrets = [seed_b64, seed_b64[4:24], seed_hex[:24]]

    def clean(where: str, text: str) -> None:
        assert [s for s in secrets if s in text] == [], f"{where} leaked the signing key"

    clean("key generate output", verifier)
    clean("signer repr", repr(signer) + str(signer))
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"

    provider = TracerProvider()
    spans = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    chain = tmp_path / "chain.jsonl"
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(
        tracer_provider=provider, chain_path=chain, seams=(), signing_key=key_file, checkpoint_records=1
    )
    try:
        for _ in range(3):
            with shadow_spawn(_poisoned_context(), seam="canary"):
                pass
        config_text = repr(instrumentor.runtime.config) if instrumentor.runtime else ""  # type: ignore[union-attr]
    finally:
        instrumentor.uninstrument()
    clean("config repr", config_text)
    clean("span", json.dumps([json.loads(s.to_json()) for s in spans.get_finished_spans()]))
    clean("chain", chain.read_text())
    checkpoints = tmp_path / "chain.jsonl.tlog" / "checkpoints"
    assert "example.com/canary" in checkpoints.read_text()
    for path in (tmp_path / "chain.jsonl.tlog").rglob("*"):
        if path.is_file():
            clean(str(path), path.read_bytes().decode("latin-1"))

    broken = tmp_path / "broken.key"
    broken.write_text(secret_string[:-3] + "AAA\n")
    wrong_id = tmp_path / "wrong-id.key"
    wrong_id.write_text(secret_string.replace("+example.com/canary+", "+example.com/other+") + "\n")
    broken.chmod(0o600)
    wrong_id.chmod(0o600)
    for argv in (
        ["verify", str(chain), "--key", verifier],
        ["verify", str(chain), "--key", str(key_file)],
        ["prove", str(chain), "--seq", "0"],
        ["verify-proof", "--proof", str(key_file), "--checkpoint", str(checkpoints), "--key", verifier],
        ["verify-proof", "--proof", str(key_file), "--checkpoint", str(key_file), "--key", str(key_file)],
    ):
        cli_main(argv)
        captured = capsys.readouterr()
        clean(" ".join(argv), captured.out + captured.err)
    for bad in (broken, wrong_id):
        try:
            read_signing_keys(str(bad))
        except ValueError as exc:
            clean("key file error", str(exc))
    instrumentor.instrument(tracer_provider=provider, chain_path=chain, seams=(), signing_key=broken)
    instrumentor.uninstrument()
    clean("log", caplog.text)
    assert Signer.parse(secret_string).key_id == signer.key_id


_LONG_KEY = "sk-ant-api03-" + "A1b2C3d4E5" * 8 + "-TailOfTheKeyXyz0123456789AA"
_JOB = {
    "repo": "acme/widgets",
    "principal_id": "adr_reviewer",
    "request_face": "agentic",
    "legacy_route": {"provider": "zai", "model": "glm-4.6", "account": "a", "stages": []},
    "anthropic_api_key": _LONG_KEY,
}


def _validates(call: Any) -> Any:
    return core.RouteContext.model_validate(call.args[0])


def _wraps_a_validation_error(call: Any) -> Any:
    try:
        return core.RouteContext.model_validate(call.args[0])
    except ValueError as exc:
        raise RuntimeError("no context for this job") from exc


def _groups_a_validation_error(call: Any) -> Any:
    try:
        return core.RouteContext.model_validate(call.args[0])
    except ValueError as exc:
        raise ExceptionGroup("no context for this job", [LookupError("no such job"), exc]) from None


@pytest.mark.parametrize(
    "extractor",
    [lambda call: call.args[0], _validates, _wraps_a_validation_error, _groups_a_validation_error],
    ids=["validated-by-the-seam", "raised-by-the-extractor", "cause-of-another-error", "in-an-exception-group"],
)
def test_a_validation_error_logs_no_tail_of_a_credential(
    extractor: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A context failing validation was logged with pydantic's text, which quotes input values cut to
    ``start...end``: redaction caught the start of an API key and printed its end."""
    from otel_route_shadow.instrumentation import shadow_seam

    caplog.set_level(logging.DEBUG)
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider(), chain_path=tmp_path / "chain.jsonl", seams=())
    try:
        run_agent = shadow_seam("agentic", extractor=extractor)(lambda job: "ran")
        assert run_agent(_JOB) == "ran"
    finally:
        instrumentor.uninstrument()
    assert "anthropic_api_key" in caplog.text  # the problem is still named, by its location
    assert "Extra inputs are not permitted" in caplog.text
    tail = _LONG_KEY[-16:]
    assert tail not in caplog.text
    assert "input_value" not in caplog.text


def test_a_contained_exception_group_is_logged_with_its_exceptions_each_once() -> None:
    """Regression: an exception group was logged by its own message alone, without the exceptions
    inside it. They are shown as ``traceback`` bounds them (15 wide, 10 deep), each exception once:
    a group of 15 copies of one group, 10 deep, has 15**10 paths."""
    from otel_route_shadow.instrumentation.error_text import exception_trace

    shallow = exception_trace(ExceptionGroup("job", [LookupError("no such job"), KeyError("sk-ant-api03-" + "x" * 40)]))
    assert "LookupError: no such job" in shallow and "[REDACTED]" in shallow and "xxxx" not in shallow
    group: BaseException = ExceptionGroup("innermost", [LookupError("no such job")])
    for level in range(12):
        group = ExceptionGroup(f"level {level}", [group] * 16)
    text = exception_trace(group)
    assert text.count("LookupError: no such job") == 0  # deeper than shown
    assert text.count("ExceptionGroup: level 2 ") == 1 and text.count("(shown above)") == 14 * 10
    assert text.count("and 1 more") == 10 and "nested more than 10 deep" in text


class _Unprintable(ExceptionGroup):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_an_exception_whose_text_fails_is_logged_as_traceback_logs_it() -> None:
    """Regression: a group's own line was written with ``str(exc)``, so a group whose ``__str__`` raises
    made the log line raise inside the host's call; ``traceback`` writes ``<exception str() failed>``."""
    from otel_route_shadow.instrumentation.error_text import (
        exception_line,
        exception_summary,
        exception_trace,
    )

    group = _Unprintable("x", [LookupError("no such job")])
    assert "<exception str() failed>" in exception_line(group)
    assert "<exception str() failed>" in exception_trace(group) and "LookupError: no such job" in exception_trace(group)
    assert exception_summary(group) == "<exception str() failed>"


def test_the_docs_say_redactions_holds_the_writers_marks_only_not_the_plugins(tmp_path: Path) -> None:
    """The docs said ``redactions`` names the fields that changed, yet a plugin record whose host string
    lost a credential has ``[]``: the plugin scrubs before the writer sees it. The docs now say so."""
    chain = tmp_path / "chain.jsonl"
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider(), chain_path=chain, seams=())
    context = {**_poisoned_context(), "principal_id": "loop-" + CANARIES["aws"][0]}
    try:
        with shadow_spawn(context, seam="canary"):
            pass
    finally:
        instrumentor.uninstrument()
    [record] = [json.loads(line) for line in chain.read_text().splitlines()]
    assert record["payload"]["attributes"]["route_shadow.principal_id"] == "loop-[REDACTED]"
    assert record["redactions"] == []
    docs = PACKAGE.parent / "docs"
    assert "names the fields the writer changed" in (docs / "auditing.md").read_text()
    assert "The marks name what the **writer** changed, and only that." in (docs / "chain-format.md").read_text()


def test_a_credential_shaped_key_or_witness_policy_path_is_redacted_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The signing-key and witness-policy paths went into log lines as given
    # ("checkpoints unsigned: /nonexist/sk-ant-..."), although every log line is to be redacted.
    caplog.set_level(logging.DEBUG)
    provider = TracerProvider()
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(
        tracer_provider=provider,
        chain_path=tmp_path / "chain.jsonl",
        seams=(),
        signing_key=str(tmp_path / CANARIES["anthropic"][0]),
        witness_policy=str(tmp_path / CANARIES["github"][0]),
    )
    instrumentor.uninstrument()
    assert "checkpoints unsigned" in caplog.text
    _assert_clean("log", caplog.text)


def test_a_credential_shaped_origin_is_never_published_in_a_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    # A credential-shaped origin was redacted on spans and records but written in full into every
    # checkpoint note: the default origin is used (unsigned), and no key is made with such a name.
    caplog.set_level(logging.DEBUG)
    canary, secret = CANARIES["github"]
    checkpoint = _checkpoint_after_one_spawn(tmp_path, origin=f"example.com/{canary}")
    assert secret not in checkpoint and "/route-shadow/" in checkpoint.splitlines()[0]
    assert "the origin set looks like a credential" in caplog.text
    _assert_clean("log", caplog.text)
    assert cli_main(["key", "generate", "--name", f"example.com/{canary}", "--out", str(tmp_path / "k")]) == 2
    assert "looks like a credential" in capsys.readouterr().err and not (tmp_path / "k").exists()


def test_a_key_file_named_like_a_credential_signs_nothing_for_rotate_either(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only the plugin refused such a key (key generate no longer makes one, but a key file made before,
    # or by other tools, still may be): rotate signed its anchor's checkpoint, publishing the name in full.
    from tlog_support import key_file

    from otel_route_shadow.chain import DecisionChain
    from otel_route_shadow.tlog import Signer

    canary, secret = CANARIES["github"]
    keys = key_file(tmp_path / "log.key", Signer.generate(f"example.com/{canary}"))
    chain = tmp_path / "chain.jsonl"
    with DecisionChain(chain) as log:
        log.append({"kind": "route-shadow", "n": 0})
    assert cli_main(["rotate", str(chain), "--key", keys]) == 2
    captured = capsys.readouterr()
    assert "looks like a credential" in captured.err
    _assert_clean("rotate's output", captured.out + captured.err)
    assert secret not in "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file() and p.name != "log.key")


def test_the_plugin_given_a_key_named_like_a_credential_checkpoints_unsigned_under_the_default_origin(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tlog_support import key_file

    from otel_route_shadow.tlog import Signer

    caplog.set_level(logging.DEBUG)
    canary, secret = CANARIES["github"]
    keys = key_file(tmp_path / "log.key", Signer.generate(f"example.com/{canary}"))
    checkpoint = _checkpoint_after_one_spawn(tmp_path, signing_key=keys)
    assert secret not in checkpoint and "/route-shadow/" in checkpoint.splitlines()[0]
    assert "looks like a credential" in caplog.text
    _assert_clean("log", caplog.text)


def _checkpoint_after_one_spawn(tmp_path: Path, **settings: Any) -> str:
    """The checkpoint note of a chain under ``tmp_path`` after one spawn, instrumented with ``settings``."""
    instrumentor = RouteShadowInstrumentor()
    instrumentor.instrument(
        tracer_provider=TracerProvider(), chain_path=tmp_path / "chain.jsonl", seams=(), **settings
    )
    try:
        with shadow_spawn(_poisoned_context(), seam="canary-checkpoint"):
            pass
    finally:
        instrumentor.uninstrument()
    return (tmp_path / "chain.jsonl.tlog" / "checkpoint").read_text()
