"""SQL for the service's own tables: threads, runs (the queue), run events, audit."""
