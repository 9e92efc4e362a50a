"""The webhooks' SSRF guard (``api.contract.webhook_url``) and one delivery
(``api.engine.webhook_send``) in this
process, against a real receiver on 127.0.0.1: addresses in every form judged for what they
are, the operator's settings, the connection made to the checked address with the URL's Host,
redirects checked again, answers sorted into delivered / retry / give up."""

from __future__ import annotations

import ipaddress
import json
import socket
from typing import Any

import pytest

from api.contract.webhook_url import (
    WebhookPolicy,
    WebhookRefused,
    WebhookUnresolved,
    kind,
    literal_address,
    parse,
)
from api.engine.webhook_send import client, post
from api.platform.settings import Settings
from tests.utils.processes import free_port
from tests.utils.webhook_receiver import receiving

BODY = json.dumps({"run_id": "r1", "status": "success"}).encode()
LOOPBACK_ONLY = WebhookPolicy(networks=(ipaddress.ip_network("127.0.0.1/32"),))
"""Allows the receiver's address and nothing else that is not public."""


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", "loopback"),
        ("127.1", "loopback"),
        ("2130706433", "loopback"),
        ("0x7f000001", "loopback"),
        ("0x7f.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:7f00:1", "loopback"),
        ("64:ff9b::7f00:1", "loopback"),
        ("2002:7f00:1::", "loopback"),
        ("10.0.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("fd12::1", "private"),
        ("169.254.169.254", "link-local"),
        ("::ffff:169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.251", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "reserved"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.1", "reserved"),
        ("198.18.0.1", "reserved"),
        ("2001:db8::1", "reserved"),
        ("::127.0.0.1", "reserved"),
        ("8.8.8.8", "public"),
        ("1.1.1.1", "public"),
        ("2606:4700:4700::1111", "public"),
    ],
)
def test_an_address_is_judged_whatever_form_it_is_written_in(host: str, expected: str) -> None:
    address = literal_address(host)
    assert address is not None, host
    assert kind(address) == expected


def test_names_are_not_addresses() -> None:
    for name in ("example.com", "cafe", "localhost", "deadbeef.example"):
        assert literal_address(name) is None, name


async def test_the_operator_loosens_or_narrows_the_policy() -> None:
    strict = WebhookPolicy()
    for host in ("127.0.0.1", "10.0.0.1", "localhost", "169.254.169.254"):
        with pytest.raises(WebhookRefused):
            await strict.resolve(host, 80)
    allowing = WebhookPolicy.of(Settings(webhook_allow_private=True))
    assert await allowing.resolve("127.0.0.1", 80) == "127.0.0.1"
    assert await allowing.resolve("0x0a000001", 80) == "10.0.0.1"
    assert await allowing.resolve("localhost", 80) in ("127.0.0.1", "::1")
    for host, why in [
        ("169.254.169.254", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("metadata.google.internal", "metadata"),
    ]:
        with pytest.raises(WebhookRefused, match=why):
            await allowing.resolve(host, 80)
    listed = WebhookPolicy.of(Settings(webhook_allowed_networks="169.254.10.0/24, 10.9.9.9"))
    assert await listed.resolve("169.254.10.5", 80) == "169.254.10.5"
    assert await listed.resolve("10.9.9.9", 80) == "10.9.9.9"
    assert await listed.resolve("::ffff:10.9.9.9", 80) == "::ffff:a09:909"
    with pytest.raises(WebhookRefused, match="private"):
        await listed.resolve("10.9.9.8", 80)
    narrow = WebhookPolicy.of(Settings(webhook_allowed_domains="hooks.example.com,*.corp.test"))
    for host in ("example.com", "corp.test", "evil-corp.test"):
        with pytest.raises(WebhookRefused, match="ALLOWED_DOMAINS"):
            await narrow.resolve(host, 80)
    with pytest.raises(WebhookUnresolved):  # listed, then resolved (and checked) as any other
        await narrow.resolve("a.corp.test", 80)


def loopback_name() -> str:
    name = socket.gethostname()
    try:
        found = {info[4][0] for info in socket.getaddrinfo(name, 80)}
    except OSError:
        found = set()
    if not found or not all(ipaddress.ip_address(a).is_loopback for a in found):
        pytest.skip(f"{name!r} does not resolve to loopback here")
    return name


async def test_a_delivery_connects_to_the_checked_address_with_the_urls_host() -> None:
    name = loopback_name()
    with receiving() as rx:
        async with client(WebhookPolicy(allow_private=True), 10) as http:
            sent = await post(http, rx.url("/a", host=name), BODY, 10)
        async with client(WebhookPolicy(), 10) as http:
            refused = await post(http, rx.url("/b", host=name), BODY, 10)
    assert sent.delivered, sent
    [received] = rx.posts
    assert received.headers["host"] == f"{name}:{rx.port}" and received.body["run_id"] == "r1"
    assert not refused.delivered and not refused.retry and "loopback" in refused.detail
    assert "/b" not in [p.path for p in rx.posts]


async def test_redirects_are_followed_only_where_the_policy_allows() -> None:
    with receiving() as rx:
        rx.script["/moved"] = [(307, "/here")]
        rx.script["/to-private"] = [(308, f"http://10.0.0.1:{rx.port}/x")]
        rx.script["/to-loopback"] = [(307, f"http://127.0.0.2:{rx.port}/x")]
        rx.script["/found"] = [(302, "/here")]
        async with client(LOOPBACK_ONLY, 10) as http:
            moved = await post(http, rx.url("/moved"), BODY, 10)
            private = await post(http, rx.url("/to-private"), BODY, 10)
            loopback = await post(http, rx.url("/to-loopback"), BODY, 10)
            found = await post(http, rx.url("/found"), BODY, 10)
    assert moved.delivered and [p.path for p in rx.posts][:2] == ["/moved", "/here"]
    assert rx.posts[1].body == rx.posts[0].body  # the POST and its body went along
    for refused, why in [(private, "private"), (loopback, "loopback")]:
        assert not refused.delivered and not refused.retry and why in refused.detail, refused
    assert not found.delivered and not found.retry and "307" in found.detail
    assert [p.path for p in rx.posts].count("/here") == 1  # a 302 is not followed


async def test_answers_and_failures_are_sorted_into_retry_or_not() -> None:
    closed = free_port()
    with receiving(delay=0.0) as rx:
        rx.script["/busy"] = [503]
        rx.script["/slow-down"] = [429]
        rx.script["/bad"] = [400]
        async with client(LOOPBACK_ONLY, 5) as http:
            outcomes: dict[str, Any] = {
                path: await post(http, rx.url(path), BODY, 5)
                for path in ("/busy", "/slow-down", "/bad")
            }
            outcomes["closed"] = await post(http, f"http://127.0.0.1:{closed}/", BODY, 5)
            outcomes["unresolved"] = await post(http, "http://no-such-host.invalid/", BODY, 5)
    assert {k: (o.delivered, o.retry) for k, o in outcomes.items()} == {
        "/busy": (False, True),
        "/slow-down": (False, True),
        "/bad": (False, False),
        "closed": (False, True),
        "unresolved": (False, True),
    }
    assert outcomes["/bad"].detail == "HTTP 400"


async def test_a_receiver_that_does_not_answer_in_time_is_retried() -> None:
    with receiving(delay=1.0) as rx:
        async with client(LOOPBACK_ONLY, 0.3) as http:
            late = await post(http, rx.url("/late"), BODY, 0.3)
        assert not late.delivered and late.retry, late


@pytest.mark.parametrize("url", ["http://8.8.8.8:99999/h", "http://8.8.8.8:0/h"])
def test_a_port_out_of_range_is_refused(url: str) -> None:
    """Else it would pass the check and fail every delivery until the attempts run out."""
    with pytest.raises(WebhookRefused, match="port must be 1 to 65535"):
        parse(url)
