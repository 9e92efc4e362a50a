"""``python -m bench.request_floor``: a few rounds of every item (the floor, the service's two
requests and their parts, ``/ok``, the bare app's round trip and SSE stream, a PostgreSQL
write), the transactions per run on each side, and the account of the gap, as the module runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import cli, nowork, report, request_floor

RUNS = 5


def test_a_short_run_measures_every_item(
    pg_admin_url: str, tmp_path: Path, clean_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "request-floor.json"
    request_floor.main(
        ["--runs", str(RUNS), "--warmup", "1", "--out", str(out), "--pg-url", pg_admin_url]
    )
    results = json.loads(out.read_text())

    assert set(results) == {"meta", "items", "split_of_two_requests", "account", "xacts", "samples"}
    assert list(results["items"]) == list(request_floor.ITEMS)
    for key, item in results["items"].items():
        assert len(results["samples"][key]) == item["n"] == RUNS
        assert all(s > 0 for s in results["samples"][key]), key
        assert 0 < item["min_ms"] <= item["p50_ms"] <= item["p90_ms"], key
        assert item["x_floor_p50"] > 0 and item["x_floor_p90"] > 0, key
        assert item["cpu_ms"]["all"] > 0 and item["cpu_ms"]["client"] > 0, key
    assert results["items"]["floor"]["x_floor_p50"] == 1.0
    # Each part of the two requests takes less than both together (the same samples, split).
    split = results["split_of_two_requests"]
    two = results["items"]["service_two_requests"]["p50_ms"]
    assert 0 < split["post_threads"]["p50_ms"] < two
    assert 0 < split["run_request"]["p50_ms"] < two
    # The bare stream replays a real run's: metadata, the graph's 19 events, end.
    assert results["meta"]["stream_events"] == nowork.EVENTS + 2
    assert results["meta"]["cpus"] > 0 and len(results["meta"]["loadavg_after"]) == 3

    floor, service = results["xacts"]["floor"], results["xacts"]["service"]
    assert floor["runs"] == service["runs"] == RUNS
    for side in (floor, service):
        assert side["per_run"] > 0 and side["statements_per_run"] > 0
        assert side["checkouts_per_run"] > 0 and side["by_statement"]
    # A floor run writes its 14 checkpoints (steps -1..12), one INSERT each.
    assert any(k.startswith("INSERT INTO checkpoints") for k in floor["by_statement"])
    assert service["post_threads_sql"]["statements_per_run"] > 0

    a = results["account"]
    assert a["gap_ms"] == pytest.approx(two - results["items"]["floor"]["p50_ms"], abs=0.01)
    parts = ("http_round_trips_ms", "sse_ms", "extra_transactions_ms", "remainder_ms")
    assert sum(a[k] for k in parts) == pytest.approx(a["gap_ms"], abs=0.01)
    assert a["http_round_trips_ms"] > 0
    assert a["extra_transactions"] == pytest.approx(service["per_run"] - floor["per_run"], abs=0.01)

    text = capsys.readouterr().out
    assert text == request_floor.markdown(results) + "\n"
    for item in results["items"].values():
        assert f"| {item['label']} |" in text
    assert "| **gap** |" in text
    # ``python -m bench`` reports it as its ``requestfloor`` section.
    assert report.requestfloor_markdown(results, {}) == request_floor.markdown(results)
    assert "requestfloor" in cli.SECTIONS
    assert cli.parser().parse_args(["--only", "requestfloor"]).only == ["requestfloor"]
