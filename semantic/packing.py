"""Writing vectors: each item's, then each scope's packed matrix (run by the worker).

Nothing here runs in a review's request. A change to an index scope marks its vectors dirty
and queues ``semantic.tasks.scope_vectors_task`` in the writer's transaction; the task embeds
the entries not embedded yet (batches of ``BATCH`` texts, each item once however many scopes
list it) and appends them to the scope's delta (``VectorDelta``), or packs the scope's matrix
whole when it has none of the current model; ``semantic.tasks.vectors_merge_task`` folds the
delta into the matrix once it reaches :func:`merge_threshold` (docs/architecture.md,
"Incremental indexes"). Until it has, retrieval ranks the scope's new entries by
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
from django.db.models.functions import Length

from reviewconsole import clock
from semantic import calibration, embedders, spaces
from semantic.models import ItemVector, PackedMatrix, ScopeVectors, VectorDelta

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
    whole: bool = False,
) -> int:
    """Embed a dirty scope's new entries; returns the items embedded (``whole``: pack every
    entry again, as ``reembed`` does).

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
        if not whole:
            appended = _delta_appended(space, scope, embedder, reference, now, progress, merge)
            if appended is not None:
                return appended
        return _packed_whole(space, scope, embedder, reference, now, progress)
    except Exception:
        ScopeVectors.objects.filter(space=space, scope=scope).update(dirty=True)
        raise


def _matrix_written(
    space: str, scope: int, model: str, dim: int, stored: Stored, merged_seq: int, now: datetime
) -> None:
    """Write the scope's packed matrix as a new version (the scope's state row locked)."""
    version = (
        ScopeVectors.objects.select_for_update()
        .filter(space=space, scope=scope)
        .values_list("version", flat=True)
        .get()
    ) + 1
    PackedMatrix.objects.update_or_create(
        space=space,
        scope=scope,
        defaults={
            "model": model,
            "dim": dim,
            "version": version,
            "merged_seq": merged_seq,
            "keys": stored.keys.tobytes(),
            "matrix": np.ascontiguousarray(stored.matrix, dtype=np.float32).tobytes(),
            "languages": stored.languages.tobytes(),
            "item_null": np.ascontiguousarray(stored.item_null, dtype=np.float32).tobytes(),
        },
    )
    ScopeVectors.objects.filter(space=space, scope=scope).update(
        model=model, dim=dim, version=version, merge_queued=False, packed_at=now
    )
    VectorDelta.objects.filter(space=space, scope=scope, seq__lte=merged_seq).delete()


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
    dim = int(next(iter(vectors.values())).shape[0]) if vectors else 0
    matrix = (
        np.stack([vectors[e.item] for e in ordered]).astype(np.float32)
        if ordered
        else np.zeros((0, dim), dtype=np.float32)
    )
    stored = Stored(
        np.array([e.entry for e in ordered], dtype=np.int64),
        matrix,
        calibration.language_codes(e.text for e in ordered),
        reference.item_null(matrix) if len(matrix) else np.zeros((0, 4), np.float32),
    )
    with transaction.atomic():
        _matrix_written(space, scope, embedder.name, dim, stored, seen, now)
        last = int(stored.keys[-1]) if len(stored.keys) else 0
        ScopeVectors.objects.filter(space=space, scope=scope, last_entry__lt=last).update(
            last_entry=last
        )
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
    """Append the vectors of the scope's entries after the last one with a vector to its delta;
    returns the items embedded, or None when the scope must be packed whole instead. (An entry
    committed after a later one was embedded is found by the next merge, which compares every
    entry id with the keys; until then the branch says ``partial``.)"""
    found = spaces.space(space)
    if found.entries_after is None:
        return None
    packed_row = (
        PackedMatrix.objects.filter(space=space, scope=scope)
        .annotate(
            keys_size=Length("keys"),
            languages_size=Length("languages"),
            nulls_size=Length("item_null"),
        )
        .values_list("model", "version", "keys_size", "languages_size", "nulls_size")
        .first()
    )
    if packed_row is None or packed_row[0] != embedder.name:
        return None
    model, version, keys_size, languages_size, nulls_size = packed_row
    rows = int(keys_size or 0) // 8
    if (languages_size or 0) != rows or (nulls_size or 0) != 16 * rows:
        return None  # packed before the languages and the item ends were kept
    last = (
        ScopeVectors.objects.filter(space=space, scope=scope)
        .values_list("last_entry", flat=True)
        .get()
    )
    entries = found.entries_after(scope, int(last), merge_threshold(rows) + 1)
    if len(entries) > merge_threshold(rows):
        return None
    if not entries:
        return 0
    vectors, made = item_vectors(
        space, {e.item: e.text for e in entries}, embedder, now=now, progress=progress
    )
    matrix = np.stack([vectors[e.item] for e in entries]).astype(np.float32)
    languages = calibration.language_codes(e.text for e in entries)
    nulls = reference.item_null(matrix)
    with transaction.atomic():
        locked = (
            ScopeVectors.objects.select_for_update()
            .filter(space=space, scope=scope)
            .values_list("version", "delta_seq", "merge_queued", "last_entry")
            .get()
        )
        if locked[0] != version or locked[3] != last:
            # Packed or appended meanwhile: whatever that missed is found again.
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
        merged_seq = (
            PackedMatrix.objects.filter(space=space, scope=scope)
            .values_list("merged_seq", flat=True)
            .get()
        )
        waiting = seq + len(entries) - int(merged_seq)
        due = not locked[2] and waiting >= merge_threshold(rows)
        ScopeVectors.objects.filter(space=space, scope=scope).update(
            delta_seq=seq + len(entries),
            last_entry=max(e.entry for e in entries),
            merge_queued=due or locked[2],
        )
        if due and merge is not None:
            merge(space, scope)
    return made


def vectors_merged(space: str, scope: int, *, now: datetime | None = None) -> int:
    """Fold the scope's delta into its packed matrix (the merge task): the rows of entries no
    longer in the scope are dropped, and entries without a vector (committed after a later one
    was embedded) are embedded. Returns the delta rows folded."""
    now = now or clock.now()
    row = (
        PackedMatrix.objects.filter(space=space, scope=scope)
        .values_list(
            "version", "model", "dim", "keys", "matrix", "languages", "item_null", "merged_seq"
        )
        .first()
    )
    seen = (
        ScopeVectors.objects.filter(space=space, scope=scope)
        .values_list("delta_seq", flat=True)
        .first()
    )
    if row is None or seen is None:
        ScopeVectors.objects.filter(space=space, scope=scope).update(merge_queued=False)
        return 0
    version, model, dim, keys, matrix, languages, item_null, merged_seq = row
    rows = list(
        VectorDelta.objects.filter(
            space=space, scope=scope, model=model, seq__gt=merged_seq, seq__lte=seen
        )
        .order_by("seq")
        .values_list("entry", "vector", "language", "item_null")
    )
    if not rows:
        ScopeVectors.objects.filter(space=space, scope=scope).update(merge_queued=False)
        return 0
    ids = np.frombuffer(bytes(keys), dtype=np.int64)
    base = Stored(
        ids,
        np.frombuffer(bytes(matrix), dtype=np.float32).reshape(len(ids), dim or 0),
        np.frombuffer(bytes(languages or b""), dtype=np.uint8),
        np.frombuffer(bytes(item_null or b""), dtype=np.float32).reshape(len(ids), 4),
    )
    combined = base.with_rows(rows, dim)
    found = spaces.space(space)
    if found.entry_ids is not None:
        current = np.array(sorted(found.entry_ids(scope)), dtype=np.int64)
        combined = combined.among(current)
        missing = np.setdiff1d(current, combined.keys)
        if len(missing) and found.entries_among is not None:
            combined = _embedded_among(space, scope, combined, missing, now)
    with transaction.atomic():
        locked = (
            PackedMatrix.objects.select_for_update()
            .filter(space=space, scope=scope)
            .values_list("version", flat=True)
            .first()
        )
        if locked != version:
            return 0  # packed meanwhile: that packing folded the delta
        _matrix_written(space, scope, model, int(dim), combined, int(seen), now)
    return len(rows)


def _embedded_among(
    space: str, scope: int, stored: Stored, missing: np.ndarray, now: datetime
) -> Stored:
    """``stored`` with the vectors of the entries ``missing`` added (embedded when needed)."""
    found = spaces.space(space)
    embedder = embedders.configured()
    assert found.entries_among is not None
    if embedder is None:
        return stored
    reference = reference_embedded(embedder, now)
    entries = found.entries_among(scope, [int(i) for i in missing])
    if not entries:
        return stored
    vectors, _ = item_vectors(space, {e.item: e.text for e in entries}, embedder, now=now)
    matrix = np.stack([vectors[e.item] for e in entries]).astype(np.float32)
    languages = calibration.language_codes(e.text for e in entries)
    nulls = reference.item_null(matrix)
    rows = [
        (e.entry, matrix[i].tobytes(), int(languages[i]), nulls[i].astype(np.float32).tobytes())
        for i, e in enumerate(entries)
    ]
    return stored.with_rows(rows, int(matrix.shape[1]))


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
            made += scope_packed(space.name, scope, whole=True)
            if progress is not None:
                progress(space.name, done, len(scopes), made)
    return made
