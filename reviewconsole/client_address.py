"""The address a request came from, as login throttling counts it (django-axes'
``AXES_CLIENT_IP_CALLABLE``).

Behind a load balancer every request reaches an instance from the balancer's address, so
counting failures by ``REMOTE_ADDR`` would count everyone as one client and five wrong passwords
from anyone would lock the real user out. The balancer appends the address it saw to
``X-Forwarded-For``; that entry, the last one, is believed only when the request came from an
address of ``TRUSTED_PROXIES``. Every entry before it was written by the client, or passed on by
the balancer from the client, and is never believed: a client cannot pick another's address to
lock them out, nor a fresh one per attempt to dodge its own lockout. Without ``TRUSTED_PROXIES``
(development, one instance with nothing in front) the header is ignored altogether.

django-axes reads proxies through django-ipware when that is installed; it is not a dependency
here, and without it axes ignores its ``AXES_IPWARE_*`` settings and counts ``REMOTE_ADDR``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def proxy_networks(values: Iterable[str], *, name: str = "TRUSTED_PROXIES") -> list[Network]:
    """The networks (or single addresses) ``values`` names; refused naming ``name`` when one is
    not an address or network."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError as error:
            raise ImproperlyConfigured(
                f"{name}: {value.strip()!r} is not an IP address or network"
            ) from error
    return networks


def _address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(value.strip())
    except ValueError:
        return None


def client_address(request: HttpRequest) -> str | None:
    """The client's address: the balancer's last ``X-Forwarded-For`` entry when the request came
    from a trusted proxy, ``REMOTE_ADDR`` otherwise."""
    peer = str(request.META.get("REMOTE_ADDR", "") or "")
    peer_address = _address(peer)
    if peer_address is None:
        return peer or None
    trusted = proxy_networks(getattr(settings, "TRUSTED_PROXIES", ()))
    if not any(peer_address in network for network in trusted):
        return str(peer_address)
    forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR", "") or "")
    last = _address(forwarded.rsplit(",", 1)[-1]) if forwarded else None
    # A trusted proxy that sent no usable entry (its own health check, a local client) is the
    # client itself.
    return str(last) if last is not None else str(peer_address)
