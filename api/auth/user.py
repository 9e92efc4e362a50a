"""The authenticated caller, in the shape LangGraph's ``BaseUser`` protocol and its handlers use."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.platform.errors import ApiError


class Unauthorized(ApiError):
    status = 401


@dataclass(frozen=True)
class User:
    """Identity, permissions, and whatever else the authenticator returned."""

    identity: str
    permissions: tuple[str, ...] = ()
    display_name: str = ""
    is_authenticated: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.as_dict()

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        """What a graph sees as ``config["configurable"]["langgraph_auth_user"]``."""
        return {
            **dict(self.extra),
            "identity": self.identity,
            "display_name": self.display_name or self.identity,
            "is_authenticated": self.is_authenticated,
            "permissions": list(self.permissions),
        }

    @classmethod
    def from_result(cls, result: Any) -> User:
        """An authenticator's answer: an identity string, a user dict, or a ``BaseUser``."""
        if isinstance(result, str) and result:
            return cls(identity=result)
        if isinstance(result, Mapping) and isinstance(result.get("identity"), str):
            data = dict(result)
            permissions = data.pop("permissions", None) or ()
            if isinstance(permissions, str) or not isinstance(permissions, Sequence):
                raise ValueError("permissions must be a list of strings")
            return cls(
                identity=data.pop("identity"),
                permissions=tuple(str(p) for p in permissions),
                display_name=str(data.pop("display_name", "") or ""),
                is_authenticated=bool(data.pop("is_authenticated", True)),
                extra=data,
            )
        identity = getattr(result, "identity", None)
        if isinstance(identity, str) and identity:
            return cls(
                identity=identity,
                permissions=tuple(getattr(result, "permissions", ()) or ()),
                display_name=str(getattr(result, "display_name", "") or ""),
                is_authenticated=bool(getattr(result, "is_authenticated", True)),
            )
        raise ValueError(
            "the authenticate handler must return an identity string or a dict with 'identity'"
        )


NOBODY = User(identity="anonymous", is_authenticated=False)
"""The caller when the server has no authentication (loopback only)."""
