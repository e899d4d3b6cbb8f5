"""A question's vector: from this process's memory, else from the table every process shares,
else from the embedder, with the questions of concurrent requests embedded in one call.

- **Normalised text.** The text embedded is the question with its Unicode composed (NFC) and its
  runs of white space made one space, trimmed: two spellings of one question differing only so
  share one vector, and the vector is always the one of the text embedded (never one of a
  neighbour's spelling).
- **Keyed per scope, by a keyed hash.** The key is an HMAC-SHA256, under the deployment's secret
  key, of the model, the index scope the question was asked in (``partition``) and the
  normalised text. The shared table (``QueryVector``) stores that key and the vector, never the
  text: a question is often a customer's own words, and the table is kept apart from any record
  of who asked. A guess cannot be checked against the table without the secret key, and a
  question asked in one tenant's scope never answers faster in another's (a faster answer would
  tell the other tenant that someone asked it).
- **Coalesced.** One thread per process and embedder (``Coalescer``) embeds the questions
  waiting, all in one call; the questions that arrive while a call runs wait for the next call
  together. No question waits for a timer: a call starts as soon as the previous one ends.
  The local engine gives each text of a batch exactly the vector it gives it alone.
- **Fork.** The coalescing thread does not survive ``fork``: a child (a gunicorn worker forked
  from a master that already embedded) starts its own on its first question.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import unicodedata
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager

import numpy as np
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils.crypto import salted_hmac

from semantic import embedders
from semantic.models import QueryVector

logger = logging.getLogger(__name__)

DEFAULT_QUERY_TIMEOUT = 2.0
MEMORY_SIZE = 4096  # question vectors kept per process
DEFAULT_SHARED_ROWS = 100_000  # question vectors kept in the shared table (1.6 KB each at 384)
PRUNE_EVERY = 256  # this process's writes between two trims of the shared table
BATCH_LIMIT = 32  # questions per embedder call at most


def normalised_text(text: str) -> str:
    """The text as embedded: NFC, white space runs made one space, trimmed."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()


def digest(model: str, partition: str, text: str) -> str:
    """The key of ``text`` (normalised) asked in ``partition`` of ``model``'s vectors."""
    message = "\x1f".join((model, partition, normalised_text(text)))
    return salted_hmac("semantic.queries", message, algorithm="sha256").hexdigest()


# --- coalescing ----------------------------------------------------------------------------------


class Coalescer:
    """Embeds the questions submitted, those waiting together in one call of ``embed``, on one
    thread of its own (started with the first question)."""

    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray], limit: int = BATCH_LIMIT):
        self._embed = embed
        self._limit = limit
        self._ready = threading.Condition(threading.Lock())
        self._waiting: list[tuple[str, Future[np.ndarray]]] = []
        self._thread: threading.Thread | None = None
        self.calls = 0  # embedder calls made (tests and the bench read it)

    def submit(self, text: str) -> Future[np.ndarray]:
        future: Future[np.ndarray] = Future()
        with self._ready:
            self._waiting.append((text, future))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="semantic-queries", daemon=True
                )
                self._thread.start()
            self._ready.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._waiting:
                    self._ready.wait()
                batch = self._waiting[: self._limit]
                del self._waiting[: self._limit]
            self._answer(batch)

    def _answer(self, batch: list[tuple[str, Future[np.ndarray]]]) -> None:
        live = [(text, f) for text, f in batch if f.set_running_or_notify_cancel()]
        if not live:
            return
        texts = list(dict.fromkeys(text for text, _ in live))  # one row per distinct text
        self.calls += 1
        try:
            vectors = np.asarray(self._embed(texts), dtype=np.float32)
            if vectors.shape[0] != len(texts):
                raise embedders.EmbedderUnavailable(
                    f"the embedder answered {vectors.shape[0]} vectors for {len(texts)} texts"
                )
        except BaseException as error:  # every waiting question learns why, none hangs
            for _, future in live:
                future.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        row = {text: i for i, text in enumerate(texts)}
        for text, future in live:
            future.set_result(vectors[row[text]])


_coalescers: weakref.WeakKeyDictionary[object, Coalescer] = weakref.WeakKeyDictionary()
_coalescers_lock = threading.Lock()


def coalescer(embedder: embedders.Embedder) -> Coalescer:
    """The process's coalescer of ``embedder``'s questions."""
    with _coalescers_lock:
        found = _coalescers.get(embedder)
        if found is None:
            found = _coalescers[embedder] = Coalescer(embedder.queries)
        return found


def _forked() -> None:
    # The child has none of the parent's threads: each coalescer would wait for a thread that
    # is not there. The child makes its own on its first question; the locks are new too, as
    # one may have been held by a parent's thread at the fork.
    global _coalescers, _coalescers_lock, _memory_lock
    _coalescers = weakref.WeakKeyDictionary()
    _coalescers_lock = threading.Lock()
    _memory_lock = threading.Lock()


os.register_at_fork(after_in_child=_forked)


# --- the caches ----------------------------------------------------------------------------------

_memory: OrderedDict[str, np.ndarray] = OrderedDict()
_memory_lock = threading.Lock()
_writes = 0

_READ_SQL = "SELECT vector FROM semantic_queryvector WHERE model = %s AND digest = %s"
_PRUNE_SQL = (
    "DELETE FROM semantic_queryvector WHERE id <= (SELECT MAX(id) FROM semantic_queryvector) - %s"
)


def _shared(model: str, key: str, dim: int) -> np.ndarray | None:
    with connection.cursor() as cursor:
        cursor.execute(_READ_SQL, [model, key])
        row = cursor.fetchone()
    if row is None:
        return None
    vector = np.frombuffer(bytes(row[0]), dtype=np.float32)
    return vector if not dim or len(vector) == dim else None


@contextmanager
def _not_waiting() -> Iterator[None]:
    """On SQLite, no wait for the write lock (the settings wait up to 20 s): a question is
    answered without sharing its vector rather than after a worker's whole task."""
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        before = int(cursor.fetchone()[0])
        cursor.execute("PRAGMA busy_timeout = 0")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA busy_timeout = {before:d}")


def _shared_written(model: str, key: str, vector: np.ndarray) -> None:
    """Store the vector for every process; a failed write costs the next process one embedding,
    never the question its answer (a savepoint keeps the caller's transaction usable)."""
    global _writes
    rows = int(getattr(settings, "SEMANTIC_QUERY_CACHE_ROWS", DEFAULT_SHARED_ROWS))
    if rows <= 0:
        return
    try:
        with _not_waiting(), transaction.atomic():
            QueryVector.objects.bulk_create(
                [QueryVector(model=model, digest=key, vector=vector.astype(np.float32).tobytes())],
                ignore_conflicts=True,
            )
            _writes += 1
            if _writes % PRUNE_EVERY == 0:
                with connection.cursor() as cursor:
                    cursor.execute(_PRUNE_SQL, [rows])
    except DatabaseError as error:
        logger.info("query vector not shared: %s", error)


def query_vector(embedder: embedders.Embedder, text: str, partition: str = "") -> np.ndarray:
    """The vector of the question ``text`` asked in ``partition`` (the index scope): from this
    process, else the shared table, else the embedder (coalesced with concurrent questions).
    ``EmbedderUnavailable`` when the embedder fails or takes longer than
    ``SEMANTIC_QUERY_TIMEOUT`` seconds."""
    key = digest(embedder.name, partition, text)
    with _memory_lock:
        kept = _memory.get(key)
        if kept is not None:
            _memory.move_to_end(key)
            return kept
    vector = _shared(embedder.name, key, int(getattr(embedder, "dim", 0) or 0))
    if vector is None:
        vector = _embedded(embedder, normalised_text(text))
        _shared_written(embedder.name, key, vector)
    with _memory_lock:
        _memory[key] = vector
        while len(_memory) > MEMORY_SIZE:
            _memory.popitem(last=False)
    return vector


def _embedded(embedder: embedders.Embedder, text: str) -> np.ndarray:
    timeout = float(getattr(settings, "SEMANTIC_QUERY_TIMEOUT", DEFAULT_QUERY_TIMEOUT))
    future = coalescer(embedder).submit(text)
    try:
        vector: np.ndarray = future.result(timeout=timeout)
    except FutureTimeout:
        future.cancel()  # still waiting: the next call leaves it out
        raise embedders.EmbedderUnavailable(
            f"the embedder did not answer within {timeout:g} s"
        ) from None
    except embedders.EmbedderUnavailable:
        raise
    except Exception as error:
        raise embedders.EmbedderUnavailable(f"the embedder failed: {error}") from error
    return vector


def memory_cleared() -> None:
    """Forget this process's question vectors (tests)."""
    with _memory_lock:
        _memory.clear()
