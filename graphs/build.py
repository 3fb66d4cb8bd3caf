"""``build_graph(variant, ...)``: a variant's spec, the developer's objects and settings, checked
once, assembled and compiled."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from reactgraph.assembly import assemble
from reactgraph.graph import ReactGraph, adopt
from reactgraph.models import chat_model
from reactgraph.nodes.features.budgets import check_budgets
from reactgraph.nodes.features.compaction import context_window_of
from reactgraph.nodes.loop.delta import bound_replay
from reactgraph.nodes.loop.deps import TokenCounterFn, make_deps, model_name
from reactgraph.nodes.loop.run_settings import RunSettings
from reactgraph.nodes.reading.typed_answer import schema_of
from reactgraph.nodes.running import approval
from reactgraph.settings import at_least, check_all, context_schema, names
from reactgraph.variants import variant as find_variant

VARIANT_KEY = "reactgraph_variant"
"""The checkpoint metadata key naming the variant whose graph wrote the checkpoint."""
MODEL_KEY = "reactgraph_model"
"""The checkpoint metadata key naming the model the graph was built with."""


def _openai_compatible(name: str, base_url: str | None) -> BaseChatModel:
    """A run's context may name another model: an OpenAI-compatible one, by name and URL."""
    return chat_model(name, base_url=base_url)


def build_graph(
    variant: str,
    *,
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver | None = None,
    store: BaseStore | None = None,
    token_counter: TokenCounterFn | None = None,
    summarizer: BaseChatModel | None = None,
    approve_floor: Sequence[str] | str | None = None,
    response_format: Any = None,
    **settings: Any,
) -> ReactGraph:
    """Build and compile one variant of the ReAct loop.

    ``variant`` is one of ``reactgraph.VARIANTS``. ``settings`` are the variant's own (its
    spec's ``settings``, ``reactgraph.REGISTRY[variant]``; the docs have the table); a setting
    of another variant, or a bad value, raises ``ValueError``/``TypeError``. ``store`` keeps the
    notes of the notes variants in a LangGraph store instead of files; ``token_counter`` and
    ``summarizer`` serve the compaction variants (default: tiktoken, and the model itself).
    ``response_format`` (a pydantic model class, a ``TypedDict``, a dataclass or a JSON schema
    dict) asks for a typed answer: it sets the ``answer_schema`` setting to its JSON schema.

    ``approve_floor`` (tool names, or ``"all"``) is a deployment's approval policy: those tools'
    Actions always wait for a person, whatever a run's context says; the ``approve`` setting
    (built or per run) adds tools to it and never removes one (``docs/approval-policy.md``).

    ``graph.invoke({"question": ...}, config)`` (or ``{"messages": [...]}``) returns the state,
    whose ``answer``, ``status`` and ``turns`` are the result (and ``structured_answer``, the
    answer as the JSON value that matched the schema, with one).
    """
    spec = find_variant(variant)
    if response_format is not None:
        if settings.get("answer_schema") is not None:
            raise ValueError("give response_format or answer_schema, not both")
        settings["answer_schema"] = schema_of(response_format)
    bound_replay()
    objects = {"store": store, "token_counter": token_counter, "summarizer": summarizer}
    misplaced = [name for name, value in objects.items() if value is not None]
    misplaced = [name for name in misplaced if name not in spec.objects]
    # None leaves a setting at its default, except where None is a choice of its own
    # (max_completion_tokens=None: no cap).
    optional = {s.name for s in spec.settings if s.optional and s.default is not None}
    given = {n: v for n, v in settings.items() if v is not None or n in optional}
    if misplaced:
        raise ValueError(
            f"{', '.join(misplaced)} do(es) not apply to the {variant!r} variant; "
            f"it takes: {', '.join(sorted(spec.objects)) or 'no objects besides model and tools'}"
        )
    floor = names("approve_floor", approve_floor) if approve_floor is not None else ()
    values = check_all(variant, spec.settings, given, where="build")
    values["approve"] = at_least(floor, values["approve"])
    if "context_window" in values and values["context_window"] is None:
        values["context_window"] = context_window_of(
            model, model_name(model) if isinstance(model, BaseChatModel) else None
        )
    built = spec.settings_type.of(values)
    deps = make_deps(
        model,
        tools,
        built,
        view=spec.view,
        token_counter=token_counter,
        summarizer=summarizer,
        extra_actions=[(action.name, action.description) for action in spec.actions],
        store=store,
        model_factory=_openai_compatible,
        variant=spec.name,
    )
    tools_named = partial(approval.check_names, tools=deps.tools)

    def also(chosen: RunSettings) -> None:
        """What one setting alone cannot tell: a tool to approve (or limit) the graph lacks; a
        cost budget without prices; a model that cannot bind tools for
        ``action_format="tool_calls"``."""
        tools_named(chosen.approve)
        check_budgets(chosen, deps.tools)
        deps.check_format(chosen)

    also(built)
    schema = context_schema(variant, spec.settings, built, also=also, floors={"approve": floor})
    builder = assemble(spec, deps, schema)
    compiled = builder.compile(checkpointer=checkpointer, store=store, name=variant)
    # Every checkpoint's metadata names the variant (and model) that wrote it, so a thread run
    # from Python, which has no run record, is still listed and read by the command line.
    made_by = {VARIANT_KEY: variant, MODEL_KEY: model_name(model) or type(model).__name__}
    return adopt(compiled.with_config(metadata=made_by))
