"""Counting the server's connections per address (`api.connection_slots`): pure values."""

from __future__ import annotations

import ipaddress

from api.connection_slots import (
    ConnectionSlots,
    Slot,
    SlotLimits,
    address_key,
    forwarded_client,
    parse_address,
)

PROXIES = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("127.0.0.1"))


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    address = parse_address(text)
    assert address is not None
    return address


def test_one_ipv6_subscriber_s_64_is_one_address_and_a_mapped_ipv4_is_the_ipv4() -> None:
    assert address_key(ip("2001:db8:1:2::1")) == address_key(ip("2001:db8:1:2:ffff::9"))
    assert address_key(ip("2001:db8:1:2::1")) != address_key(ip("2001:db8:1:3::1"))
    assert ip("::ffff:203.0.113.9") == ip("203.0.113.9")
    assert parse_address("fe80::1%eth0") == ip("fe80::1")
    assert parse_address("not an address") is None and parse_address(None) is None


def test_the_client_is_the_nearest_forwarded_hop_that_is_not_a_trusted_proxy() -> None:
    peer = ip("127.0.0.1")
    assert forwarded_client(["6.6.6.6, 203.0.113.9, 10.1.1.1"], peer, PROXIES) == ip("203.0.113.9")
    assert forwarded_client(["6.6.6.6", "203.0.113.9"], peer, PROXIES) == ip("203.0.113.9")
    assert forwarded_client([], peer, PROXIES) == peer  # no header: the proxy's own request
    # What a client wrote left of trusted hops is not read past an unreadable hop.
    assert forwarded_client(["garbage, 10.2.2.2"], peer, PROXIES) == ip("10.2.2.2")


def test_an_address_past_its_limit_gets_no_slot_and_loopback_gets_a_probe_slot() -> None:
    slots = ConnectionSlots(SlotLimits(total=16, per_address=3))  # two probe slots
    outside, local = ip("203.0.113.9"), ip("127.0.0.9")
    assert [slots.take(outside) for _ in range(4)] == [Slot.GENERAL] * 3 + [None]
    assert [slots.take(local) for _ in range(6)] == [Slot.GENERAL] * 3 + [Slot.PROBE] * 2 + [None]
    slots.give_back(outside, Slot.GENERAL)
    assert slots.take(outside) is Slot.GENERAL
    assert slots.take(ip("10.0.0.1"), via_proxy=True) is Slot.GENERAL  # under no address
    assert slots.take_request(outside) is False
    assert slots.take_request(ip("198.51.100.1")) is True
