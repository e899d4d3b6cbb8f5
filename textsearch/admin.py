"""What the admin shows of an index's entries and posting lists, for both indexes' admins (each
app registers its concrete models; knowledge adds its own view permission in front)."""

from __future__ import annotations

from reviewconsole.admin_support import ReadOnlyAdmin


class PostingAdmin(ReadOnlyAdmin):
    """A posting list by its token and scope (its id blobs are not shown), limited to the
    viewer's tenants through its scope."""

    tenant_field = "scope__tenant"
    list_display = ("token", "scope")
    exclude = ("raw", "expanded")


class EntryAdmin(ReadOnlyAdmin):
    """An index entry without its expanded token set."""

    tenant_field = "scope__tenant"
    exclude = ("expanded_tokens",)


class DeltaAdmin(ReadOnlyAdmin):
    """A change waiting to be merged into its scope's array and posting lists (its record and
    token keys are not shown)."""

    tenant_field = "scope__tenant"
    list_display = ("item_id", "removed", "scope")
    exclude = ("record", "raw_tokens", "expanded_tokens")
