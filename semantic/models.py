"""Stored vectors: one per item version and model, and one packed matrix per index scope."""

from __future__ import annotations

from django.db import models


class ItemVector(models.Model):
    """The embedding of one item version's indexed text (title and body, the text the lexical
    index reads) by one model. ``space`` is the index it belongs to (``knowledge``: ``item`` is
    the document version's primary key; ``experience``: ``item`` is the case, skill or lesson
    id). ``text_hash`` is the sha256 of the embedded text: a changed text is embedded again."""

    space = models.CharField(max_length=16)
    item = models.CharField(max_length=120)
    model = models.CharField(max_length=200)
    text_hash = models.CharField(max_length=64)
    dim = models.PositiveIntegerField()
    vector = models.BinaryField()  # float32, L2-normalised
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["space", "item", "model"], name="semantic_item_vector_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.space}:{self.item} ({self.model})"


class ScopeVectors(models.Model):
    """The state of one index scope's vectors: what the worker and the writers change often,
    apart from the packed matrix (``PackedMatrix``), so that marking a scope or appending to its
    delta never rewrites the matrix's megabytes (SQLite rewrites a whole row on any update).

    ``scope`` is the primary key of the space's index scope (``knowledge.SearchScope``,
    ``experience.IndexScope``); ``model``, ``dim`` and ``version`` are those of its packed
    matrix. ``dirty``: the scope's entries changed since the worker last looked; its
    ``scope_vectors_task`` embeds the new ones. ``delta_seq`` is the last ``VectorDelta.seq``
    appended, ``last_entry`` the highest entry id that has a vector (packed or in the delta):
    the worker embeds the entries after it. ``merge_queued``: a merge of the delta is queued
    (many additions queue one).
    """

    space = models.CharField(max_length=16)
    scope = models.BigIntegerField()
    model = models.CharField(max_length=200, blank=True)
    dim = models.PositiveIntegerField(default=0)
    version = models.BigIntegerField(default=0)
    delta_seq = models.BigIntegerField(default=0)
    last_entry = models.BigIntegerField(default=0)
    merge_queued = models.BooleanField(default=False)
    dirty = models.BooleanField(default=True)
    packed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "scope vectors"
        constraints = [
            models.UniqueConstraint(fields=["space", "scope"], name="semantic_scope_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.space} scope {self.scope} ({self.model or 'not packed'})"


class PackedMatrix(models.Model):
    """The vectors of one index scope's entries, packed for one matrix product per query.

    ``keys`` the sorted entry ids (int64) and ``matrix`` their vectors (float32, one row per
    key) by ``model``; ``languages`` the language code of each entry's text, against whose
    reference texts its similarity is judged. ``version`` grows with every packing and merge,
    so a process keeps the matrix it read until the version changes; ``merged_seq`` is the last
    ``VectorDelta.seq`` folded in: a reader adds the delta's rows after it.
    """

    space = models.CharField(max_length=16)
    scope = models.BigIntegerField()
    model = models.CharField(max_length=200)
    dim = models.PositiveIntegerField(default=0)
    version = models.BigIntegerField(default=0)
    merged_seq = models.BigIntegerField(default=0)
    keys = models.BinaryField(default=b"")
    matrix = models.BinaryField(default=b"")
    # One byte per key: the language of the entry's text (``semantic.calibration.LANGUAGES``).
    languages = models.BinaryField(default=b"")
    # Per key, per language, the mean and deviation of its cosines to the reference queries in
    # that language (float32, four per key): the item's end of its significance.
    item_null = models.BinaryField(default=b"")

    class Meta:
        verbose_name_plural = "packed matrices"
        constraints = [
            models.UniqueConstraint(fields=["space", "scope"], name="semantic_packed_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.space} scope {self.scope} v{self.version} ({self.model})"


class VectorDelta(models.Model):
    """The vector of one entry embedded since its scope's matrix was last packed: appended by
    the worker (``semantic.packing``), one row per new entry, read by every process on top of
    the packed matrix it keeps, and folded into the matrix by ``vectors_merge_task`` once
    enough have gathered. ``seq`` numbers a scope's rows in the order they were appended
    (``ScopeVectors.delta_seq`` is the last; ``PackedMatrix.merged_seq`` the last folded in); ``model``, ``vector``, ``language`` and
    ``item_null`` are what the packed matrix keeps per key."""

    space = models.CharField(max_length=16)
    scope = models.BigIntegerField()
    seq = models.BigIntegerField()
    entry = models.BigIntegerField()
    model = models.CharField(max_length=200)
    vector = models.BinaryField()  # float32, L2-normalised
    language = models.PositiveSmallIntegerField(default=0)
    item_null = models.BinaryField(default=b"")  # float32, four figures

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["space", "scope", "seq"], name="semantic_vector_delta_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.space} scope {self.scope} +{self.entry}"


class QueryVector(models.Model):
    """A question's vector, shared by every process: read before the embedder is asked, written
    after (``semantic.queries``). ``digest`` is a keyed hash (HMAC-SHA256 under the deployment's
    secret key) of the question's normalised text and the index scope it was asked in: the text
    itself is never stored, a guess cannot be checked against the table without the key, and one
    scope's questions never answer another's faster. Bounded: the oldest rows beyond
    ``SEMANTIC_QUERY_CACHE_ROWS`` are deleted as new ones come."""

    model = models.CharField(max_length=200)
    digest = models.CharField(max_length=64)
    vector = models.BinaryField()  # float32, L2-normalised

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["model", "digest"], name="semantic_query_vector_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"query {self.digest[:12]} ({self.model})"
