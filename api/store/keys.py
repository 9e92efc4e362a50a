"""Built-in API keys: stored as hashes; looked up by hash on every authenticated request."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb


async def insert(
    conn: AsyncConnection[Any], key_id: str, key_hash: str, identity: str, permissions: list[str]
) -> None:
    await conn.execute(
        "INSERT INTO api_keys (key_id, key_hash, identity, permissions) VALUES (%s, %s, %s, %s)",
        (key_id, key_hash, identity, Jsonb(permissions)),
    )


async def by_hash(conn: AsyncConnection[Any], key_hash: str) -> dict[str, Any] | None:
    """The live (not revoked) key with this hash."""
    cur = await conn.execute(
        "SELECT key_id, identity, permissions FROM api_keys"
        " WHERE key_hash = %s AND revoked_at IS NULL",
        (key_hash,),
    )
    return await cur.fetchone()


async def listing(conn: AsyncConnection[Any]) -> list[dict[str, Any]]:
    cur = await conn.execute(
        "SELECT key_id, identity, permissions, created_at, revoked_at FROM api_keys"
        " ORDER BY created_at"
    )
    return list(await cur.fetchall())


async def revoke(conn: AsyncConnection[Any], key_id: str) -> bool:
    cur = await conn.execute(
        "UPDATE api_keys SET revoked_at = now() WHERE key_id = %s AND revoked_at IS NULL",
        (key_id,),
    )
    return cur.rowcount == 1
