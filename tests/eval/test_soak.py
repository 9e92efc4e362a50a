"""``eval/soak.py`` in small: a few SIGKILLs of two servers under concurrent counter runs.

The full soak (``python -m eval.soak --kills 100``) takes minutes; this runs the same code with
five kills and checks the durability contract it reports on: no duplicated or missing counter
line, no event lost or read twice by a client that reconnects with ``Last-Event-ID``, every run
verified. It also checks the soak cleans up after itself (its database, servers, data dir).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import psycopg
import pytest

from eval.soak import SoakOptions, markdown, soak

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_soak_with_a_few_kills_keeps_every_line_and_event_once(
    pg_admin_url: str, tmp_path: Path
) -> None:
    options = SoakOptions(
        kills=5,
        concurrency=2,
        servers=2,
        database_url=pg_admin_url,
        seed=7,
        drain_timeout=30,
        max_seconds=40,
        results_dir=tmp_path,
        verbose=False,
    )
    started = time.monotonic()
    report = asyncio.run(soak(options))
    elapsed = time.monotonic() - started
    s = report["summary"]
    print("\n" + report["markdown"])

    assert s["kills"] == 5
    # Kills aim at a server holding a run; one may still land just after the run ended.
    assert s["kills_interrupting_runs"] >= 4
    assert s["runs_started"] >= 2
    assert s["runs_finished"] == s["runs_verified"] == s["runs_success"] == s["runs_started"]
    assert s["duplicated_lines"] == 0 and s["missing_lines"] == 0
    assert s["events_lost"] == 0 and s["events_duplicated"] == 0
    assert s["tool_results_missing"] == 0 and s["tool_results_repeated"] == 0
    assert s["events_stored"] > 0 and s["reconnections"] >= 1
    assert s["runs_with_problems"] == 0 and report["problem_runs"] == []
    assert max(int(k) for k in s["attempts"]) >= 2  # some run was taken over
    assert s["resumed_progress_seconds"]["count"] >= 1
    assert s["interruptions_never_resumed"] == 0
    assert report["ok"] is True
    assert elapsed < 60, f"the small soak took {elapsed:.0f} s"

    # The report is on disk, and says the same.
    saved = json.loads(Path(report["path"]).read_text())
    assert saved["summary"] == s and saved["ok"] is True
    assert markdown(saved).startswith("### Soak: 5 SIGKILLs")
    # Cleaned up: its database is dropped and its data directory is gone.
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (report["database"],)
        ).fetchone()
    assert found is None
    assert not Path(report["data_dir"]).exists()
