"""The build-time objects every node needs: the model, the tools, the token counter."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool

from reactgraph.nodes import prompts
from reactgraph.nodes.providers import ModelCaller
from reactgraph.nodes.settings import Settings
from reactgraph.nodes.tokens import TokenCounter

logger = logging.getLogger(__name__)

TokenCounterFn = Callable[[Sequence[BaseMessage]], int]
ModelFactory = Callable[[str, str | None], BaseChatModel]


def model_name(model: BaseChatModel) -> str | None:
    """The model's name as its client reports it, if it does."""
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


def describe_tools(tools: Sequence[BaseTool], extra: Sequence[tuple[str, str]] = ()) -> str:
    """One line per action, name and description, for the prompt's {tool_descriptions}."""
    pairs = [(tool.name, " ".join(tool.description.split())) for tool in tools]
    pairs.extend(extra)
    return "\n".join(prompts.TOOL_LINE.format(name=n, description=d) for n, d in pairs)


@dataclass(frozen=True)
class Deps:
    """What ``build_graph`` binds into the nodes; Python objects that never enter the state."""

    model: BaseChatModel
    tools: dict[str, BaseTool]
    defaults: Settings
    tool_descriptions: str
    token_counter: TokenCounterFn
    caller: ModelCaller
    extra_actions: tuple[str, ...] = field(default=())
    model_factory: ModelFactory | None = None
    _callers: dict[tuple[str | None, str | None], ModelCaller] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def caller_for(self, settings: Settings) -> ModelCaller:
        """The built model's caller, or one for the run's ``model_name``/``base_url``."""
        name, url = settings.get("model_name"), settings.get("base_url")
        if not name and not url:
            return self.caller
        if self.model_factory is None:
            raise ValueError("this graph cannot switch models per run (no model factory)")
        with self._lock:
            caller = self._callers.get((name, url))
            if caller is None:
                chosen = name or model_name(self.model) or "gpt-4o-mini"
                model = self.model_factory(chosen, url)
                caller = ModelCaller(
                    model, chosen, self.defaults["model_retries"], self.defaults["retry_backoff_s"]
                )
                self._callers[(name, url)] = caller
            return caller

    @property
    def action_names(self) -> list[str]:
        """Every action the model may call: the tools and the variant's own actions."""
        return [*self.tools, *self.extra_actions]


def make_deps(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    defaults: Settings,
    *,
    token_counter: TokenCounterFn | None = None,
    extra_actions: Sequence[tuple[str, str]] = (),
    model_factory: ModelFactory | None = None,
) -> Deps:
    """Check the developer's objects and bundle them; misuse raises TypeError/ValueError."""
    if not isinstance(model, BaseChatModel):
        raise TypeError(f"model must be a langchain-core BaseChatModel, got {type(model).__name__}")
    if isinstance(tools, BaseTool | str | bytes) or not isinstance(tools, Sequence):
        raise TypeError("tools must be a list of langchain-core BaseTool")
    by_name: dict[str, BaseTool] = {}
    for tool in tools:
        if not isinstance(tool, BaseTool):
            raise TypeError(f"every tool must be a langchain-core BaseTool, got {tool!r}")
        if tool.name in by_name or tool.name in dict(extra_actions):
            raise ValueError(f"two actions are named {tool.name!r}")
        by_name[tool.name] = tool
    if getattr(model, "request_timeout", 0) is None:
        # ChatOpenAI waits forever by default; a hung provider would hang the run.
        logger.warning(
            "the model has no request timeout; set one (reactgraph.models.chat_model does)"
        )
    if token_counter is not None and not callable(token_counter):
        raise TypeError("token_counter must be callable: token_counter(messages) -> int")
    return Deps(
        model=model,
        tools=by_name,
        defaults=defaults,
        tool_descriptions=describe_tools(tools, extra_actions),
        token_counter=token_counter or TokenCounter(model_name(model)),
        caller=ModelCaller(
            model, model_name(model), defaults["model_retries"], defaults["retry_backoff_s"]
        ),
        extra_actions=tuple(name for name, _ in extra_actions),
        model_factory=model_factory,
    )
