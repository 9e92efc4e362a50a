"""threadline's checkpointer (``api.durable.saver.PooledSaver``) against LangChain's checkpointer
conformance suite (``langgraph-checkpoint-conformance``): the contract every LangGraph
checkpointer keeps (blob round-trips, metadata, namespaces, incremental channel updates, ...),
on a fresh database of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator

from langgraph.checkpoint.conformance import checkpointer_test, validate

from api.durable.saver import PooledSaver
from api.platform.database import open_pool, prepare_schema


async def test_the_saver_passes_the_conformance_suite(database_url: str) -> None:
    @checkpointer_test(name="PooledSaver")
    async def saver() -> AsyncIterator[PooledSaver]:
        async with open_pool(database_url, max_size=4) as pool:
            saved = PooledSaver(pool, concurrency=2)
            await prepare_schema(pool, saved)
            yield saved

    report = await validate(saver)
    report.print_report()
    assert report.passed_all_base(), report
