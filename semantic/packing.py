"""Writing vectors: each item's, then each scope's packed matrix (run by the worker).

Nothing here runs in a review's request. A change to an index scope marks its vectors dirty
and queues ``semantic.tasks.scope_vectors_task`` in the writer's transaction; the task embeds
the entries not embedded yet (batches of ``BATCH`` texts, each item once however many scopes
list it) and packs the scope's matrix. Until it has, retrieval ranks the scope's new entries by
their words alone and says so (``semantic.branch``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Length

from reviewconsole import clock
from semantic import calibration, embedders, spaces
from semantic.models import ItemVector, ScopeVectors, VectorDelta

BATCH = 32
# SQLite allows 999 bound parameters per statement in older builds.
READ_CHUNK = 500


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stored(space: str, model: str, items: Sequence[str]) -> dict[str, tuple[str, bytes]]:
    found: dict[str, tuple[str, bytes]] = {}
    for start in range(0, len(items), READ_CHUNK):
        chunk = items[start : start + READ_CHUNK]
        for item, digest, vector in ItemVector.objects.filter(
            space=space, model=model, item__in=chunk
        ).values_list("item", "text_hash", "vector"):
            found[item] = (digest, bytes(vector))
    return found


def item_vectors(
    space: str,
    texts: dict[str, str],
    embedder: embedders.Embedder,
    *,
    now: datetime,
    progress: Callable[[int], None] | None = None,
    as_queries: bool = False,
) -> tuple[dict[str, np.ndarray], int]:
    """The vector of each item (``item -> text``) by ``embedder``: stored ones whose text is
    unchanged are read, the others embedded (as passages, or as queries) and stored. Returns
    them and how many were made."""
    items = sorted(texts)
    stored = _stored(space, embedder.name, items)
    vectors: dict[str, np.ndarray] = {}
    todo: list[str] = []
    for item in items:
        kept = stored.get(item)
        if kept is not None and kept[0] == text_hash(texts[item]):
            vectors[item] = np.frombuffer(kept[1], dtype=np.float32)
        else:
            todo.append(item)
    for start in range(0, len(todo), BATCH):
        chunk = todo[start : start + BATCH]
        chunk_texts = [texts[item] for item in chunk]
        matrix = embedder.queries(chunk_texts) if as_queries else embedder.passages(chunk_texts)
        rows = [
            ItemVector(
                space=space,
                item=item,
                model=embedder.name,
                text_hash=text_hash(texts[item]),
                dim=int(matrix.shape[1]),
                vector=matrix[i].astype(np.float32).tobytes(),
                created_at=now,
            )
            for i, item in enumerate(chunk)
        ]
        with transaction.atomic():
            ItemVector.objects.filter(space=space, model=embedder.name, item__in=chunk).delete()
            ItemVector.objects.bulk_create(rows)
        for i, item in enumerate(chunk):
            vectors[item] = matrix[i].astype(np.float32)
        if progress is not None:
            progress(len(chunk))
    return vectors, len(todo)


# The reference texts' vectors per (space, model), once embedded in this process: a database that
# lost them (a restore, a test's rollback) gets them back without embedding them again.
_reference_vectors: dict[tuple[str, str], dict[str, np.ndarray]] = {}


def reference_embedded(embedder: embedders.Embedder, now: datetime) -> calibration.Reference:
    """The reference texts' vectors of ``embedder``'s model, embedded the first time (as
    passages and as queries) and stored: the branch judges similarities against them."""
    texts = calibration.background_texts()
    found = []
    for space, as_queries in (
        (calibration.BACKGROUND_SPACE, False),
        (calibration.BACKGROUND_QUERY_SPACE, True),
    ):
        kept = _reference_vectors.get((space, embedder.name))
        stored = ItemVector.objects.filter(space=space, model=embedder.name).count()
        if kept is not None and stored < len(texts):
            with transaction.atomic():
                ItemVector.objects.filter(space=space, model=embedder.name).delete()
                ItemVector.objects.bulk_create(
                    ItemVector(
                        space=space,
                        item=item,
                        model=embedder.name,
                        text_hash=text_hash(texts[item]),
                        dim=int(vector.shape[0]),
                        vector=vector.astype(np.float32).tobytes(),
                        created_at=now,
                    )
                    for item, vector in kept.items()
                )
            vectors = kept
        else:
            vectors, _ = item_vectors(space, texts, embedder, now=now, as_queries=as_queries)
            _reference_vectors[(space, embedder.name)] = vectors
        found.append(
            tuple(
                np.stack([vectors[name] for name in texts if name.startswith(f"{lang}:")])
                for lang in calibration.LANGUAGES
            )
        )
    return calibration.Reference(embedder.name, found[0], found[1])


# A scope's delta is merged into its matrix once it holds this many vectors, or an eighth of the
# matrix's rows if more (every reader fetches the matrix whole again after a merge).
DELTA_MIN = 64
DELTA_SHARE = 8


def merge_threshold(rows: int) -> int:
    return max(DELTA_MIN, rows // DELTA_SHARE)


def scope_packed(
    space: str,
    scope: int,
    *,
    now: datetime | None = None,
    progress: Callable[[int], None] | None = None,
    merge: Callable[[str, int], None] | None = None,
) -> int:
    """Embed a dirty scope's new entries; returns the items embedded.

    A scope packed with the current model gets the vectors of the entries it has none for
    appended to its delta (``VectorDelta``); ``merge(space, scope)`` is called (once, until the
    merge ran) when the delta reaches :func:`merge_threshold`. A scope not packed yet, packed
    with another model or given more new entries than the threshold is packed whole. The dirty
    flag is cleared first, in its own transaction, so a change committed while this runs marks
    the scope again and queues another run; a failure marks it again too."""
    now = now or clock.now()
    with transaction.atomic():
        ScopeVectors.objects.bulk_create(
            [ScopeVectors(space=space, scope=scope)], ignore_conflicts=True
        )
        claimed = ScopeVectors.objects.filter(space=space, scope=scope, dirty=True).update(
            dirty=False
        )
    if not claimed:
        return 0
    try:
        embedder = embedders.configured()
        if embedder is None:
            ScopeVectors.objects.filter(space=space, scope=scope).update(dirty=True)
            return 0
        reference = reference_embedded(embedder, now)
        appended = _delta_appended(space, scope, embedder, reference, now, progress, merge)
        if appended is not None:
            return appended
        return _packed_whole(space, scope, embedder, reference, now, progress)
    except Exception:
        ScopeVectors.objects.filter(space=space, scope=scope).update(dirty=True)
        raise


def _packed_whole(
    space: str,
    scope: int,
    embedder: embedders.Embedder,
    reference: calibration.Reference,
    now: datetime,
    progress: Callable[[int], None] | None,
) -> int:
    """Pack the scope's matrix from every entry (embedding those without a vector); the delta
    appended before it started is folded in (its entries are among those read)."""
    seen = (
        ScopeVectors.objects.filter(space=space, scope=scope)
        .values_list("delta_seq", flat=True)
        .get()
    )
    entries = spaces.space(space).entries(scope)
    vectors, made = item_vectors(
        space, {e.item: e.text for e in entries}, embedder, now=now, progress=progress
    )
    ordered = sorted(entries, key=lambda e: e.entry)
    keys = np.array([e.entry for e in ordered], dtype=np.int64)
    dim = int(next(iter(vectors.values())).shape[0]) if vectors else 0
    matrix = (
        np.stack([vectors[e.item] for e in ordered]).astype(np.float32)
        if ordered
        else np.zeros((0, dim), dtype=np.float32)
    )
    with transaction.atomic():
        ScopeVectors.objects.filter(space=space, scope=scope).update(
            model=embedder.name,
            dim=dim,
            keys=keys.tobytes(),
            matrix=matrix.tobytes(),
            languages=calibration.language_codes(e.text for e in ordered).tobytes(),
            item_null=reference.item_null(matrix).tobytes() if len(matrix) else b"",
            version=F("version") + 1,
            merged_seq=seen,
            merge_queued=False,
            packed_at=now,
        )
        VectorDelta.objects.filter(space=space, scope=scope, seq__lte=seen).delete()
    return made


def _delta_appended(
    space: str,
    scope: int,
    embedder: embedders.Embedder,
    reference: calibration.Reference,
    now: datetime,
    progress: Callable[[int], None] | None,
    merge: Callable[[str, int], None] | None,
) -> int | None:
    """Append the vectors of the scope's entries that have none to its delta; returns the items
    embedded, or None when the scope must be packed whole instead."""
    found = spaces.space(space)
    if found.entry_ids is None or found.entries_among is None:
        return None
    row = (
        ScopeVectors.objects.filter(space=space, scope=scope)
        .annotate(languages_size=Length("languages"), nulls_size=Length("item_null"))
        .values_list("model", "version", "keys", "merged_seq", "languages_size", "nulls_size")
        .get()
    )
    model, version, blob, merged_seq, languages_size, nulls_size = row
    if model != embedder.name or not version:
        return None
    packed_keys = np.frombuffer(bytes(blob or b""), dtype=np.int64)
    if (languages_size or 0) != len(packed_keys) or (nulls_size or 0) != 16 * len(packed_keys):
        return None  # packed before the languages and the item ends were kept
    known = set(packed_keys.tolist())
    known.update(
        VectorDelta.objects.filter(
            space=space, scope=scope, model=model, seq__gt=merged_seq
        ).values_list("entry", flat=True)
    )
    new = sorted(set(found.entry_ids(scope)) - known)
    if not new:
        return 0
    if len(new) > merge_threshold(len(packed_keys)):
        return None
    entries = found.entries_among(scope, new)
    vectors, made = item_vectors(
        space, {e.item: e.text for e in entries}, embedder, now=now, progress=progress
    )
    if not entries:
        return made
    matrix = np.stack([vectors[e.item] for e in entries]).astype(np.float32)
    languages = calibration.language_codes(e.text for e in entries)
    nulls = reference.item_null(matrix)
    with transaction.atomic():
        locked = (
            ScopeVectors.objects.select_for_update()
            .filter(space=space, scope=scope)
            .values_list("version", "delta_seq", "merged_seq", "merge_queued")
            .get()
        )
        if locked[0] != version:
            # Packed meanwhile (a merge, or a whole packing): whatever it missed is found again.
            ScopeVectors.objects.filter(space=space, scope=scope).update(dirty=True)
            return made
        seq = int(locked[1])
        VectorDelta.objects.bulk_create(
            VectorDelta(
                space=space,
                scope=scope,
                seq=seq + i,
                entry=entry.entry,
                model=model,
                vector=matrix[i - 1].tobytes(),
                language=int(languages[i - 1]),
                item_null=nulls[i - 1].astype(np.float32).tobytes(),
            )
            for i, entry in enumerate(entries, start=1)
        )
        waiting = seq + len(entries) - int(locked[2])
        due = not locked[3] and waiting >= merge_threshold(len(packed_keys))
        ScopeVectors.objects.filter(space=space, scope=scope).update(
            delta_seq=seq + len(entries), merge_queued=due or locked[3]
        )
        if due and merge is not None:
            merge(space, scope)
    return made


def vectors_merged(space: str, scope: int) -> int:
    """Fold the scope's delta into its packed matrix (the merge task): the rows of entries no
    longer in the scope are dropped. Returns the delta rows folded."""
    row = (
        ScopeVectors.objects.filter(space=space, scope=scope)
        .values_list(
            "version",
            "model",
            "dim",
            "keys",
            "matrix",
            "languages",
            "item_null",
            "delta_seq",
            "merged_seq",
        )
        .first()
    )
    if row is None or not row[1] or not row[0]:
        ScopeVectors.objects.filter(space=space, scope=scope).update(merge_queued=False)
        return 0
    version, model, dim, keys, matrix, languages, item_null, seen, merged_seq = row
    rows = list(
        VectorDelta.objects.filter(
            space=space, scope=scope, model=model, seq__gt=merged_seq, seq__lte=seen
        )
        .order_by("seq")
        .values_list("entry", "vector", "language", "item_null")
    )
    base = Stored(
        np.frombuffer(bytes(keys), dtype=np.int64),
        np.frombuffer(bytes(matrix), dtype=np.float32).reshape(-1, dim or 0),
        np.frombuffer(bytes(languages or b""), dtype=np.uint8),
        np.frombuffer(bytes(item_null or b""), dtype=np.float32).reshape(-1, 4),
    )
    combined = base.with_rows(rows, dim)
    found = spaces.space(space)
    if found.entry_ids is not None:
        combined = combined.among(np.array(sorted(found.entry_ids(scope)), dtype=np.int64))
    with transaction.atomic():
        locked = (
            ScopeVectors.objects.select_for_update()
            .filter(space=space, scope=scope)
            .values_list("version", flat=True)
            .get()
        )
        if locked != version:
            return 0  # packed meanwhile: that packing folded the delta
        ScopeVectors.objects.filter(space=space, scope=scope).update(
            keys=combined.keys.tobytes(),
            matrix=combined.matrix.tobytes(),
            languages=combined.languages.tobytes(),
            item_null=combined.item_null.tobytes(),
            version=F("version") + 1,
            merged_seq=seen,
            merge_queued=False,
            packed_at=clock.now(),
        )
        VectorDelta.objects.filter(space=space, scope=scope, seq__lte=seen).delete()
    return len(rows)


@dataclass(frozen=True)
class Stored:
    """What a scope's packed matrix keeps per key (sorted keys; a row of each array per key)."""

    keys: np.ndarray
    matrix: np.ndarray
    languages: np.ndarray
    item_null: np.ndarray

    def with_rows(self, rows: Sequence[tuple[Any, ...]], dim: int) -> Stored:
        """These keys with the delta's ``rows`` (entry, vector, language, item_null; in the
        order appended: a later row of an entry wins), sorted by key."""
        if not rows:
            return self
        entries = np.array([row[0] for row in rows], dtype=np.int64)
        keys = np.concatenate([self.keys, entries])
        matrix = np.concatenate(
            [
                self.matrix,
                np.frombuffer(b"".join(bytes(r[1]) for r in rows), np.float32).reshape(-1, dim),
            ]
        )
        languages = np.concatenate([self.languages, np.array([r[2] for r in rows], dtype=np.uint8)])
        nulls = np.concatenate(
            [
                self.item_null,
                np.frombuffer(b"".join(bytes(r[3]) for r in rows), np.float32).reshape(-1, 4),
            ]
        )
        # The last row of each key: unique over the reversed keys keeps the first seen there.
        _, last = np.unique(keys[::-1], return_index=True)
        chosen = len(keys) - 1 - last  # positions of each key's last row, in key order
        return Stored(keys[chosen], matrix[chosen], languages[chosen], nulls[chosen])

    def among(self, wanted: np.ndarray) -> Stored:
        keep = np.isin(self.keys, wanted)
        if keep.all():
            return self
        return Stored(
            self.keys[keep], self.matrix[keep], self.languages[keep], self.item_null[keep]
        )


def scopes_marked(space: str, scopes: Sequence[int]) -> list[int]:
    """Mark ``scopes`` dirty (creating their rows); returns them. In the writer's transaction."""
    chosen = sorted(set(scopes))
    if not chosen:
        return []
    ScopeVectors.objects.bulk_create(
        [ScopeVectors(space=space, scope=scope) for scope in chosen], ignore_conflicts=True
    )
    ScopeVectors.objects.filter(space=space, scope__in=chosen, dirty=False).update(dirty=True)
    return chosen


def status() -> dict[str, dict[str, int | str]]:
    """Per space: scopes, scopes packed with the current model, scopes waiting, item vectors
    of the current model (for ``reembed --status`` and the readiness of the branch)."""
    try:
        embedder = embedders.configured()
    except embedders.EmbedderUnavailable as error:
        return {"embedder": {"error": str(error)}}
    model = embedder.name if embedder is not None else ""
    answer: dict[str, dict[str, int | str]] = {"embedder": {"model": model or "off"}}
    for space in spaces.every_space():
        scopes = list(space.scopes())
        rows = ScopeVectors.objects.filter(space=space.name, scope__in=scopes)
        answer[space.name] = {
            "scopes": len(scopes),
            "packed": rows.filter(model=model, dirty=False).count(),
            "waiting": rows.filter(dirty=True).count(),
            "vectors": ItemVector.objects.filter(space=space.name, model=model).count(),
        }
    return answer


def every_scope_packed(progress: Callable[[str, int, int, int], None] | None = None) -> int:
    """Mark every scope of every space dirty and pack each (``reembed``); returns the items
    embedded. ``progress(space, scopes done, scopes, items embedded so far)`` after each.
    Nothing while the vector branch is off."""
    if not embedders.enabled():
        return 0
    made = 0
    for space in spaces.every_space():
        scopes = scopes_marked(space.name, list(space.scopes()))
        for done, scope in enumerate(scopes, start=1):
            made += scope_packed(space.name, scope)
            if progress is not None:
                progress(space.name, done, len(scopes), made)
    return made
