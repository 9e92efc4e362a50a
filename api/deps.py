"""Request dependencies: the long-lived objects the lifespan put on ``app.state``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.service import Service


def get_service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]
