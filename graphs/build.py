"""``build_graph(variant, ...)``: a variant's spec, the developer's objects and settings, checked
once, assembled and compiled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from reactgraph.assembly import assemble, loop_middleware
from reactgraph.context import at_least, at_most, check_ceiling, context_schema
from reactgraph.graph import ReactGraph, adopt
from reactgraph.models import chat_model
from reactgraph.nodes.calling.providers import model_name
from reactgraph.nodes.loop.compaction import context_window_of
from reactgraph.nodes.loop.deps import TokenCounterFn, make_deps
from reactgraph.nodes.loop.middleware import adapters, approval
from reactgraph.nodes.loop.middleware.budgets import check_budgets
from reactgraph.nodes.loop.middleware.ladder import Ladder
from reactgraph.nodes.loop.middleware.rungs import check_run, rungs_of
from reactgraph.nodes.reading.answer_schema import schema_of
from reactgraph.nodes.vocabulary.delta import bound_replay
from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.settings import check_all, names
from reactgraph.spec import Variant
from reactgraph.variants import MODEL_KEY as MODEL_KEY
from reactgraph.variants import VARIANT_KEY as VARIANT_KEY
from reactgraph.variants import variant as find_variant


def _openai_compatible(name: str, base_url: str | None) -> BaseChatModel:
    """A run's context may name another model: an OpenAI-compatible one, by name and URL."""
    return chat_model(name, base_url=base_url)


def _check_objects(spec: Variant, objects: dict[str, Any]) -> None:
    """ValueError for an object (store, token counter, summarizer) the variant does not take."""
    misplaced = [name for name, value in objects.items() if value is not None]
    misplaced = [name for name in misplaced if name not in spec.objects]
    if misplaced:
        raise ValueError(
            f"{', '.join(misplaced)} do(es) not apply to the {spec.name!r} variant; "
            f"it takes: {', '.join(sorted(spec.objects)) or 'no objects besides model and tools'}"
        )


def _given(spec: Variant, settings: dict[str, Any]) -> dict[str, Any]:
    """The settings ``build_graph`` was given: None leaves a setting at its default, except
    where None is a choice of its own (``max_completion_tokens=None``: no cap)."""
    optional = {s.name for s in spec.settings if s.optional and s.default is not None}
    return {n: v for n, v in settings.items() if v is not None or n in optional}


def _middleware_tools(application: Sequence[Any]) -> list[BaseTool]:
    """The tools the application's middleware registers (its ``tools``)."""
    return [t for m in application for t in getattr(m.wrapped, "tools", ()) or ()]


def _answer_schema(settings: dict[str, Any], response_format: Any) -> None:
    """``response_format`` as the ``answer_schema`` setting (its JSON schema); ValueError when
    both are given."""
    if settings.get("answer_schema") is not None:
        raise ValueError("give response_format or answer_schema, not both")
    settings["answer_schema"] = schema_of(response_format)


def _fill_context_window(values: dict[str, Any], model: Any) -> None:
    """A ``context_window`` left to the model (None): the model's own, where it is known."""
    if "context_window" in values and values["context_window"] is None:
        values["context_window"] = context_window_of(
            model, model_name(model) if isinstance(model, BaseChatModel) else None
        )


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
    budget_ceiling: Mapping[str, Any] | None = None,
    response_format: Any = None,
    middleware: Sequence[Any] = (),
    escalate_to: Sequence[Any] | None = None,
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

    ``middleware`` (LangChain v1 ``AgentMiddleware`` objects: LangChain's own, or your
    subclasses) wraps every model call and tool call of the loop and runs on its state, the
    first in the list outermost, as ``create_agent`` runs them (``docs/middleware.md``); one
    that needs state reactgraph does not have raises ValueError naming it and the hook. The
    tools a middleware registers join ``tools``.

    ``approve_floor`` (tool names, or ``"all"``) is a deployment's approval policy: those tools'
    Actions always wait for a person, whatever a run's context says; the ``approve`` setting
    (built or per run) adds tools to it and never removes one (``docs/approval-policy.md``).

    ``budget_ceiling`` (``{"max_run_tokens": 20000, "tool_call_limits": {"search": 5}}``: any of
    ``max_run_tokens``, ``max_run_cost``, ``max_run_seconds``, ``tool_call_limits``) is a
    deployment's budget: the most any run may spend, whatever its context says. A budget built
    or given per run is the smaller of the two; a run cannot raise or remove it. Under a cost
    ceiling, ``token_prices`` (which it needs) is fixed too (``docs/budgets.md``).

    ``escalate_to`` (chat models, ``reactgraph.Rung``s, or ``MODEL[@BASE_URL]`` names) is the
    model ladder: the rungs above ``model``, in order. A run moves up one rung, for the rest of
    the run, when a model call fails after its retries, when ``escalate_after`` replies in a row
    cannot be used, or instead of ending stuck (``docs/ladder.md``); a run's context may name
    fewer rungs (``escalate_to``: their names), never others.

    ``graph.invoke({"question": ...}, config)`` (or ``{"messages": [...]}``) returns the state,
    whose ``answer``, ``status`` and ``turns`` are the result (and ``structured_answer``, the
    answer as the JSON value that matched the schema, with one).
    """
    spec = find_variant(variant)
    application = adapters.check(middleware)
    rungs, rung_names = rungs_of(escalate_to, model, _openai_compatible)
    if rungs:
        settings["escalate_to"] = rung_names[1:]
    tools = [*tools, *_middleware_tools(application)]
    if response_format is not None:
        _answer_schema(settings, response_format)
    bound_replay()
    objects = {"store": store, "token_counter": token_counter, "summarizer": summarizer}
    given = _given(spec, settings)
    _check_objects(spec, objects)
    floor = names("approve_floor", approve_floor) if approve_floor is not None else ()
    ceiling = check_ceiling(variant, spec.settings, budget_ceiling)
    values = check_all(variant, spec.settings, given, where="build")
    values["approve"] = at_least(floor, values["approve"])
    for budget, limit in ceiling.items():
        values[budget] = at_most(limit, values[budget])
    _fill_context_window(values, model)
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
    ladder = Ladder(rungs, rung_names) if rungs else None
    for rung in rungs:  # a rung's own settings, checked as the run's are
        check_all(variant, spec.settings, rung.settings, where="build")
    chain = loop_middleware(spec.name, model, list(deps.tools), application, ladder)
    deps = replace(deps, chain=chain)
    tools_named = partial(approval.check_names, tools=deps.tools)

    def also(chosen: RunSettings) -> None:
        """What one setting alone cannot tell: a tool to approve (or limit) the graph lacks; a
        cost budget without prices; a model that cannot bind tools for
        ``action_format="tool_calls"``."""
        tools_named(chosen.approve)
        check_run(rung_names[1:], chosen.escalate_to)
        check_budgets(chosen, deps.tools)
        deps.check_format(chosen)

    also(built)
    # Under a cost ceiling the prices it counts at are the deployment's: a run that priced its
    # tokens at nothing would never reach it.
    fixed = {"token_prices": built.token_prices} if "max_run_cost" in ceiling else {}
    schema = context_schema(
        variant,
        spec.settings,
        built,
        also=also,
        floors={"approve": floor},
        ceilings=ceiling,
        fixed=fixed,
    )
    builder = assemble(spec, deps, schema)
    compiled = builder.compile(checkpointer=checkpointer, store=store, name=variant)
    # Every checkpoint's metadata names the variant (and model) that wrote it, so a thread run
    # from Python, which has no run record, is still listed and read by the command line.
    made_by = {VARIANT_KEY: variant, MODEL_KEY: model_name(model) or type(model).__name__}
    return adopt(compiled.with_config(metadata=made_by))
