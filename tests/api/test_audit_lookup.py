"""A tool call's recorded result is found by its key (``api.store.audit.prior_result``, asked
before every tool call runs) through an index, not by reading every audit row of its thread:
on a long conversation the lookup stays one index probe."""

from __future__ import annotations

import psycopg

from api.platform.database import migrate


async def test_prior_result_is_an_index_probe_on_a_long_thread(database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await migrate(conn)
        await conn.execute("INSERT INTO threads (thread_id) VALUES ('t')")
        await conn.execute(
            "INSERT INTO audit_log (thread_id, run_id, kind, tool, tool_call_id,"
            " idempotency_key, attempt, detail, actor)"
            " SELECT 't', gen_random_uuid(), 'tool', 'run_command', 'c' || i, 't:c' || i, 1,"
            " '{\"result\": {\"ok\": true}}', 'agent' FROM generate_series(1, 3000) i"
        )
        await conn.execute("ANALYZE audit_log")
        cur = await conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) SELECT detail FROM audit_log WHERE thread_id = 't'"
            " AND kind = 'tool' AND idempotency_key = 't:c2990' AND detail ? 'result'"
            " ORDER BY id LIMIT 1"
        )
        row = await cur.fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]
    scan = plan["Plans"][0] if plan["Node Type"] == "Limit" else plan
    assert scan.get("Index Name") == "audit_tool_key_idx", scan
    assert scan["Actual Rows"] == 1 and scan.get("Rows Removed by Filter", 0) == 0
