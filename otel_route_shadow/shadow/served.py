"""What served a spawn, from what the host has, and what the seam span and its record then say.

Three readers, each total (anything they cannot read is "nothing reported", never an error):

* :func:`served_route`: what a seam's response hook returned (a :class:`ServedRoute`, a mapping of
  its fields, or None); anything else is a :class:`ServedRouteError`, which the runtime contains;
* :func:`served_from_attributes`: the attributes of a span of the run, when the run happens in the
  host's process: the GenAI conventions (``gen_ai.provider.name``, ``gen_ai.response.model``),
  OpenInference (``llm.provider``, ``llm.response.model_name``), LiteLLM (``litellm.provider.model``,
  ``litellm.model_group``) and LiteLLM's fallback header as an HTTP instrumentation captures it
  (``http.response.header.x-litellm-attempted-fallbacks``). Only inference spans count: a span whose
  ``gen_ai.operation.name`` or ``openinference.span.kind`` names something else (embeddings, a tool)
  says nothing about what served the spawn;
* :func:`served_from_headers`: a gateway's response headers, for a hook that has them (LiteLLM's
  ``x-litellm-attempted-fallbacks``, ``x-litellm-fallback-errors`` and ``x-litellm-model-group``,
  ngrok's ``ngrok-aig-model``). LiteLLM's ``x-litellm-model-id`` names a deployment by an opaque id
  that no provider or model can be compared with: it is not read. The attempts are the failed ones the
  headers count (each with the error type ``x-litellm-fallback-errors`` names in order, comma-separated
  or a JSON list of names, else ``_OTHER``), then the one that served.

Every string read is a host's string: redacted and cut as every recorded string is (``host_text``).
:func:`served_attributes` then says what the span and the record carry: the status (``same``,
``differs``, ``unknown``), the served provider and model, the source, the attempts, and for
``differs`` why (``core.served_why``); only a ``fallback`` adds the ``served-differs`` finding,
``agreed`` false, and the divergence (``served-differs`` when nothing else differed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import ValidationError

from otel_route_shadow.core import (
    ATTEMPTS_MAX,
    SERVED_DIFFERS,
    Attempt,
    LegacyRoute,
    ServedRoute,
    ServedWhy,
    canonical_json,
    served_status,
    served_why,
    with_finding,
)
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow.record import AttributeValue, host_text
from otel_route_shadow.strict_json import loads_strict

__all__ = [
    "FALLBACKS_HEADER",
    "FALLBACK_ERRORS_HEADER",
    "INFERENCE_OPERATIONS",
    "MODEL_GROUP_HEADER",
    "MODEL_KEYS",
    "PROVIDER_KEYS",
    "ServedRouteError",
    "attempts_attributes",
    "attempts_from_attributes",
    "failed_attempts",
    "served_attributes",
    "served_from_attributes",
    "served_from_headers",
    "served_route",
]

PROVIDER_KEYS: Final = (attr.GEN_AI_PROVIDER, "llm.provider")
"""Span attributes naming the provider that served, first found wins."""
MODEL_KEYS: Final = (attr.GEN_AI_RESPONSE_MODEL, "llm.response.model_name")
"""Span attributes naming the model that served, first found wins."""
LITELLM_PROVIDER_MODEL: Final = "litellm.provider.model"
"""``provider/model`` (or a model alone) of the deployment LiteLLM called."""
LITELLM_MODEL_GROUP: Final = "litellm.model_group"
"""The LiteLLM model group that served: the model when nothing more precise is there."""
FALLBACKS_HEADER: Final = "x-litellm-attempted-fallbacks"
FALLBACK_ERRORS_HEADER: Final = "x-litellm-fallback-errors"
MODEL_GROUP_HEADER: Final = "x-litellm-model-group"
OTHER_ERROR: Final = "_OTHER"
"""``error.type`` of a failed attempt whose error was not named (the conventions' fallback value)."""
HEADER_ATTRIBUTE: Final = "http.response.header."
"""The prefix under which HTTP instrumentations capture response headers (a list of strings)."""
NGROK_MODEL_HEADER: Final = "ngrok-aig-model"
INFERENCE_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})
"""``gen_ai.operation.name`` values of a call that a model served."""
_OPENINFERENCE_KIND: Final = "openinference.span.kind"
_OPENINFERENCE_LLM: Final = "LLM"


class ServedRouteError(TypeError):
    """A response hook returned something that is not a served route. The message names the type or
    the fields, never the values."""


def _first(values: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        value = values.get(key)
        if value is not None:
            return value
    return None


def _count(value: Any) -> int:
    """A header's number: an int, a decimal string, or the first of a list of them; 0 otherwise."""
    if isinstance(value, list | tuple) and value:
        value = value[0]
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdecimal() and len(value) < 10:
        return int(value)
    return 0


def _names(value: Any) -> list[str]:
    """Error type names of a header (a JSON list of strings, or comma-separated names), each a host string
    (``host_text``: redacted, bounded); a name that is not one is left out."""
    if isinstance(value, list | tuple):
        value = ",".join(str(part) for part in value)
    if not isinstance(value, str):
        return []
    text = value.strip()
    parts: list[Any] = text.split(",")
    if text.startswith("["):
        try:
            parsed = loads_strict(text)  # a host's header: depth-limited, never a RecursionError
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            parts = parsed
    names = (host_text(part.strip()) for part in parts if isinstance(part, str))  # bounded, redacted
    return [name for name in names if name][:ATTEMPTS_MAX]


def _attempt(attempt: Attempt) -> Attempt:
    return Attempt(
        provider=host_text(attempt.provider),
        model=host_text(attempt.model),
        error_type=host_text(attempt.error_type),
    )


def _route(
    provider: Any,
    model: Any,
    fallback: bool,
    model_group: Any = None,
    attempts: Sequence[Attempt] = (),
) -> ServedRoute | None:
    """The cleaned route (host strings redacted and cut), or None when it reports nothing."""
    route = ServedRoute(
        provider=host_text(provider),
        model=host_text(model),
        fallback=fallback,
        model_group=host_text(model_group),
        attempts=tuple(_attempt(attempt) for attempt in attempts[:ATTEMPTS_MAX]),
    )
    return route if route.reported else None


def _inference(attributes: Mapping[str, Any]) -> bool:
    operation = attributes.get(attr.GEN_AI_OPERATION)
    if operation is not None and not (isinstance(operation, str) and operation in INFERENCE_OPERATIONS):
        return False
    kind = attributes.get(_OPENINFERENCE_KIND)
    return kind is None or kind == _OPENINFERENCE_LLM


def served_from_attributes(attributes: Mapping[str, Any] | None) -> ServedRoute | None:
    """What a span of the run says served it (see the module docstring); None: nothing."""
    if not attributes or not _inference(attributes):
        return None
    provider, model = _first(attributes, PROVIDER_KEYS), _first(attributes, MODEL_KEYS)
    deployment = attributes.get(LITELLM_PROVIDER_MODEL)
    if isinstance(deployment, str) and (provider is None or model is None):
        head, slash, tail = deployment.partition("/")
        provider = provider if provider is not None or not slash else head
        model = model if model is not None else (tail if slash else deployment)
    group = _first(attributes, (LITELLM_MODEL_GROUP, HEADER_ATTRIBUTE + MODEL_GROUP_HEADER))
    if isinstance(group, list | tuple):
        group = group[0] if group else None
    if model is None:
        model = group
    fallbacks = _first(attributes, (HEADER_ATTRIBUTE + FALLBACKS_HEADER, FALLBACKS_HEADER))
    return _route(provider, model, _count(fallbacks) > 0, group)


def attempts_from_attributes(attributes: Mapping[str, Any] | None, failed: bool) -> tuple[Attempt, ...]:
    """The attempts a span of the run that reports a route (:func:`served_from_attributes`) stands
    for: the failed ones a gateway's headers captured on it count (``http.response.header.`` +
    LiteLLM's fallback headers), then the span's own, with the provider and model it tried and, when
    the span ``failed``, its ``error.type`` (``_OTHER`` when it names none). Nothing for a span
    that reports no route."""
    route = served_from_attributes(attributes)
    if route is None or attributes is None:
        return ()
    error = (host_text(attributes.get(attr.HOST_ERROR_TYPE)) or OTHER_ERROR) if failed else None
    before = failed_attempts(
        attributes.get(HEADER_ATTRIBUTE + FALLBACKS_HEADER),
        attributes.get(HEADER_ATTRIBUTE + FALLBACK_ERRORS_HEADER),
    )
    return (
        *(_attempt(attempt) for attempt in before),
        Attempt(provider=route.provider, model=route.model, error_type=error),
    )


def failed_attempts(fallbacks: Any, errors: Any) -> tuple[Attempt, ...]:
    """The failed attempts a gateway's headers count (``x-litellm-attempted-fallbacks``), each with
    the error type ``x-litellm-fallback-errors`` names in order (else ``_OTHER``)."""
    names = _names(errors)
    failed = min(max(_count(fallbacks), len(names)), ATTEMPTS_MAX - 1)
    return tuple(Attempt(error_type=names[i] if i < len(names) else OTHER_ERROR) for i in range(failed))


def served_from_headers(headers: Mapping[str, Any] | None) -> ServedRoute | None:
    """What a gateway's response headers say served the request (names compared without case)."""
    if not headers:
        return None
    lowered = {str(key).lower(): value for key, value in headers.items()}
    model = lowered.get(NGROK_MODEL_HEADER)
    failed = failed_attempts(lowered.get(FALLBACKS_HEADER), lowered.get(FALLBACK_ERRORS_HEADER))
    attempts = (*failed, Attempt(model=model if isinstance(model, str) else None)) if failed else ()
    return _route(None, model, bool(failed), lowered.get(MODEL_GROUP_HEADER), attempts)


def served_route(value: object) -> ServedRoute | None:
    """A response hook's answer as a cleaned route; None when it reports nothing. Raises
    :class:`ServedRouteError` for anything that is not a route, a mapping of its fields, or None."""
    if value is None:
        return None
    if isinstance(value, ServedRoute):
        route = value
    elif isinstance(value, Mapping):
        try:
            route = ServedRoute.model_validate(dict(value))
        except ValidationError as exc:
            problems = ", ".join(
                f"{'.'.join(map(str, error['loc'])) or '(route)'}: {error['type']}" for error in exc.errors()
            )
            raise ServedRouteError(
                f"a response hook returned a mapping that is not a route ({problems})"
            ) from None
    else:
        raise ServedRouteError(
            f"a response hook returned a {type(value).__qualname__}, not a ServedRoute, a mapping or None"
        )
    return _route(route.provider, route.model, route.fallback, route.model_group, route.attempts)


def attempts_attributes(attempts: Sequence[Attempt]) -> dict[str, AttributeValue]:
    """``route_shadow.served.attempts`` (the first attempts and the last, at most
    ``ATTEMPTS_RECORDED``) and how many were left out; nothing without attempts."""
    if not attempts:
        return {}
    kept = list(attempts)
    if len(kept) > attr.ATTEMPTS_RECORDED:
        kept = [*kept[: attr.ATTEMPTS_RECORDED - 1], kept[-1]]
    out: dict[str, AttributeValue] = {
        attr.SERVED_ATTEMPTS: canonical_json(
            [attempt.model_dump(exclude_none=True) for attempt in kept]
        ).decode("utf-8", "replace")
    }
    if len(attempts) > len(kept):
        out[attr.SERVED_ATTEMPTS_OMITTED] = len(attempts) - len(kept)
    return out


def served_attributes(
    attributes: Mapping[str, AttributeValue], legacy: LegacyRoute, served: ServedRoute | None, source: str
) -> dict[str, AttributeValue]:
    """What the span and the record of a decision (its ``attributes``, the ``legacy`` route chosen)
    carry once ``served`` was reported from ``source``: the values that change."""
    status = served_status(legacy, served)
    out: dict[str, AttributeValue] = {attr.SERVED_STATUS: status.value}
    if served is not None and served.reported:
        out[attr.SERVED_SOURCE] = source
        if served.provider is not None:
            out[attr.SERVED_PROVIDER] = served.provider
        if served.model is not None:
            out[attr.SERVED_MODEL] = served.model
            out[attr.GEN_AI_RESPONSE_MODEL] = served.model
    if served is not None:
        out.update(attempts_attributes(served.attempts))
    why = served_why(legacy, served)
    if why is not None:
        out[attr.SERVED_WHY] = why.value
    if why is ServedWhy.FALLBACK:
        finding = attributes.get(attr.FINDING)
        divergence = attributes.get(attr.DIVERGENCE)
        out[attr.FINDING] = with_finding(finding if isinstance(finding, str) else None, SERVED_DIFFERS)
        out[attr.AGREED] = False
        out[attr.DIVERGENCE] = divergence if isinstance(divergence, str) else SERVED_DIFFERS
    return out
