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
  ``x-litellm-attempted-fallbacks``, ngrok's ``ngrok-aig-model``). LiteLLM's ``x-litellm-model-id``
  names a deployment by an opaque id that no provider or model can be compared with: it is not read.

Every string read is a host's string: redacted and cut as every recorded string is (``host_text``).
:func:`served_attributes` then says what the span and the record carry: the status (``same``,
``differs``, ``unknown``), the served provider and model, the source, and for ``differs`` the
``served-differs`` finding, ``agreed`` false, and the divergence (``served-differs`` when nothing
else differed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import ValidationError

from otel_route_shadow.core import (
    SERVED_DIFFERS,
    LegacyRoute,
    ServedRoute,
    ServedStatus,
    served_status,
    with_finding,
)
from otel_route_shadow.shadow import attributes as attr
from otel_route_shadow.shadow.record import AttributeValue, host_text

__all__ = [
    "FALLBACKS_HEADER",
    "INFERENCE_OPERATIONS",
    "MODEL_KEYS",
    "PROVIDER_KEYS",
    "ServedRouteError",
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


def _route(provider: Any, model: Any, fallback: bool) -> ServedRoute | None:
    """The cleaned route (host strings redacted and cut), or None when it reports nothing."""
    route = ServedRoute(provider=host_text(provider), model=host_text(model), fallback=fallback)
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
    if model is None:
        model = attributes.get(LITELLM_MODEL_GROUP)
    fallbacks = _first(attributes, (HEADER_ATTRIBUTE + FALLBACKS_HEADER, FALLBACKS_HEADER))
    return _route(provider, model, _count(fallbacks) > 0)


def served_from_headers(headers: Mapping[str, Any] | None) -> ServedRoute | None:
    """What a gateway's response headers say served the request (names compared without case)."""
    if not headers:
        return None
    lowered = {str(key).lower(): value for key, value in headers.items()}
    return _route(None, lowered.get(NGROK_MODEL_HEADER), _count(lowered.get(FALLBACKS_HEADER)) > 0)


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
    return _route(route.provider, route.model, route.fallback)


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
    if status is ServedStatus.DIFFERS:
        finding = attributes.get(attr.FINDING)
        divergence = attributes.get(attr.DIVERGENCE)
        out[attr.FINDING] = with_finding(finding if isinstance(finding, str) else None, SERVED_DIFFERS)
        out[attr.AGREED] = False
        out[attr.DIVERGENCE] = divergence if isinstance(divergence, str) else SERVED_DIFFERS
    return out
