"""Where a run's webhook may point: the SSRF guard, checked when the run (or schedule) is created
and again, on the addresses it then resolves to, at every delivery (``api.engine.webhook_send``).

A webhook is an ``http(s)`` URL whose host is, or resolves only to, public addresses. Refused:
loopback (``localhost``, ``127.0.0.0/8``, ``::1``), private networks (``10/8``, ``172.16/12``,
``192.168/16``, ``100.64/10``, ``fc00::/7``), link-local (``169.254/16`` with the cloud
metadata endpoints, ``fe80::/10``), unspecified, multicast and reserved addresses, in whatever
form they are written: IPv4 in decimal, hex or octal (``2130706433``, ``0x7f000001``), IPv4
inside IPv6 (``::ffff:127.0.0.1``, NAT64, 6to4), or a host name that resolves to one. Every
address a name resolves to must pass, and delivery connects to the address that was checked.

As LangGraph Server (``webhooks.url`` in ``langgraph.json``: ``disable_loopback``,
``disable_private_ips``, ``allowed_domains``) the operator can loosen or narrow this:
``THREADLINE_WEBHOOK_ALLOW_PRIVATE`` allows loopback and private networks,
``THREADLINE_WEBHOOK_ALLOWED_NETWORKS`` allows the addresses it lists whatever their kind, and
``THREADLINE_WEBHOOK_ALLOWED_DOMAINS`` limits webhooks to the hosts it lists. Unlike LangGraph's
defaults, private networks are refused unless allowed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Annotated

import httpx
from pydantic import AfterValidator, Field

from api.platform.errors import Invalid
from api.platform.settings import Settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_URL_LENGTH = 2048
RESOLVE_SECONDS = 5.0
"""How long resolving a webhook's host may take before it counts as unresolvable."""

LOOPBACK_NAMES = frozenset(
    {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "host.docker.internal"}
)
METADATA_NAMES = frozenset(
    {"metadata", "metadata.google.internal", "metadata.amazonaws.com", "instance-data"}
)
_V4 = {
    "unspecified": ["0.0.0.0/8"],
    "loopback": ["127.0.0.0/8"],
    "link-local": ["169.254.0.0/16"],
    "multicast": ["224.0.0.0/4"],
    "private": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"],
}
_V6 = {
    "unspecified": ["::/128"],
    "loopback": ["::1/128"],
    "link-local": ["fe80::/10"],
    "multicast": ["ff00::/8"],
    "private": ["fc00::/7", "fec0::/10"],
    "reserved": ["::/96", "64:ff9b:1::/48", "2001::/23", "2001:db8::/32", "100::/64"],
}
KINDS: list[tuple[str, Network]] = [
    (name, ipaddress.ip_network(net))
    for table in (_V4, _V6)
    for name, nets in table.items()
    for net in nets
]
"""Which addresses are not public, and what they are; anything else not globally routable
(documentation, benchmarking, future use, broadcast) is ``reserved``."""
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
PRIVATE_KINDS = frozenset({"loopback", "private"})
"""What ``THREADLINE_WEBHOOK_ALLOW_PRIVATE`` allows."""


class WebhookRefused(ValueError):
    """The webhook may not be called: ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WebhookUnresolved(OSError):
    """The webhook's host did not resolve (now: it may later)."""


def parse(url: str) -> httpx.URL:
    """The URL as the client that delivers it reads it (one parser for the check and the
    request); raises :class:`WebhookRefused` if it is not an absolute ``http(s)`` URL."""
    if len(url) > MAX_URL_LENGTH:
        raise WebhookRefused(f"the URL is longer than {MAX_URL_LENGTH} characters")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as err:
        raise WebhookRefused(f"not a valid URL ({err})") from None
    if parsed.scheme not in ("http", "https"):
        raise WebhookRefused("it must be an http:// or https:// URL")
    if not parsed.host:
        raise WebhookRefused("the URL has no host")
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise WebhookRefused("its port must be 1 to 65535")
    return parsed


def host_of(url: httpx.URL) -> str:
    """The host to resolve and check: ASCII (an internationalised name as IDNA), an IPv6
    address without its brackets."""
    return url.raw_host.decode("ascii")


def _syntax(url: str) -> str:
    try:
        parse(url)
    except WebhookRefused as err:
        raise ValueError(f"webhook {url[:200]!r} is refused: {err.reason}") from None
    return url


WebhookUrl = Annotated[
    str,
    AfterValidator(_syntax),
    Field(
        min_length=1,
        max_length=MAX_URL_LENGTH,
        description="An http(s) URL POSTed the run (with its values, or its error) when it "
        "ends; its host must be public unless the server allows otherwise.",
    ),
]
"""A webhook in a request body: syntax only (the addresses are checked by :func:`check`)."""


def literal_address(host: str) -> Address | None:
    """The address ``host`` writes, in any form a resolver accepts (``0x7f000001``, ``127.1``,
    ``2130706433``, ``::ffff:127.0.0.1``); None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if host and all(c in "0123456789abcdefx." for c in host.lower()):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def embedded(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv6 one (mapped, NAT64, 6to4), if any."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    inner = address.ipv4_mapped or address.sixtofour
    if inner is None and address in _NAT64:
        inner = ipaddress.IPv4Address(address.packed[-4:])
    return inner


def kind(address: Address) -> str:
    """``public``, or why an address is not: ``loopback``, ``private``, ``link-local``,
    ``unspecified``, ``multicast`` or ``reserved``. IPv4 inside IPv6 (mapped, NAT64, 6to4) is
    judged as that IPv4 address."""
    if (inner := embedded(address)) is not None:
        return kind(inner)
    for name, net in KINDS:
        if address.version == net.version and address in net:
            return name
    return "public" if address.is_global and not address.is_multicast else "reserved"


@dataclass(frozen=True)
class WebhookPolicy:
    """The operator's rules (``THREADLINE_WEBHOOK_*``) applied to hosts and addresses."""

    allow_private: bool = False
    networks: tuple[Network, ...] = ()
    domains: tuple[str, ...] = ()

    @classmethod
    def of(cls, settings: Settings) -> WebhookPolicy:
        return cls(
            allow_private=settings.webhook_allow_private,
            networks=tuple(settings.webhook_allowed_networks),
            domains=tuple(d.strip().lower().rstrip(".") for d in settings.webhook_allowed_domains),
        )

    def check_name(self, host: str) -> None:
        """Rules on the host as written: the domain allowlist, names that mean loopback or a
        cloud metadata endpoint."""
        name = host.lower().rstrip(".")
        if self.domains and not any(
            name == d or (d.startswith("*.") and name.endswith(d[1:])) for d in self.domains
        ):
            raise WebhookRefused(
                f"its host {host} is not in THREADLINE_WEBHOOK_ALLOWED_DOMAINS "
                f"({', '.join(self.domains)})"
            )
        if name in METADATA_NAMES:
            raise WebhookRefused(f"its host {host} is a cloud metadata endpoint")
        if (name in LOOPBACK_NAMES or name.endswith(".localhost")) and not self.allow_private:
            raise WebhookRefused(
                f"its host {host} is this machine (loopback); webhooks may only call public "
                "addresses unless the server is started with THREADLINE_WEBHOOK_ALLOW_PRIVATE=true"
            )

    def check_address(self, address: Address, host: str) -> None:
        """An address the webhook would connect to."""
        plain = embedded(address) or address
        if any(address in net or plain in net for net in self.networks):
            return
        found = kind(address)
        if found == "public" or (found in PRIVATE_KINDS and self.allow_private):
            return
        # A name's address is not told: a client could map the internal network with it.
        said = "is" if literal_address(host) is not None else "resolves to"
        how = _HOW if found in PRIVATE_KINDS else _HOW_NETWORKS
        article = "an" if found[0] in "aeiou" else "a"
        raise WebhookRefused(f"its host {host} {said} {article} {found} address" + how)

    async def resolve(self, host: str, port: int) -> str:
        """The checked address to connect to for ``host``: every address it resolves to must
        pass (the first is used). :class:`WebhookUnresolved` when it does not resolve."""
        self.check_name(host)
        literal = literal_address(host)
        if literal is not None:
            self.check_address(literal, host)
            return str(literal)
        loop = asyncio.get_running_loop()
        try:
            found = await asyncio.wait_for(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), RESOLVE_SECONDS
            )
        except (OSError, TimeoutError) as err:
            raise WebhookUnresolved(f"its host {host} does not resolve ({err})") from None
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in found))
        if not addresses:
            raise WebhookUnresolved(f"its host {host} resolves to no address")
        for address in addresses:
            self.check_address(address, host)
        return str(addresses[0])


_HOW = (
    "; webhooks may only call public addresses unless the server is started with "
    "THREADLINE_WEBHOOK_ALLOW_PRIVATE=true (loopback and private networks) or lists the address "
    "in THREADLINE_WEBHOOK_ALLOWED_NETWORKS"
)
_HOW_NETWORKS = (
    "; webhooks may only call public addresses unless the server lists this one in "
    "THREADLINE_WEBHOOK_ALLOWED_NETWORKS"
)


async def check(settings: Settings, url: str | None, *, enabled: bool = True) -> None:
    """Refuse (422, saying why) a webhook the server would not call, when a run or a schedule
    is created: any, where webhooks are disabled; else its URL, its host's name, and every
    address it resolves to now."""
    if url is None:
        return
    if not enabled:
        raise Invalid(
            'webhooks are disabled on this server (its langgraph.json "http": '
            '{"disable_webhooks": true}); leave webhook out, and follow or join the run instead'
        )
    try:
        parsed = parse(url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        await WebhookPolicy.of(settings).resolve(host_of(parsed), port)
    except (WebhookRefused, WebhookUnresolved) as err:
        raise Invalid(f"webhook {url[:200]!r} is refused: {err}") from None
