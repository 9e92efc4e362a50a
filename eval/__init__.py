"""threadline's evaluation: task suites, the kill harness (``eval.harness``), reports."""
