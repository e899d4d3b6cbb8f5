"""The shape of an agent token: ``rca_<prefix>_<secret>``. Pure, no Django imports.

The prefix finds the stored row; the SHA-256 hash of the whole token is what is compared.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

SCHEME = "rca"
PREFIX_BYTES = 6
SECRET_BYTES = 32
TOKEN_PATTERN = re.compile(
    rf"{SCHEME}_(?P<prefix>[0-9a-f]{{{PREFIX_BYTES * 2}}})_[A-Za-z0-9_-]{{40,64}}"
)
# Compared against when no row has the prefix, so a miss costs what a hit costs.
_ABSENT_HASH = hashlib.sha256(b"no token has this prefix").hexdigest()


@dataclass(frozen=True)
class NewToken:
    text: str
    prefix: str
    digest: str


def token_generate() -> NewToken:
    prefix = secrets.token_hex(PREFIX_BYTES)
    text = f"{SCHEME}_{prefix}_{secrets.token_urlsafe(SECRET_BYTES)}"
    return NewToken(text=text, prefix=prefix, digest=token_digest(text))


def token_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def token_prefix(text: str) -> str | None:
    """The lookup prefix of a well-formed token, or None for anything else."""
    match = TOKEN_PATTERN.fullmatch(text.strip())
    return match.group("prefix") if match else None


def digest_matches(text: str, stored_digest: str | None) -> bool:
    """Constant-time comparison of the token's hash with the stored one (or a decoy)."""
    return hmac.compare_digest(token_digest(text), stored_digest or _ABSENT_HASH) and (
        stored_digest is not None
    )
