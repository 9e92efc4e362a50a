"""The results: ``<timestamp>.json``, ``latest.md`` (tables) and ``latest.png`` (a plot)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import request_floor


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 2)


def per_run_ms(usage: dict[str, Any], key: str, runs: int) -> float | None:
    if not runs or usage.get(key) is None:
        return None
    return round(1000 * float(usage[key]) / runs, 1)


def ratios(level: dict[str, Any], mode: str = "service") -> dict[str, float | None]:
    """``mode`` / direct for one level (latency: >1 is slower; throughput: <1 is slower)."""
    d, s = level["direct"], level[mode]
    return {
        "latency_p50": ratio(s["latency_p50_ms"], d["latency_p50_ms"]),
        "latency_p95": ratio(s["latency_p95_ms"], d["latency_p95_ms"]),
        "throughput": ratio(s["runs_per_s"], d["runs_per_s"]),
        "ttfe_p50": ratio(s["ttfe_p50_ms"], d["ttfe_p50_ms"]),
        "cpu_per_run": ratio(
            per_run_ms(s["process"], "cpu_s", s["runs"]),
            per_run_ms(d["process"], "cpu_s", d["runs"]),
        ),
        "pg_cpu_per_run": ratio(pg_ms(s), pg_ms(d)),
        "all_cpu_per_run": ratio(all_ms(s), all_ms(d)),
        "db_xacts_per_run": ratio(s.get("db_xacts_per_run"), d.get("db_xacts_per_run")),
    }


def pg_ms(r: dict[str, Any]) -> float | None:
    """PostgreSQL backend CPU per run (ms), when it could be sampled."""
    usage = r.get("postgres")
    if not usage or usage.get("error"):
        return None
    return per_run_ms(usage, "cpu_s", r["runs"])


def all_ms(r: dict[str, Any]) -> float | None:
    """Graph process + tool subprocesses + PostgreSQL backends, CPU per run (ms)."""
    parts = [
        per_run_ms(r["process"], "cpu_s", r["runs"]),
        per_run_ms(r["process"], "children_cpu_s", r["runs"]),
        pg_ms(r),
    ]
    return None if any(p is None for p in parts) else round(sum(parts), 1)  # type: ignore[arg-type]


def per_step(levels: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the service adds per agent step at c=1: (service - direct) / steps, for latency
    (p50) and for CPU (graph process, and graph process + PostgreSQL)."""
    level = next((lv for lv in levels if lv["concurrency"] == 1), None)
    if level is None:
        return None
    d, s = level["direct"], level["service"]
    steps = d.get("steps_per_run") or s.get("steps_per_run")
    if not steps or d["latency_p50_ms"] is None or s["latency_p50_ms"] is None:
        return None

    def step(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round((a - b) / steps, 2)

    cpu_d = per_run_ms(d["process"], "cpu_s", d["runs"])
    cpu_s = per_run_ms(s["process"], "cpu_s", s["runs"])
    pg_d, pg_s = pg_ms(d), pg_ms(s)
    both_d = None if cpu_d is None or pg_d is None else cpu_d + pg_d
    both_s = None if cpu_s is None or pg_s is None else cpu_s + pg_s
    return {
        "graph": level.get("graph", "counter"),
        "concurrency": 1,
        "steps_per_run": steps,
        "steps_per_run_service": s.get("steps_per_run"),
        "latency_p50_ms": {"direct": d["latency_p50_ms"], "service": s["latency_p50_ms"]},
        "latency_ms_per_step": step(s["latency_p50_ms"], d["latency_p50_ms"]),
        "cpu_ms_per_step": step(cpu_s, cpu_d),
        "cpu_pg_ms_per_step": step(both_s, both_d),
        "direct_latency_ms_per_step": round(d["latency_p50_ms"] / steps, 2),
    }


def _fmt(v: Any, digits: int = 0) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def markdown(result: dict[str, Any]) -> str:
    meta = result["meta"]
    timing = ", ".join(f"{k} {v} s" for k, v in (meta.get("section_s") or {}).items())
    out = [
        f"# threadline benchmark — {meta['timestamp']}",
        "",
        f"Graphs {', '.join(meta.get('graphs') or ['counter'])} (`counter` n={meta['n']} "
        f"delay={meta['delay']}) · floor saver {meta.get('floor_saver', 'pooled')} · "
        f"{meta['cpus']} CPUs · "
        f"Python {meta['python']} · langgraph {meta['langgraph']} · PostgreSQL "
        f"{meta['postgres']} · pool {meta['pool_size']} · workers {meta['workers']} · "
        f"event loop {meta['loop']}" + (" · **quick**" if meta.get("quick") else ""),
        "",
        f"Took {meta.get('duration_s')} s ({timing}); load average (1, 5, 15 min) at the start "
        f"{meta.get('loadavg_start')}, at the end {meta.get('loadavg_end')}.",
        "",
    ]
    for graph, key in (("counter", "levels"), ("nowork", "levels_nowork")):
        if result.get(key):
            out += throughput_markdown(result, graph, result[key])
    for key, render in (
        ("per_step", per_step_markdown),
        ("per_step_nowork", per_step_markdown),
        ("eventlog", eventlog_markdown),
        ("checkpoints", checkpoints_markdown),
        ("resume", resume_markdown),
        ("longthread", longthread_markdown),
        ("longthread_delta", longthread_markdown),  # results written before 2026-12-06
        ("requestfloor", requestfloor_markdown),
    ):
        if result.get(key):
            out += ["", render(result[key], result)]
    prof = result.get("profile")
    if prof:
        out += ["", profile_markdown(prof)]
    sql = result.get("sql")
    if sql:
        out += ["", sql_markdown(sql)]
    return "\n".join(out) + "\n"


MODE_LABELS = {
    "direct": "floor",
    "service": "threadline",
    "service_create": "threadline 1 req",
    "langgraph_dev": "langgraph dev",
}


def _modes(levels: list[dict[str, Any]]) -> list[str]:
    return [m for m in MODE_LABELS if any(lv.get(m, {}).get("runs") for lv in levels)]


def throughput_markdown(
    result: dict[str, Any], graph: str, levels: list[dict[str, Any]]
) -> list[str]:
    meta = result["meta"]
    what = (
        f"the built-in agent's `counter` task (n={meta['n']}, delay={meta['delay']}; its tool "
        "calls are real subprocesses)"
        if graph == "counter"
        else "`bench/nowork.py`: agent → 5 parallel tool tasks (`Send`) → 4 more agent/tool "
        "rounds → verify, 12 supersteps, 19 events (updates + custom), nodes that do nothing"
    )
    modes = _modes(levels)
    dev = meta.get("langgraph_dev")
    saver = (
        "LangGraph's stock `AsyncPostgresSaver`"
        if meta.get("floor_saver") == "stock"
        else "the service's `PooledSaver` (an `AsyncPostgresSaver` without the one lock)"
    )
    out = [
        f"## Service vs the floor: `{graph}`",
        "",
        f"Graph: {what}. *floor* = the same graph in one process on {saver}, "
        '`durability="sync"`, a new thread per run; *threadline* = `POST /threads`, then '
        "`POST /threads/{id}/runs/stream` (`updates` + `custom`) read to `end`, against "
        "`threadline serve`; *threadline 1 req* = one `POST /threads/{new id}/runs/stream` with "
        "`if_not_exists: create`"
        + (
            "; *langgraph dev* = `langgraph dev` (in memory, not durable) on the same graph, runs "
            "started like *threadline*, read to the end of the stream"
            if graph == "nowork"
            else ""
        )
        + ". Each level runs them back to back: compare the ratios, not absolute times (shared, "
        "noisy machine)." + (f" langgraph dev: {dev}." if graph == "nowork" and dev else ""),
        "",
        "| c | mode | runs | err | runs/s | p50 ms | p95 ms | 1st graph event p50 ms "
        "| from the run's request | 1st event (metadata) p50 ms "
        "| CPU ms/run | PG CPU ms/run | tools CPU ms/run | DB xacts/run | peak RSS MB |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level in levels:
        for mode in modes:
            r = level.get(mode)
            if not r or not r.get("runs"):
                continue
            p = r["process"]
            out.append(
                f"| {level['concurrency']} | {MODE_LABELS[mode]} | {r['runs']} | {r['errors']} "
                f"| {_fmt(r['runs_per_s'], 2)} | {_fmt(r['latency_p50_ms'])} "
                f"| {_fmt(r['latency_p95_ms'])} | {_fmt(r['ttfe_p50_ms'], 1)} "
                f"| {_fmt(r.get('ttfe_run_p50_ms', r['ttfe_p50_ms']), 1)} "
                f"| {_fmt(r.get('ttfe_meta_p50_ms'), 1)} "
                f"| {_fmt(per_run_ms(p, 'cpu_s', r['runs']))} | {_fmt(pg_ms(r))} "
                f"| {_fmt(per_run_ms(p, 'children_cpu_s', r['runs']))} "
                f"| {_fmt(r.get('db_xacts_per_run'), 1)} | {_fmt(p['peak_rss_mb'])} |"
            )
    out += [
        "",
        "**÷ the floor** (same level; latency and CPU: 1.0 = as cheap as the floor, higher "
        "is worse; throughput: 1.0 = as fast, lower is worse)",
        "",
        "| c | mode | latency p50 x | latency p95 x | throughput x | TTFE graph p50 x "
        "| CPU/run x | PG CPU/run x | all CPU/run x | DB xacts/run x |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level in levels:
        for mode, q in (level.get("ratios_by_mode") or {"service": level["ratios"]}).items():
            out.append(
                f"| {level['concurrency']} | {MODE_LABELS.get(mode, mode)} "
                f"| {_fmt(q['latency_p50'], 2)} "
                f"| {_fmt(q['latency_p95'], 2)} | **{_fmt(q['throughput'], 2)}** "
                f"| {_fmt(q['ttfe_p50'], 2)} | {_fmt(q['cpu_per_run'], 2)} "
                f"| {_fmt(q['pg_cpu_per_run'], 2)} | {_fmt(q['all_cpu_per_run'], 2)} "
                f"| {_fmt(q['db_xacts_per_run'], 2)} |"
            )
    if graph == "nowork" and "langgraph_dev" not in modes:
        out += ["", f"langgraph dev: {dev or 'not measured'}."]
    out += [
        "",
        "Time to first event (TTFE): *1st graph event* is the first graph chunk (floor) / the "
        "first SSE event after `metadata` (servers), counted from the run's first request "
        "(`POST /threads` when the thread is made first); *from the run's request*: the same "
        "event counted from the request that starts the run (`POST .../runs/stream`); "
        "*1st event (metadata)* is a server's first SSE event, what a client sees first "
        "(the floor has none). TTFE x compares the graph events. Latency (servers) runs from "
        "that request to the `end` event (`langgraph dev` sends none: to the end of the "
        "stream). CPU ms/run: the graph process (floor: the benchmark process; servers: the "
        "server), excluding the tool subprocesses runs start (tools CPU); PG CPU: the "
        "PostgreSQL backends of the level's database; all CPU: the three together. DB "
        "xacts/run: `pg_stat_database.xact_commit` of the level's database over all its runs, "
        "warm-up and server start-up included (approximate). Peak RSS: sampled every 50 ms.",
    ]
    clients = [
        f"c={lv['concurrency']}: "
        + _fmt(per_run_ms(lv["service"]["client"], "cpu_s", lv["service"]["runs"]))
        for lv in levels
    ]
    out += [
        "",
        "Benchmark client CPU ms/run during the threadline phase: "
        + ", ".join(clients)
        + ". Load average (1 min) at each level's start: "
        + ", ".join(f"c={lv['concurrency']}: {lv.get('loadavg_1m_start')}" for lv in levels)
        + f" ({meta['cpus']} CPUs).",
    ]
    errors = [
        f"- c={lv['concurrency']} {MODE_LABELS[mode]}, {lv[mode]['errors']} failed, e.g.: "
        + "; ".join(f"`{e}`" for e in lv[mode]["error_samples"][:3])
        for lv in levels
        for mode in modes
        if lv.get(mode, {}).get("errors")
    ]
    starts = [
        f"- c={lv['concurrency']} langgraph dev did not start: "
        f"`{lv['langgraph_dev']['start_error'][-300:]}`"
        for lv in levels
        if (lv.get("langgraph_dev") or {}).get("start_error")
    ]
    if errors or starts:
        out += ["", "Errors:", *errors, *starts]
    out.append("")
    return out


def per_step_markdown(p: dict[str, Any], result: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"## Per-step overhead (c=1, `{p.get('graph', 'counter')}`)",
            "",
            (
                f"(service - direct) / {_fmt(p['steps_per_run'], 1)} agent steps per run "
                f"(`counter` n={result['meta']['n']}; the service counted "
                f"{_fmt(p['steps_per_run_service'], 1)}):"
                if p.get("graph", "counter") == "counter"
                else f"(service - direct) / {_fmt(p['steps_per_run'], 1)} supersteps per run "
                "(the no-work graph; *service*: `POST /threads` + stream):"
            ),
            "",
            "| latency p50 ms/step | CPU ms/step (graph process) "
            "| CPU ms/step (graph + PostgreSQL) | floor latency ms/step |",
            "|---:|---:|---:|---:|",
            f"| {_fmt(p['latency_ms_per_step'], 1)} "
            f"| {_fmt(p['cpu_ms_per_step'], 1)} | {_fmt(p['cpu_pg_ms_per_step'], 1)} "
            f"| {_fmt(p['direct_latency_ms_per_step'], 1)} |",
            "",
            "The whole difference is divided by the steps, so the per-run fixed costs (creating "
            "the thread and the run, claiming it, `metadata`/`end`, SSE set-up) are spread over "
            "them too.",
        ]
    )


def eventlog_markdown(e: dict[str, Any], result: dict[str, Any]) -> str:
    us = e["us_per_event"]
    levels = result.get("levels") or result.get("levels_nowork") or []
    level = next((lv for lv in levels if lv["concurrency"] == 1), None)
    per_run = level["service"]["events_per_run"] if level else None
    lat = level["service"]["latency_p50_ms"] if level else None
    rows = []
    for v in us:
        cost = None if per_run is None else us[v] * per_run / 1000
        share = None if cost is None or not lat else 100 * cost / lat
        best = (e.get("best_us") or {}).get(v)
        rows.append(
            f"| `{v}` | {_fmt(us[v])} | {_fmt(e['overhead_vs_insert'][v], 2)} | {_fmt(best)} "
            f"| {_fmt((e.get('best_vs_insert') or {}).get(v), 2)} "
            f"| {_fmt(e['spread_us'][v][0])}-{_fmt(e['spread_us'][v][1])} "
            f"| {_fmt(cost, 1)} | {_fmt(share, 1)} |"
        )
    return "\n".join(
        [
            "## Event-log write cost",
            "",
            f"One event at a time on one autocommit connection (a commit each, as the worker "
            f"writes), {e['rounds']} interleaved rounds of {e['events_per_round']} events "
            f"(~{e['event_bytes']} B of JSON each), a listener connected. Median of the round "
            "means, the best round, and the range. Events per run: "
            f"**{_fmt(per_run, 1)}** (service, c=1, as the client read them: `metadata` to "
            "`end`); *ms per run* = median µs/event * events per run.",
            "",
            "| variant | µs/event (median) | x insert | µs/event (best) | x insert (best) "
            "| range µs | ms per run | % of run latency (c=1) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            "`insert`: plain `INSERT ... VALUES`; `insert+notify`: with `pg_notify` in the same "
            "statement; `fenced`: the attempt/status `WHERE EXISTS` guard without notify; "
            "`append`: `api.store.events.append` (fenced + notify); `emit`: `append` on a "
            "connection checked out of the pool per event, like `Emitter.emit`. Every variant "
            "pays a commit (WAL flush, `synchronous_commit=on`), which is most of its time.",
        ]
    )


def _kb(v: float | None) -> str:
    return "-" if v is None else f"{v / 1024:.1f}"


def checkpoints_markdown(c: dict[str, Any], result: dict[str, Any]) -> str:
    out = ["## Checkpoint storage of a long thread", ""]
    for key in ("empty", "files"):
        block = c.get(key)
        if not block:
            continue
        steps = block["steps"]
        title = (
            f"{block.get('files')} files in the workspace (a listing of ~1 KB per tool result)"
            if key == "files"
            else "empty workspace (tiny tool results)"
        )
        out += [
            f"**{title}** — {steps} agent steps of one `list_files` call each (scripted "
            f'model, approval `{{"*": "auto"}}`), measured every {block["every"]} steps; '
            "storage = `pg_column_size` of the thread's rows in `checkpoints` + "
            "`checkpoint_blobs` + `checkpoint_writes` (as stored, TOAST-compressed); messages = "
            'JSON of `state.values["messages"]`.',
            "",
            "| variant | channel | storage KB | messages KB | storage ÷ messages | B/step "
            "| growth (quadratic share) | checkpoints / blobs / writes KB | blobs raw KB "
            "| rows left | ms/step | load state ms | ids stable |",
            "|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---|",
        ]
        for name, v in block["variants"].items():
            if "error" in v:
                out.append(f"| {name} | failed: {v['error']} |" + " |" * 11)
                continue
            last = v["points"][-1]
            f = v.get("fit") or {}
            out.append(
                f"| {name} | {v['channel']} | {_kb(last['storage_bytes'])} "
                f"| {_kb(last['messages_bytes'])} | **{_fmt(last['ratio'], 2)}** "
                f"| {_fmt(v['bytes_per_step'])} "
                f"| {f.get('growth', '-')} ({_fmt(f.get('quadratic_share'), 2)}) "
                f"| {_kb(last['checkpoints'])} / {_kb(last['checkpoint_blobs'])} / "
                f"{_kb(last['checkpoint_writes'])} | {_kb(last['blobs_raw'])} "
                f"| {last['checkpoints_rows']}/{last['checkpoint_blobs_rows']}/"
                f"{last['checkpoint_writes_rows']} | {_fmt(v['ms_per_step'], 1)} "
                f"| {_fmt(v['load_state_ms'], 1)} | {'yes' if v['ids_stable'] else '**no**'} |"
            )
        base = block["variants"].get("baseline") or {}
        if base.get("points"):
            pts = base["points"]
            out += [
                "",
                "baseline storage by step: "
                + ", ".join(f"{p['steps']}: {_kb(p['storage_bytes'])} KB" for p in pts)
                + f"; fit a + b·s + c·s²: b = {_fmt((base.get('fit') or {}).get('b_per_step'))} "
                f"B/step, c = {_fmt((base.get('fit') or {}).get('c_per_step2'), 1)} B/step².",
            ]
        how = {
            "prune": '`aprune([thread], strategy="keep_latest")`',
            "compact": "`api.durable.compaction.compact_thread` (snapshot the `DeltaChannel`, "
            "keep the latest checkpoint)",
        }
        for name, call in how.items():
            found = block["variants"].get(name) or {}
            if not found.get("points"):
                continue
            peak = max(p.get("before_prune", 0) for p in found["points"])
            ms = [p["prune_ms"] for p in found["points"] if "prune_ms" in p]
            out += [
                "",
                f"{name}: {call} at every measuring point; before each the thread held at "
                f"most {_kb(peak)} KB; it took {_fmt(min(ms), 1)}-{_fmt(max(ms), 1)} ms.",
            ]
        out.append("")
    out += [
        "Growth: least-squares a + b·s + c·s² over the measuring points; *quadratic* when the "
        "c·s² term is more than 20 % of the last value. *rows left*: checkpoints / blobs / "
        "writes rows of the thread at the end. *load state ms*: one `aget_state` of the finished "
        "thread. *ids stable*: message ids equal across two loads. *blobs raw*: blob bytes before "
        "TOAST compression (the synthetic steps repeat, so they compress far better than real "
        "ones would).",
    ]
    return "\n".join(out)


def resume_markdown(res: dict[str, Any], result: dict[str, Any]) -> str:
    variants = {k: v for k, v in res.items() if isinstance(v, dict) and "repeats" in v}
    first = next(iter(variants.values()))
    labels = {
        "service": "threadline as it is",
        "delta": "with `DeltaChannel` messages",
    }
    out = [
        "## Resume after `kill -9`",
        "",
        f"A `counter` run (n={first['n']}, {first['delay']} s per append) is SIGKILLed with "
        f"its server when its tool call #{first['kill_after_tool_finished']} finished "
        "(mid-step: one of two parallel calls done), and the server is restarted at once on the "
        "same port (default lease/heartbeat/poll; the restart sweeps the dead process's runs). "
        "Times from the kill use `run_events.created_at`. *ok*: every run ended `success` on "
        "attempt 2 with `counter.txt` holding each line once.",
        "",
        "| server | runs | ok | restart → `/ok` s (median / max) "
        "| kill → attempt 2 `metadata` stored s | kill → `end` stored s |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for key, r in variants.items():
        out.append(
            f"| {labels.get(key, key)}"
            + (" (checkpoints show a DeltaChannel)" if r.get("delta_channel") else "")
            + f" | {r['repeats']} | {'yes' if r['all_ok'] else '**NO**'} "
            + " ".join(
                f"| {_fmt(r[k]['median'], 2)} / {_fmt(r[k]['max'], 2)}"
                for k in ("restart_to_ok_s", "kill_to_resumed_s", "kill_to_end_s")
            )
            + " |"
        )
    return "\n".join(out)


def _longthread_cell(w: dict[str, Any], key: str) -> str:
    """``floor / threadline (threadline ÷ floor)`` of one figure of a long-thread workload."""
    ratio_value = w["service_over_floor"].get(key.removesuffix("_ms"))
    return f"{w['floor'][key]} / {w['service'][key]} ({_fmt(ratio_value, 2)})"


LONGTHREAD_LABELS = {
    "chat": "chat graph, `add_messages`",
    "chat_delta": "chat graph, `DeltaChannel`",
    "agent": "built-in agent, `counter` task",
}


def requestfloor_markdown(rf: dict[str, Any], result: dict[str, Any]) -> str:
    """What one HTTP request costs beside the floor (``bench/request_floor.py``)."""
    return request_floor.markdown(rf)


def longthread_markdown(lt: dict[str, Any], result: dict[str, Any]) -> str:
    """A long thread (``bench/longthread.py``): a row per workload, the service beside the
    floor, growth as ratios."""
    # Results written before the agent's workload hold one chat graph's figures at the top.
    workloads = lt.get("workloads") or {
        "chat_delta" if lt.get("channel") == "DeltaChannel" else "chat": lt
    }
    out = [
        "## A long thread",
        "",
        f"{lt['runs']} runs on one thread per workload: the chat graph (`bench/chat.py`, 12 "
        "messages a run, no work in its nodes) and the built-in agent (a `counter` task a run, "
        "n=5: 11 messages, 5 tool subprocesses and the acceptance check; its context compaction "
        "keeps the list bounded). The floor is the same graph on LangGraph's "
        "`AsyncPostgresSaver` in-process. *start* / *end*: the median of the first / last "
        f"{lt.get('early', 10)} runs; reads: median of {lt.get('reads', 5)}, after the last run. "
        "Each cell: floor / threadline (threadline ÷ floor; growth: floor / threadline).",
        "",
        "| workload | messages at the end | a run at the start (ms) | a run at the end (ms) | "
        "growth of a run, end ÷ start | `GET .../state` (ms) | `POST .../history` limit 10 "
        "(ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    checked = []
    for name, w in workloads.items():
        floor, svc = w["floor"], w["service"]
        messages = str(svc["messages"])
        if floor["messages"] != svc["messages"]:
            messages = f"{floor['messages']} / {svc['messages']}"
        if svc.get("compactions") or floor.get("compactions"):
            messages += f" ({floor['compactions']} / {svc['compactions']} compactions)"
        label = LONGTHREAD_LABELS.get(name, name)
        cells = [_longthread_cell(w, k) for k in ("run_first_ms", "run_last_ms")]
        cells.append(f"{floor['run_growth']} / {svc['run_growth']}")
        cells += [_longthread_cell(w, k) for k in ("state_last_ms", "history_last_ms")]
        out.append(f"| {label} | {messages} | " + " | ".join(cells) + " |")
        if "verified_runs" in svc:
            checked.append(
                f"{label}: {floor['verified_runs']} / {svc['verified_runs']} of "
                f"{svc['runs']} runs passed their acceptance check (floor / threadline)."
            )
    if checked:
        out += ["", *checked]
    return "\n".join(out)


def profile_markdown(prof: dict[str, Any]) -> str:
    out = [f"## Profile (py-spy, c={prof['concurrency']}, {prof['runs']} runs, not timed)", ""]
    for who in ("service", "direct"):
        p = prof.get(who)
        if not p or not p.get("samples"):
            continue
        pool = p.get("pool") or {}
        run = p.get("run") or {}
        out += [
            f"**{who}** — {p['samples']} CPU samples ({p.get('idle_samples_left_out')} idle "
            "left out)"
            + (f", {p['per_run']} samples/run" if p.get("per_run") else "")
            + f" · {_fmt(run.get('runs_per_s'), 2)} runs/s, p50 "
            f"{_fmt(run.get('latency_p50_ms'))} ms, TTFE p50 {_fmt(run.get('ttfe_p50_ms'))} ms"
            + (
                f" (metadata {_fmt(run.get('ttfe_meta_p50_ms'))} ms)"
                if run.get("ttfe_meta_p50_ms")
                else ""
            ),
            "",
            f"pool: {pool.get('checkouts')} checkouts, {pool.get('queued_pct')} % waited, "
            f"{pool.get('wait_ms_per_queued')} ms per wait, {pool.get('usage_ms_per_checkout')} "
            f"ms held per checkout, waiting requests mean {pool.get('mean_waiting')} / max "
            f"{pool.get('max_waiting')}, {pool.get('pool_size_end')}/{pool.get('pool_max')} "
            "connections",
            "",
            "| component (innermost non-stdlib frame of the task) | % |",
            "|---|---:|",
            *[f"| {c['name']} | {c['pct']} |" for c in p["components"]],
            "",
            "| psycopg time by caller (% of all CPU samples) | % |",
            "|---|---:|",
            *[f"| `{c['name']}` | {c['pct']} |" for c in p.get("psycopg_by_caller", [])[:10]],
            "",
            "| top self time | % |",
            "|---|---:|",
            *[f"| `{c['name']}` | {c['pct']} |" for c in p["self"][:12]],
            "",
            "| inclusive, threadline and pool frames | % |",
            "|---|---:|",
            *[
                f"| `{c['name']}` | {c['pct']} |"
                for c in [
                    c
                    for c in p["inclusive"]
                    if any(k in c["name"] for k in ("(api/", "(agent/", "psycopg_pool/"))
                ][:12]
            ],
            "",
        ]
    return "\n".join(out)


def sql_markdown(sql: dict[str, Any]) -> str:
    s, d = sql["service"], sql["direct"]
    out = [
        f"## SQL per run (c=1, {sql['runs']} runs, counted in psycopg, not timed)",
        "",
        f"service: **{s['statements_per_run']}** statements and {s['checkouts_per_run']} pool "
        f"checkouts per run; direct: **{d['statements_per_run']}** statements and "
        f"{d['checkouts_per_run']} checkouts (each checkout also runs the pool's check, counted "
        "as `(empty: ...)`; statements in one pipeline share a round trip).",
        "",
        "| statement | service/run | direct/run |",
        "|---|---:|---:|",
    ]
    keys = list(s["by_statement"])
    keys += [k for k in d["by_statement"] if k not in s["by_statement"]]
    for k in keys[:25]:
        text = k.replace("|", "\\|")
        out.append(
            f"| `{text}` | {_fmt(s['by_statement'].get(k), 1)} "
            f"| {_fmt(d['by_statement'].get(k), 1)} |"
        )
    return "\n".join(out)


def plot(result: dict[str, Any], path: Path) -> None:
    """Latency, throughput and the ratios by concurrency; checkpoint bytes by step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Latency and throughput of the no-work graph when it ran (the worst case), else counter's.
    graph = "nowork" if result.get("levels_nowork") else "counter"
    levels = result.get("levels_nowork") or result.get("levels") or []
    xs = list(range(len(levels)))
    labels = [str(lv["concurrency"]) for lv in levels]
    fig, grid = plt.subplots(2, 2, figsize=(13, 9))
    axes = list(grid.flat)
    modes = _modes(levels)
    colors = {
        "direct": "tab:blue",
        "service": "tab:orange",
        "service_create": "tab:red",
        "langgraph_dev": "tab:green",
    }

    def value(lv: dict[str, Any], mode: str, key: str) -> float | None:
        r = lv.get(mode) or {}
        return r.get(key) if r.get("runs") else None

    ax = axes[0]
    for mode in modes:
        label = MODE_LABELS[mode]
        ax.plot(
            xs,
            [value(lv, mode, "latency_p50_ms") for lv in levels],
            "o-",
            color=colors[mode],
            label=f"{label} p50",
        )
        ax.plot(
            xs,
            [value(lv, mode, "latency_p95_ms") for lv in levels],
            "s--",
            color=colors[mode],
            alpha=0.5,
            label=f"{label} p95",
        )
    ax.set_title(f"{graph}: latency per run (ms)")
    ax.set_yscale("log")

    ax = axes[1]
    width = 0.8 / max(1, len(modes))
    for i, mode in enumerate(modes):
        ax.bar(
            [x - 0.4 + width * (i + 0.5) for x in xs],
            [value(lv, mode, "runs_per_s") or 0 for lv in levels],
            width,
            label=MODE_LABELS[mode],
            color=colors[mode],
        )
    ax.set_title(f"{graph}: throughput (runs/s)")

    ax = axes[2]
    for name, key in (("counter", "levels"), ("nowork", "levels_nowork")):
        found = result.get(key) or []
        if len(found) != len(levels):
            continue
        for mode in _modes(found)[1:]:
            q = [(lv.get("ratios_by_mode") or {}).get(mode) or {} for lv in found]
            style = "-" if name == "nowork" else ":"
            ax.plot(
                xs,
                [x.get("throughput") for x in q],
                "s" + style,
                color=colors[mode],
                label=f"{name} {MODE_LABELS[mode]} throughput x",
            )
            ax.plot(
                xs,
                [x.get("latency_p50") for x in q],
                "o" + style,
                color=colors[mode],
                alpha=0.5,
                label=f"{name} {MODE_LABELS[mode]} p50 x",
            )
    ax.axhline(1.0, color="grey", lw=1)
    ax.set_title("÷ the floor (throughput: higher is better; p50: lower is better)")

    for ax in axes[:3]:
        ax.set_xticks(xs, labels)
        ax.set_xlabel("concurrency")
        if levels:
            ax.legend(fontsize=8)
        ax.grid(alpha=0.3)

    ax = axes[3]
    block = (result.get("checkpoints") or {}).get("empty") or {}
    styles = {
        "baseline": "tab:red",
        "delta": "tab:green",
        "prune": "tab:purple",
        "compact": "tab:blue",
    }
    for name, v in (block.get("variants") or {}).items():
        pts = v.get("points") or []
        if not pts:
            continue
        steps = [p["steps"] for p in pts]
        ax.plot(
            steps,
            [p["storage_bytes"] / 1024 for p in pts],
            "o-",
            color=styles.get(name),
            label=f"{name} ({v.get('channel')})",
        )
        if name == "baseline":
            ax.plot(
                steps,
                [p["messages_bytes"] / 1024 for p in pts],
                "k--",
                label="messages (JSON)",
            )
            ax.plot(
                steps,
                [5 * p["messages_bytes"] / 1024 for p in pts],
                ":",
                color="grey",
                label="5 x messages (target)",
            )
    ax.set_title("checkpoint storage of one thread (KB)")
    ax.set_xlabel("agent steps")
    ax.grid(alpha=0.3)
    if block:
        ax.legend(fontsize=8)

    meta = result["meta"]
    fig.suptitle(f"threadline vs the in-process floor — {meta['timestamp']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(result: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = result["meta"]["timestamp"].replace(":", "").replace("-", "")
    paths = {
        "json": out_dir / f"{stamp}.json",
        "md": out_dir / "latest.md",
        "png": out_dir / "latest.png",
    }
    paths["json"].write_text(json.dumps(result, indent=1, default=str) + "\n")
    paths["md"].write_text(markdown(result))
    plot(result, paths["png"])
    return paths
