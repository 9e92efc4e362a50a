"""threadline's evaluation: task suites, the runner, the soak and crash modes, reports.

The servers it starts and kills come from the test suite's fixtures (``tests.utils.server``,
``tests.utils.kills``)."""
