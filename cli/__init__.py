"""The ``threadline`` command: a client of the service's HTTP API (``run``, ``resume``), plus
``serve`` (start the service) and ``keys`` (manage API keys in its database).

- ``main``: the argument parser and the commands.
- ``terminal``: drive a thread on the terminal through the API, answering approvals.
- ``console``: readable lines for the stream's events.
- ``keys``: ``threadline keys create / list / revoke``.
"""
