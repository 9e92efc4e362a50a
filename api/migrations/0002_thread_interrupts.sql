-- Pending interrupts of a thread as of its last finished run: {task_id: [{id, value}]}.
ALTER TABLE threads ADD COLUMN interrupts jsonb NOT NULL DEFAULT '{}';
