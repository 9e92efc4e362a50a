"""``threadline keys create | list | revoke``: built-in API keys, straight on the database."""

from __future__ import annotations

import argparse
import sys

from api.auth import keys
from api.durable.saver import PooledSaver
from api.platform.database import open_pool, prepare_schema, resolve_database
from api.platform.settings import Settings
from api.store import keys as store


async def keys_command(settings: Settings, args: argparse.Namespace) -> int:
    database = await resolve_database(settings.database_url, settings.data_dir)
    async with open_pool(database.url, max_size=2) as pool:
        await prepare_schema(pool, PooledSaver(pool, concurrency=1))
        async with pool.connection() as conn:
            if args.keys_command == "create":
                try:
                    key = await keys.create(conn, args.identity, list(args.permission))
                except ValueError as err:
                    print(f"threadline keys create: {err}", file=sys.stderr)
                    return 2
                print(f"identity {args.identity}; permissions: {args.permission or 'none'}")
                print("the key is shown once; store it now:")
                print(key)
                return 0
            if args.keys_command == "list":
                for row in await store.listing(conn):
                    state = f"revoked {row['revoked_at']:%Y-%m-%d}" if row["revoked_at"] else "live"
                    print(
                        f"{row['key_id']}  {row['identity']:20} {state:18} "
                        f"{', '.join(row['permissions']) or '-'}"
                    )
                return 0
            if await store.revoke(conn, args.key_id):
                print(f"key {args.key_id} revoked")
                return 0
            print(f"threadline keys revoke: no live key {args.key_id!r}", file=sys.stderr)
            return 1
