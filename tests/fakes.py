"""The test doubles, all in one place: a recording scripted model and misbehaving tools."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool, StructuredTool, tool

from graphs.scripted import Reply, ScriptedChatModel
from nodes.tokens import message_text


class FakeChatModel(ScriptedChatModel):
    """The scripted model with helpers to read back what it was sent."""

    @property
    def prompts(self) -> list[str]:
        """Each call's prompt as one text."""
        return [prompt_text(call["messages"]) for call in self.calls]

    @property
    def stops(self) -> list[list[str] | None]:
        """The ``stop`` argument of each call."""
        return [call["stop"] for call in self.calls]


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    """Messages joined into one text, for containment checks."""
    return "\n".join(message_text(m) for m in messages)


def fake_model(*replies: Reply, **options: Any) -> FakeChatModel:
    """A FakeChatModel with these replies."""
    return FakeChatModel(replies=list(replies), **options)


def action(name: str, tool_input: str, thought: str = "I should look.") -> str:
    """A well-formed action reply."""
    return f"Thought: {thought}\nAction: {name}[{tool_input}]"


def answer(text: str) -> str:
    """A well-formed final answer reply."""
    return f"Thought: I now have enough information.\nFinal Answer: {text}"


class ToolLog:
    """Records tool calls in order, across tools."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def echo(self, name: str = "echo") -> BaseTool:
        """A tool that returns its input, recorded."""

        def run(text: str) -> str:
            self.calls.append((name, text))
            return f"echo: {text}"

        return StructuredTool.from_function(run, name=name, description=f"{name} the input")

    def wrap(self, inner: BaseTool) -> BaseTool:
        """The same tool, its calls recorded."""

        def run(text: str) -> str:
            self.calls.append((inner.name, text))
            return inner.invoke(text)

        return StructuredTool.from_function(run, name=inner.name, description=inner.description)


@tool
def explode(text: str) -> str:
    """Always raises."""
    raise RuntimeError(f"boom on {text}")


@tool
def sleepy(text: str) -> str:
    """Sleeps far past any test timeout."""
    time.sleep(30)
    return "too late"


@tool
def big(text: str) -> str:
    """Returns 5,000 characters."""
    return "x" * 5000


@tool
def add(a: int, b: int) -> int:
    """Adds two numbers given as a JSON object."""
    return a + b
