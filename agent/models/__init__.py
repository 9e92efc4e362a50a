"""Chat models: OpenAI-compatible when configured, else the offline scripted model."""

from agent.models.offline import NOT_CONFIGURED, OFFLINE_MODEL_NAME, OfflineChatModel

__all__ = ["NOT_CONFIGURED", "OFFLINE_MODEL_NAME", "OfflineChatModel"]
