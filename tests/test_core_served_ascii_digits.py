"""A dated model suffix is ASCII digits only.

``\\d`` in the dated-snapshot pattern took any script's digits: ``claude-opus-4-5-٢٠٢٥١١٠١`` (Arabic-Indic
digits) was the same model as ``claude-opus-4-5``, so a served route that named it agreed."""

from __future__ import annotations

import pytest

from otel_route_shadow.core import same_model


@pytest.mark.parametrize(
    "served",
    [
        "claude-opus-4-5-\u0662\u0660\u0662\u0665\u0661\u0661\u0660\u0661",  # Arabic-Indic 20251101
        "claude-opus-4-5-\uff12\uff10\uff12\uff15\uff11\uff11\uff10\uff11",  # fullwidth
        "claude-opus-4-5@\u0968\u0966\u0968\u096b-11-01",  # Devanagari year
        "claude-opus-4-5-20251101-v\u0661",
        "claude-opus-4-5-20251101\n",
    ],
)
def test_a_dated_suffix_in_non_ascii_digits_is_not_the_same_model(served: str) -> None:
    assert not same_model("claude-opus-4-5", served)


@pytest.mark.parametrize("served", ["claude-opus-4-5-20251101", "claude-opus-4-5@2025-11-01-v2:1"])
def test_a_dated_suffix_in_ascii_digits_is_still_the_same_model(served: str) -> None:
    assert same_model("claude-opus-4-5", served)
