"""Built-in API keys, for teams without an auth module (``THREADLINE_AUTH=keys``).

A key is ``tl_<id>_<secret>``: the id (public, shown by ``threadline keys list``) names it, the
whole key's sha256 is what is stored. Keys are random (32 bytes from ``secrets``), so a fast hash
is enough: there is nothing to guess. Accepted as ``x-api-key`` (what the LangGraph SDKs send) or
``Authorization: Bearer <key>``.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from psycopg import AsyncConnection

from api.auth.user import User
from api.store import keys as store

PREFIX = "tl_"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def new_key() -> tuple[str, str]:
    """A new key and its id."""
    key_id = secrets.token_hex(4)
    return f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}", key_id


async def create(conn: AsyncConnection[Any], identity: str, permissions: list[str]) -> str:
    """Store a new key for ``identity``; returns the key (shown once)."""
    if not identity or len(identity) > 200 or not identity.isprintable():
        raise ValueError("an identity is 1-200 printable characters")
    key, key_id = new_key()
    await store.insert(conn, key_id, hash_key(key), identity, permissions)
    return key


async def lookup(conn: AsyncConnection[Any], key: str) -> User | None:
    """The user a presented key belongs to; None for an unknown or revoked key."""
    if not key.startswith(PREFIX) or len(key) > 200:
        return None
    row = await store.by_hash(conn, hash_key(key))
    if row is None:
        return None
    return User(
        identity=row["identity"],
        permissions=tuple(row["permissions"] or ()),
        extra={"key_id": row["key_id"]},
    )
