"""The store's embedder (langgraph.json ``store.index.embed``): deterministic and offline.

Each word is hashed into one of ``DIMS`` dimensions with a sign, so texts that share words have
a high cosine similarity and unrelated ones a low one. ``embed`` is sync, ``aembed`` async: a
project may name either.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

DIMS = 64


def vector(text: str) -> list[float]:
    out = [0.0] * DIMS
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        out[digest[0] % DIMS] += 1.0 if digest[1] % 2 else -1.0
    return out


def embed(texts: Sequence[str]) -> list[list[float]]:
    return [vector(text) for text in texts]


async def aembed(texts: Sequence[str]) -> list[list[float]]:
    return embed(texts)
