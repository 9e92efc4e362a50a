"""The claim statement: the oldest runnable runs, one per thread, and what each thread saved.

Apart from :mod:`api.store.runs` because it is long: the attempts limit reads a thread's progress
mark (:func:`progress_mark`) at every claim and hand-back.
"""

from __future__ import annotations


def progress_mark(thread: str) -> str:
    """SQL for what the thread has saved so far, given the SQL expression of its id: its latest
    checkpoint, the writes saved on it (tool calls of a step that finished before a crash) and
    the subgraph checkpoints saved since. Any change is progress; each part is an index range.

    An attempt whose claim saw the same mark as the previous claim saved nothing: it stalled.
    Writes LangGraph puts again on a takeover (a ``Command``'s resume values) keep their keys,
    so they do not change the mark.
    """
    return f"""(SELECT coalesce(l.id, '') || '/'
        || (SELECT count(*) FROM checkpoint_writes w WHERE w.thread_id = {thread}
             AND w.checkpoint_ns = '' AND w.checkpoint_id = l.id) || '/'
        || (SELECT count(*) FROM checkpoints s WHERE s.thread_id = {thread}
             AND s.checkpoint_ns > '' AND s.checkpoint_id > coalesce(l.id, ''))
      FROM (SELECT max(c.checkpoint_id) AS id FROM checkpoints c
             WHERE c.thread_id = {thread} AND c.checkpoint_ns = '') l)"""


def saved_nothing(mark: str) -> bool:
    """Whether a :func:`progress_mark` says the thread has no checkpoint (its first part, the
    latest checkpoint's id, is empty)."""
    return mark.startswith("/")


CLAIM = f"""
WITH picked AS (
    SELECT r.run_id, r.thread_id FROM runs r
    WHERE (r.status = 'pending' OR (r.status = 'running' AND r.lease_until < now()))
      -- not one the claiming process still executes (its heartbeat was merely late)
      AND NOT r.run_id = ANY(%(executing)s::uuid[])
      -- one run per thread at a time, oldest first
      AND NOT EXISTS (
          SELECT 1 FROM runs o WHERE o.thread_id = r.thread_id AND o.run_id <> r.run_id
            AND ((o.status = 'running' AND o.lease_until >= now())
                 OR (o.status IN ('pending', 'running') AND o.created_at < r.created_at)))
    ORDER BY r.created_at
    FOR UPDATE SKIP LOCKED
    LIMIT %(limit)s),
marked AS (SELECT p.run_id, {progress_mark("p.thread_id")} AS mark FROM picked p)
UPDATE runs SET status = 'running', attempt = attempt + 1, worker_id = %(worker)s,
       lease_until = now() + make_interval(secs => %(lease)s), updated_at = now(),
       -- the previous attempt stalled when the thread saved nothing since it was claimed,
       -- unless the database itself restarted meanwhile (killed, stopped, crashed): that
       -- attempt could not save anything, and it is not the run's failure
       stalled_attempts = CASE WHEN runs.progress IS NULL THEN runs.stalled_attempts
                               WHEN runs.updated_at < pg_postmaster_start_time()
                                    THEN runs.stalled_attempts
                               WHEN runs.progress = m.mark THEN runs.stalled_attempts + 1
                               ELSE 0 END,
       progress = m.mark
FROM marked m WHERE runs.run_id = m.run_id
RETURNING runs.*,
    (SELECT coalesce(max(e.seq), 0) FROM run_events e WHERE e.run_id = runs.run_id) AS last_seq
"""
