"""Chat models for real runs: ChatOpenAI against OpenAI or any OpenAI-compatible server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# The OpenAI client and langchain-openai take about a second to import: commands that only read
# the database (show, threads, prune) never need them, so they load when a model is made.
if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

    from reactgraph.nodes.calling.transport import Transport

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_CONCURRENCY = 100


def _check_options(model: str, timeout: Any, concurrency: Any, transport: Any, stream: Any) -> None:
    """ValueError for the first of ``chat_model``'s arguments out of its range."""
    if not model:
        raise ValueError("a model name is needed, e.g. gpt-4o-mini")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a whole number >= 1, got {concurrency!r}")
    if transport not in (None, "aiohttp", "httpx"):
        raise ValueError(f"transport must be 'aiohttp' or 'httpx', got {transport!r}")
    if stream not in (None, True, False):
        raise ValueError(f"stream must be None, True or False, got {stream!r}")


def chat_model(
    model: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    temperature: float | None = None,
    transport: Transport | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    stream: bool | None = None,
) -> ChatOpenAI:
    """A ``ChatOpenAI`` set up for the ReAct loop.

    - ``timeout`` bounds each whole call (the graph enforces it as a deadline; the client alone
      would apply it per read, so a server trickling tokens could hold a call forever).
    - Retries are left to the graph, which honours Retry-After for any provider, so they are
      not doubled; usage is asked for when streaming, so token counts come from the provider.
    - Async calls go through ``transport``: "aiohttp" (the default when installed: less client
      CPU per request) or "httpx", with one connection pool per event loop holding up to
      ``concurrency`` connections, so the model works from any number of ``asyncio.run`` calls.
    - ``stream``: None (the default) streams where the server counts a streamed reply (OpenAI,
      vLLM, Ollama, llama-server), so a call abandoned at its deadline closes its response and
      the server stops generating it; a server that does not (llama-cpp-python's: no usage on a
      stream, and streams cut short when another request waits) is called plain, so its counts
      are its own from its second call on: its first streamed reply ends without usage, that
      call is counted with tiktoken, and no request is sent to find out
      (``reactgraph.nodes.calling.streamchoice``). ``True`` streams every call (such a server's
      counts are then tiktoken's); ``False`` streams none.
    - A complete plain reply to a streamed request (some proxies and servers send one) is used
      as it is (``reactgraph.nodes.calling.eventstream``).
    """
    _check_options(model, timeout, concurrency, transport, stream)
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    from reactgraph.nodes.calling.transport import LoopLocalClient, SyncClient, default_transport

    # Local servers (vLLM, Ollama, llama.cpp, LM Studio) ignore the key but the client wants one.
    key = api_key or ("not-needed" if base_url else None)
    client = LoopLocalClient(transport or default_transport(), concurrency, timeout=timeout)
    # Our own sync client too: the default one is shared by every model with the same URL, and
    # langchain-openai's socket options on it switch off proxy detection (with a warning).
    sync_client = SyncClient(concurrency, timeout=timeout)
    # `streaming` is set only to stream every call: left unset, the calls choose.
    streaming: dict[str, Any] = {"streaming": True} if stream else {}
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
        disable_streaming=stream is False,
        **streaming,
    )
