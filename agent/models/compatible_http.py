"""The HTTP clients of a model on an OpenAI-compatible server (not api.openai.com): each request
body for ``/chat/completions`` is adapted on its way out, as that server reads it.

Two adaptations, both seen with llama.cpp's server (``llama-cpp-python`` 0.3):

- an assistant message that only calls tools goes with ``content: ""``: langchain sends ``null``
  (``content or None``), which that server's request schema refuses with a 500;
- the answer cap goes as the classic ``max_tokens``, which every compatible server reads:
  langchain sends the newer ``max_completion_tokens``, which that server ignores.

The body is rewritten in the client's public ``send``, the one method every request of the OpenAI
client goes through (streamed ones too: their request body is plain JSON as well), once per
attempt, so the client's retries and each request's timeout are untouched. Not in a transport
wrapped around httpx's own: a client given a transport stops honouring ``HTTPS_PROXY`` and
``NO_PROXY``, and httpx has no public way to reach the transport it would otherwise pick. The
clients are the OpenAI client's own defaults (``openai.DefaultHttpxClient``: its connection limits,
redirects followed), on ``httpx2``, the HTTP library of the ``openai`` package since version 3.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import httpx2
import openai


class CompatibleClient(openai.DefaultHttpxClient):
    """The synchronous client (``ChatOpenAI(http_client=...)``): ``invoke``, ``stream``."""

    def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        return super().send(compatible_request(request), **kwargs)


class AsyncCompatibleClient(openai.DefaultAsyncHttpxClient):
    """The asynchronous client (``ChatOpenAI(http_async_client=...)``): ``ainvoke``,
    ``astream``."""

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        return await super().send(compatible_request(request), **kwargs)


@cache
def compatible_clients(
    endpoint: str, timeout: float
) -> tuple[CompatibleClient, AsyncCompatibleClient]:
    """A synchronous and an asynchronous client for the server at ``endpoint``, whose default
    timeout is ``timeout`` seconds (the OpenAI client sets each request's own, the same).

    One pair per endpoint and timeout for the whole process, kept open, as langchain keeps the
    default clients it makes itself: models made one after another share their connections,
    and none is left to be collected with connections open (a ``ResourceWarning``)."""
    return (
        CompatibleClient(base_url=endpoint, timeout=timeout),
        AsyncCompatibleClient(base_url=endpoint, timeout=timeout),
    )


def compatible_request(request: httpx2.Request) -> httpx2.Request:
    """``request`` with its body adapted (see :func:`compatible_payload`) if it is a JSON body
    posted to ``.../chat/completions`` that needs it, else ``request`` itself. The headers (but
    the length) and the extensions (the request's timeout) carry over."""
    if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
        return request
    try:
        payload = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):  # a streamed upload, or not JSON: not ours
        return request
    if not isinstance(payload, dict) or not compatible_payload(payload):
        return request
    headers = request.headers.copy()
    headers.pop("content-length", None)  # the new body's own is set from it
    return httpx2.Request(
        request.method,
        request.url,
        headers=headers,
        content=json.dumps(payload).encode(),
        extensions=request.extensions,
    )


def compatible_payload(payload: dict[str, Any]) -> bool:
    """Adapt a Chat Completions request body in place; whether anything changed."""
    changed = False
    for message in payload.get("messages") or []:
        if (
            isinstance(message, dict)
            and message.get("role") == "assistant"
            and message.get("content") is None
        ):
            message["content"] = ""
            changed = True
    if "max_completion_tokens" in payload:
        payload["max_tokens"] = payload.pop("max_completion_tokens")
        changed = True
    return changed
