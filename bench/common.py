"""What the bench scripts share: their scratch databases, made from a migrated template when
one is given.

Every script works on a database of its own (a temporary SQLite file, or a PostgreSQL database
it creates and drops) and migrates it first, which takes seconds. The test suite runs every
script at its tiny scale (tests/bench/test_bench_scripts.py) and migrates once for all of them:

* ``BENCH_SQLITE_TEMPLATE``: a migrated SQLite file, copied to the script's new file;
* ``BENCH_POSTGRES_TEMPLATE``: a migrated database on the same server, the template of the
  script's new database (``CREATE DATABASE … TEMPLATE …``).

The script's ``migrate`` then finds nothing to do. Unset (a benchmark run by hand), nothing
changes. The tiny runs of the scripts that embed (``bench_semantic.py``, ``bench_merges.py``)
use :class:`HashedEmbedder` in place of the model.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

SQLITE_TEMPLATE = "BENCH_SQLITE_TEMPLATE"
POSTGRES_TEMPLATE = "BENCH_POSTGRES_TEMPLATE"


def sqlite_prepared(path: Path) -> Path:
    """``path``, a copy of ``BENCH_SQLITE_TEMPLATE`` when that is set (else left to the
    script's ``migrate`` to create)."""
    template = os.environ.get(SQLITE_TEMPLATE, "")
    if template:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, path)
    return path


def postgres_create(admin: Any, name: str) -> None:
    """``CREATE DATABASE name`` on the connection ``admin`` (autocommit, on the server's
    maintenance database), from ``BENCH_POSTGRES_TEMPLATE`` when that is set."""
    from psycopg import sql

    template = os.environ.get(POSTGRES_TEMPLATE, "")
    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template:
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template)
        )
    admin.execute(statement)


class HashedEmbedder:
    """The ``--tiny`` runs' stand-in for the local model, under its name and dimension: each
    token a fixed random direction, a text the normalised sum of its tokens'. Milliseconds for
    what the model takes a minute over; the vectors share directions where texts share tokens,
    so the vector branch ranks and fuses, but its quality figures mean nothing."""

    DIM = 384  # multilingual-e5-small's

    def __init__(self) -> None:
        from semantic.embedders import local_model_name

        self.name = local_model_name()
        self.dim = self.DIM

    def _vectors(self, texts: Sequence[str]) -> Any:
        from semantic.embedders import normalised
        from textsearch.domain import tokenize

        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for token in tokenize(text) or {text}:
                digest = hashlib.sha256(token.encode("utf-8")).digest()
                row += np.random.default_rng(int.from_bytes(digest[:8], "little")).normal(
                    size=self.dim
                )
        return normalised(rows)

    def queries(self, texts: Sequence[str]) -> Any:
        return self._vectors(texts)

    def passages(self, texts: Sequence[str]) -> Any:
        return self._vectors(texts)
