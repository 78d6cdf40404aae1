"""Who may hold the HTTP server's connections: no one address all of them, and never the
health probes' few.

Invariants:
- at most `total` connections (HTTP_MAX_CONNECTIONS) are open at once, and at most
  `per_address` of them (HTTP_MAX_CONNECTIONS_PER_ADDRESS) are one address's, so one
  client reopening its connections as fast as they are cut cannot take the server;
- `probes` of the `total` are kept for loopback: a loopback connection that finds the
  rest taken (or its own address at its limit) gets one of them as a `PROBE` slot, which
  serves `/healthz` and `/metrics` only (`PROBE_PATHS`), so the orchestrator's health
  check and the metrics scrape on the host are answered whoever holds the others;
- an address is the peer's, IPv6 by its /64 (what one subscriber is usually given), an
  IPv4-mapped IPv6 address as the IPv4 one; a connection from a trusted proxy
  (TRUSTED_PROXIES) is counted under no address when it opens, and each of its requests
  under the client's (`forwarded_client`) while it runs.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

PROBE_PATHS = frozenset({"/healthz", "/metrics"})
"""What a `PROBE` slot serves."""

PROBE_SLOTS = 4
"""Connections kept for loopback's health probes (an eighth of a smaller total)."""


class Slot(enum.Enum):
    GENERAL = "general"  # any request
    PROBE = "probe"  # `PROBE_PATHS` only, from loopback


@dataclass(frozen=True, slots=True)
class SlotLimits:
    total: int = 256
    per_address: int = 32
    trusted_proxies: tuple[IPNetwork, ...] = ()

    @property
    def probes(self) -> int:
        return min(PROBE_SLOTS, self.total // 8)


def parse_address(host: str | None) -> IPAddress | None:
    """The IP address `host` names (an IPv4-mapped IPv6 one as IPv4); None: not an IP."""
    if not host:
        return None
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])  # no IPv6 zone
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def address_key(address: IPAddress) -> str:
    """What one client's connections are counted under: the address, an IPv6 one by /64."""
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def is_trusted(address: IPAddress | None, proxies: Iterable[IPNetwork]) -> bool:
    return address is not None and any(address in network for network in proxies)


def forwarded_client(
    forwarded_for: Iterable[str], peer: IPAddress, proxies: tuple[IPNetwork, ...]
) -> IPAddress:
    """The client behind the trusted proxy `peer`: the nearest hop of `X-Forwarded-For`
    (read from the right, as each proxy appends the address it saw) that is not itself
    a trusted proxy. An unreadable hop ends the walk at the last trusted one: what lies
    left of it may be anything a client wrote."""
    hops = [hop.strip() for header in forwarded_for for hop in header.split(",")]
    client = peer
    for hop in reversed(hops):
        address = parse_address(hop)
        if address is None:
            break
        client = address
        if not is_trusted(address, proxies):
            break
    return client


def _key(peer: IPAddress | None, via_proxy: bool) -> str | None:
    return None if peer is None or via_proxy else address_key(peer)


class ConnectionSlots:
    """The server's open connections, counted in all and per address."""

    def __init__(self, limits: SlotLimits) -> None:
        self.limits = limits
        self._general = 0
        self._probes = 0
        self._by_address: dict[str, int] = {}

    def open(self) -> int:
        return self._general + self._probes

    def general_full(self) -> bool:
        return self._general >= self.limits.total - self.limits.probes

    def take(self, peer: IPAddress | None, *, via_proxy: bool = False) -> Slot | None:
        """A slot for a new connection from `peer` (`via_proxy`: a trusted proxy, whose
        connection is counted under no address); None when it is to be closed."""
        key = _key(peer, via_proxy)
        if not self.general_full() and self._room(key):
            self._general += 1
            self._count(key, 1)
            return Slot.GENERAL
        if peer is not None and peer.is_loopback and self._probes < self.limits.probes:
            self._probes += 1
            return Slot.PROBE
        return None

    def give_back(self, peer: IPAddress | None, slot: Slot, *, via_proxy: bool = False) -> None:
        """End a connection `take` gave `slot` (with the same `peer` and `via_proxy`)."""
        if slot is Slot.PROBE:
            self._probes -= 1
            return
        self._general -= 1
        self._count(_key(peer, via_proxy), -1)

    def take_request(self, address: IPAddress) -> bool:
        """Count one request from a trusted proxy under its client's `address`; False
        when that address already holds its limit."""
        key = address_key(address)
        if not self._room(key):
            return False
        self._count(key, 1)
        return True

    def give_back_request(self, address: IPAddress) -> None:
        self._count(address_key(address), -1)

    def _room(self, key: str | None) -> bool:
        return key is None or self._by_address.get(key, 0) < self.limits.per_address

    def _count(self, key: str | None, step: int) -> None:
        if key is None:
            return
        held = self._by_address.get(key, 0) + step
        if held > 0:
            self._by_address[key] = held
        else:
            self._by_address.pop(key, None)
