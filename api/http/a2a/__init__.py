"""A2A (Agent2Agent) at ``/a2a/{assistant_id}``, on the official ``a2a-sdk``: its JSON-RPC routes
(v1.0 and v0.3 method names) over a :class:`~a2a.server.request_handlers.RequestHandler` backed by
threadline's durable runs, the agent card, and push notifications.

``handler`` (the methods), ``messages`` (starting and answering tasks), ``tasks`` (task ids,
states, the Task snapshot), ``parts`` (A2A parts ↔ LangGraph input and messages), ``stream``
(stored events → A2A stream events), ``push`` (push configs), ``card`` (the agent card),
``context`` (what each call carries, errors), ``routes`` (mounting).
"""
