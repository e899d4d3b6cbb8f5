"""What the admin shows of an index's posting lists, for both indexes' admins (each app
registers its concrete model with its own permission rules)."""

from __future__ import annotations


class PostingAdminFields:
    """A posting list by its token and scope (its id blobs are not shown), limited to the
    viewer's tenants through its scope."""

    tenant_field = "scope__tenant"
    list_display: tuple[str, ...] = ("token", "scope")
    exclude: tuple[str, ...] = ("raw", "expanded")


class EntryAdminFields:
    """An index entry without its expanded token set."""

    tenant_field = "scope__tenant"
    exclude: tuple[str, ...] = ("expanded_tokens",)
