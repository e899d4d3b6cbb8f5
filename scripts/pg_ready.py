"""Whether the PostgreSQL database ``make test`` runs its half on is there, made if it is not.

Usage::

    .venv/bin/python scripts/pg_ready.py postgres://postgres@127.0.0.1:5432/test

Exit status and the one line it prints say which of three it is:

- 0, the database answers (``created database NAME`` first when it did not exist and was made,
  through the server's ``postgres`` database, as the URL's user);
- 1, the server does not answer at the URL's host and port (``PostgreSQL unreachable at …``);
- 2, the server answers but the database does not exist and could not be made (``database NAME
  does not exist at … and could not be created: …``), or the server refused the URL's user.

``scripts/test.sh`` runs it before the PostgreSQL half and prints its line in the summary.
"""

from __future__ import annotations

import sys
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors, sql

READY, UNREACHABLE, MISSING = 0, 1, 2
TIMEOUT_SECONDS = 3


def _where(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))


def _database(url: str) -> str:
    return urlsplit(url).path.lstrip("/") or "postgres"


def _maintenance(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, ""))


def check(url: str) -> tuple[int, str]:
    """(exit status, the line to print) for the database at ``url``."""
    name = _database(url)
    try:
        psycopg.connect(url, connect_timeout=TIMEOUT_SECONDS).close()
    except errors.InvalidCatalogName:
        pass  # the server answered: only the database is missing
    except psycopg.OperationalError as error:
        if f'database "{name}" does not exist' not in str(error):
            text = " ".join(str(error).split()) or type(error).__name__
            if "password authentication" in text or "role" in text:
                return MISSING, f"PostgreSQL at {_where(url)} refused the user: {text}"
            return UNREACHABLE, f"PostgreSQL unreachable at {_where(url)} ({text})"
    else:
        return READY, f"PostgreSQL ready at {_where(url)}"
    try:
        with psycopg.connect(
            _maintenance(url), connect_timeout=TIMEOUT_SECONDS, autocommit=True
        ) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        return MISSING, (
            f"database {name!r} does not exist at {_where(url)} and could not be created: "
            f"{reason} (create it, or name another in TEST_POSTGRES_URL)"
        )
    return READY, f"created database {name!r} at {_where(url)}"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    status, line = check(argv[1])
    print(line)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
