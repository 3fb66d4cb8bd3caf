"""Chat models for real runs: ChatOpenAI against OpenAI or any OpenAI-compatible server."""

from __future__ import annotations

from typing import TYPE_CHECKING

# The OpenAI client and langchain-openai take about a second to import: commands that only read
# the database (show, threads, prune) never need them, so they load when a model is made.
if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

    from reactgraph.transport import Transport

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_CONCURRENCY = 100


def chat_model(
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    temperature: float | None = None,
    transport: Transport | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    stream: bool = True,
) -> ChatOpenAI:
    """A ``ChatOpenAI`` set up for the ReAct loop.

    - ``timeout`` bounds each whole call (the graph enforces it as a deadline; the client alone
      would apply it per read, so a server trickling tokens could hold a call forever).
    - Retries are left to the graph, which honours Retry-After for any provider, so they are
      not doubled; usage is asked for when streaming, so token counts come from the provider.
    - Async calls go through ``transport``: "aiohttp" (the default when installed: less client
      CPU per request) or "httpx", with one connection pool per event loop holding up to
      ``concurrency`` connections, so the model works from any number of ``asyncio.run`` calls.
    - ``stream`` (the default) makes every call a streamed one, so a call abandoned at its
      deadline closes its response and the server stops generating it. A server that reports
      no usage when streaming (llama-cpp-python's) then has its tokens counted with tiktoken;
      ``stream=False`` gets its usage, but an abandoned call runs on in the server.
    """
    if not model:
        raise ValueError("a model name is needed, e.g. gpt-4o-mini")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a whole number >= 1, got {concurrency!r}")
    if transport not in (None, "aiohttp", "httpx"):
        raise ValueError(f"transport must be 'aiohttp' or 'httpx', got {transport!r}")
    import openai
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    from reactgraph.transport import LoopLocalClient, connection_limits, default_transport

    # Local servers (vLLM, Ollama, llama.cpp, LM Studio) ignore the key but the client wants one.
    key = api_key or ("not-needed" if base_url else None)
    client = LoopLocalClient(transport or default_transport(), concurrency, timeout=timeout)
    # Our own sync client too: the default one is shared by every model with the same URL, and
    # langchain-openai's socket options on it switch off proxy detection (with a warning).
    sync_client = openai.DefaultHttpxClient(timeout=timeout, limits=connection_limits(concurrency))
    return ChatOpenAI(
        model=model,
        base_url=base_url,
        api_key=SecretStr(key) if key else None,
        timeout=timeout,
        max_retries=0,
        stream_usage=True,
        temperature=temperature,
        http_async_client=client,
        http_client=sync_client,
        http_socket_options=(),  # our clients are used as given: nothing for it to inject
        disable_streaming=not stream,
    )
