"""The embedder of the store's semantic index (``langgraph.json`` ``store.index.embed``),
checked: whatever the project's embedder returns is ``dims`` finite numbers per text, or the
put or search that asked fails with :class:`EmbeddingFailed`, which says which embedder, what
it did and what to change, whichever store holds the vectors (pgvector or the exact scan)."""

from __future__ import annotations

import math
from typing import Any

from langchain_core.embeddings import Embeddings

from api.platform.errors import ApiError


class EmbeddingFailed(ApiError):
    """The index's embedder failed or answered nonsense. The store wrote nothing (the vectors
    are made before any row is written); an HTTP client gets 502 (a server-side dependency
    failed, not its request), a graph's node gets the error."""

    status = 502


class CheckedEmbeddings(Embeddings):
    """``inner`` (the configured embedder) whose answers are checked against ``dims``."""

    def __init__(self, inner: Embeddings, *, dims: int, label: str) -> None:
        self.inner = inner
        self.dims = dims
        self.label = label

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        try:
            vectors = self.inner.embed_documents(texts)
        except Exception as err:
            raise self._failed(err) from err
        return self._checked(vectors, len(texts))

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        try:
            vectors = await self.inner.aembed_documents(texts)
        except Exception as err:
            raise self._failed(err) from err
        return self._checked(vectors, len(texts))

    async def aembed_query(self, text: str) -> list[float]:
        return (await self.aembed_documents([text]))[0]

    def _failed(self, err: Exception) -> EmbeddingFailed:
        what = str(err).splitlines()[0][:300] if str(err) else ""
        return EmbeddingFailed(
            f"The store's embedder ({self.label}) failed: {type(err).__name__}: {what}. "
            "Nothing was stored; retry once the embedder works again (langgraph.json "
            "store.index.embed)."
        )

    def _checked(self, vectors: Any, count: int) -> list[list[float]]:
        if not isinstance(vectors, list | tuple) or len(vectors) != count:
            got = len(vectors) if isinstance(vectors, list | tuple) else type(vectors).__name__
            raise EmbeddingFailed(
                f"The store's embedder ({self.label}) returned {got} vectors for {count} "
                "texts; it must return one list of numbers per text."
            )
        out = []
        for vector in vectors:
            numbers = _numbers(vector)
            if numbers is None:
                raise EmbeddingFailed(
                    f"The store's embedder ({self.label}) returned a vector that is not a list "
                    "of finite numbers."
                )
            if len(numbers) != self.dims:
                raise EmbeddingFailed(
                    f"The store's embedder ({self.label}) returned {len(numbers)} numbers per "
                    f"text, but langgraph.json store.index.dims is {self.dims}: make them agree."
                )
            out.append(numbers)
        return out


def _numbers(vector: Any) -> list[float] | None:
    """``vector`` as floats, or None when it is not a sequence of finite numbers."""
    try:
        numbers = [float(x) for x in vector]
    except (TypeError, ValueError):
        return None
    if any(isinstance(x, bool | str) for x in vector) or not all(map(math.isfinite, numbers)):
        return None
    return numbers
