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
from datetime import datetime

import numpy as np
from django.db import transaction
from django.db.models import F

from reviewconsole import clock
from semantic import calibration, embedders, spaces
from semantic.models import ItemVector, ScopeVectors

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


def scope_packed(
    space: str,
    scope: int,
    *,
    now: datetime | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Pack one scope's matrix if it is dirty; returns the items embedded.

    The dirty flag is cleared first, in its own transaction, so a change committed while this
    runs marks the scope again and queues another packing; a failure marks it again too."""
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
        ScopeVectors.objects.filter(space=space, scope=scope).update(
            model=embedder.name,
            dim=dim,
            keys=keys.tobytes(),
            matrix=matrix.tobytes(),
            languages=calibration.language_codes(e.text for e in ordered).tobytes(),
            item_null=reference.item_null(matrix).tobytes() if len(matrix) else b"",
            version=F("version") + 1,
            packed_at=now,
        )
        return made
    except Exception:
        ScopeVectors.objects.filter(space=space, scope=scope).update(dirty=True)
        raise


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
