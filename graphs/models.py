"""Chat models for real runs: ChatOpenAI against OpenAI or any OpenAI-compatible server."""

from __future__ import annotations

from langchain_openai import ChatOpenAI

DEFAULT_TIMEOUT_S = 60.0


def chat_model(
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    temperature: float | None = None,
) -> ChatOpenAI:
    """A ``ChatOpenAI`` set up for the ReAct loop.

    It always has a request timeout (ChatOpenAI has none by default), leaves retries to the
    graph (which honours Retry-After for any provider, so they are not doubled), and asks for
    usage when streaming, so token counts come from the provider.
    """
    if not model:
        raise ValueError("a model name is needed, e.g. gpt-4o-mini")
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
    # Local servers (vLLM, Ollama, llama.cpp, LM Studio) ignore the key but the client wants one.
    key = api_key or ("not-needed" if base_url else None)
    return ChatOpenAI(
        model=model,
        base_url=base_url,
        api_key=key,
        timeout=timeout,
        max_retries=0,
        stream_usage=True,
        temperature=temperature,
    )
