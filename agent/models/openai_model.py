"""Chat model for OpenAI and any OpenAI-compatible server.

`base_url` (usually taken from the ``OPENAI_BASE_URL`` setting) points the model at
something other than api.openai.com: vLLM (``http://host:8000/v1``), Ollama
(``http://localhost:11434/v1``), LiteLLM, or anything else that speaks the
Chat Completions API. Leave it ``None`` to use OpenAI itself.
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI
from pydantic import SecretStr


def openai_chat_model(
    *,
    api_key: str,
    base_url: str | None = None,
    model: str = "gpt-4o-mini",
    timeout: float = 120.0,
    max_retries: int = 2,
) -> BaseChatModel:
    """Return a deterministic (temperature 0) `ChatOpenAI` on the Chat Completions API.

    `stream_usage=True` asks the server for a final usage chunk when streaming
    (``stream_options.include_usage``), so token counts are available for streamed
    runs too; langchain only turns this on by itself for api.openai.com.
    `use_responses_api=False` keeps every model on ``/chat/completions``, the one
    endpoint OpenAI-compatible servers reliably implement.
    """
    return ChatOpenAI(
        api_key=SecretStr(api_key),
        base_url=base_url,
        model=model,
        temperature=0,
        timeout=timeout,
        max_retries=max_retries,
        stream_usage=True,
        use_responses_api=False,
    )
