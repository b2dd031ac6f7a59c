"""Attribute keys of a checkpoint span: a signed checkpoint of the decision chain, sent to the trace
backend so that the backend witnesses the log itself (not only the spans the sampler kept).

The plugin emits one span named :data:`SPAN_NAME` per checkpoint (``instrumentation.checkpoint_spans``);
``audit`` queries the backend for them by :data:`ORIGIN` (``witness.checkpoints``). None of these keys is
a prefix of another key, here or in :mod:`otel_route_shadow.shadow.attributes` (Phoenix cannot filter on
either key of such a pair). A checkpoint span carries no ``route_shadow.seam``: it is not a seam span.
"""

from __future__ import annotations

from typing import Final

__all__ = ["KEY_NAME", "NOTE", "ORIGIN", "ROOT", "SIGNED", "SIZE", "SPAN_NAME"]

SPAN_NAME: Final = "route_shadow checkpoint"
ORIGIN: Final = "route_shadow.checkpoint.origin"
"""string: the chain's origin, the checkpoint's first line."""
SIZE: Final = "route_shadow.checkpoint.size"
"""int: the tree size (records) the checkpoint commits to."""
ROOT: Final = "route_shadow.checkpoint.root"
"""string: the Merkle root, standard base64 (as in the checkpoint's third line)."""
NOTE: Final = "route_shadow.checkpoint.note"
"""string: the whole signed note (checkpoint text, blank line, signature lines); unsigned: the text."""
SIGNED: Final = "route_shadow.checkpoint.signed"
"""bool: whether the note carries a signature."""
KEY_NAME: Final = "route_shadow.checkpoint.key_name"
"""string: the signing key's name (absent when unsigned). Never the key itself."""
