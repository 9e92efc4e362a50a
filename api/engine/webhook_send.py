"""One delivery of a webhook: a POST of its payload to the address its host was checked to
resolve to (``api.contract.webhook_url``), redirects checked again, within a time limit, the
answer's body never read."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx

from api.contract.webhook_url import (
    WebhookPolicy,
    WebhookRefused,
    WebhookUnresolved,
    host_of,
    parse,
)

MAX_REDIRECTS = 5
HEADERS = {"content-type": "application/json", "user-agent": "threadline-webhook"}


class CheckedTransport(httpx.AsyncBaseTransport):
    """Connects only where the policy allows: each request's host (a redirect's too) is
    resolved and checked here, and the connection goes to that checked address, the ``Host``
    header and the TLS server name staying the URL's. A name cannot resolve to another address
    between the check and the connection (DNS rebinding)."""

    def __init__(self, policy: WebhookPolicy) -> None:
        self.policy = policy
        # No keep-alive: pooled connections are keyed by address, and a TLS connection made for
        # one name must not carry a request for another name on the same address.
        self._inner = httpx.AsyncHTTPTransport(
            retries=0, limits=httpx.Limits(max_keepalive_connections=0)
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        host = host_of(url)
        port = url.port or (443 if url.scheme == "https" else 80)
        address = await self.policy.resolve(host, port)
        extensions = dict(request.extensions)
        if url.scheme == "https":
            extensions["sni_hostname"] = host
        pinned = httpx.Request(
            request.method,
            url.copy_with(host=address),
            headers=request.headers,  # Host: the URL's, set when the request was built
            stream=request.stream,
            extensions=extensions,
        )
        return await self._inner.handle_async_request(pinned)

    async def aclose(self) -> None:
        await self._inner.aclose()


def client(policy: WebhookPolicy, timeout: float) -> httpx.AsyncClient:
    """The client deliveries use: checked connections, no proxy from the environment (it would
    connect instead of us), redirects followed by :func:`post` only."""
    return httpx.AsyncClient(
        transport=CheckedTransport(policy),
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        trust_env=False,
    )


@dataclass(frozen=True)
class Delivery:
    """What one POST came to: ``delivered`` (a 2xx), else whether to ``retry`` and why."""

    delivered: bool
    retry: bool
    detail: str


async def post(http: httpx.AsyncClient, url: str, body: bytes, timeout: float) -> Delivery:
    """POST ``body`` to ``url``: ``delivered`` on a 2xx; retried after a connection error, a
    timeout, a host that does not resolve, 429 or 5xx; not after another answer or a refusal.
    307 and 308 are followed (they keep the POST and its body; the others would not)."""
    at = url
    try:
        target = parse(url)
        async with asyncio.timeout(timeout):
            for _ in range(MAX_REDIRECTS + 1):
                request = http.build_request("POST", target, content=body, headers=HEADERS)
                response = await http.send(request, stream=True)
                await response.aclose()  # the answer's body is not read
                location = response.headers.get("location")
                if response.status_code not in (307, 308) or not location:
                    break
                at = str(target.join(location))
                target = parse(at)
            else:
                return Delivery(False, False, f"more than {MAX_REDIRECTS} redirects")
    except WebhookRefused as err:
        return Delivery(False, False, f"refused: {at}: {err.reason}")
    except WebhookUnresolved as err:
        return Delivery(False, True, str(err))
    except TimeoutError:
        return Delivery(False, True, f"no answer within {timeout:g} s")
    except httpx.TransportError as err:
        return Delivery(False, True, f"{type(err).__name__}: {err or 'connection failed'}")
    status = response.status_code
    if 200 <= status < 300:
        return Delivery(True, False, f"HTTP {status}")
    if 300 <= status < 400:
        return Delivery(False, False, f"HTTP {status}: only 307 and 308 redirects are followed")
    return Delivery(False, status >= 500 or status == 429, f"HTTP {status}")
