"""``GET /metrics``: Prometheus metrics (``api.platform.metrics``), behind the same authentication
as
every other route (only ``/ok`` and the page's own files are public, ``api.http.auth_guard``)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from api.http.deps import ServiceDep
from api.http.service_metrics import ServiceMetrics

router = APIRouter(tags=["system"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(request: Request, svc: ServiceDep) -> Response:
    """Prometheus text exposition: runs by status, queue depth and the oldest pending run's age,
    claim delay, attempts and takeovers, event-log batches, step durations, SSE clients, the
    connection pool."""
    registry: ServiceMetrics = request.app.state.metrics
    body = await registry.render(svc.pool)
    return Response(content=body, media_type=CONTENT_TYPE_LATEST)
