"""Settings have one shape: each is declared once, as a field of a run-settings class, and every
other description of it (the views ``check_all`` reads, the command line's flags, Studio's form,
the docs' table, the model caller's limits) is read from that field, never declared again."""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import pytest

from reactgraph import VARIANTS, build_graph
from reactgraph.app.flags import MODEL_FLAGS, flag_settings
from reactgraph.nodes.vocabulary.run_settings import Knob, RunSettings, default_of, knob_of
from reactgraph.settings import Setting
from reactgraph.variants import REGISTRY
from tests.fakes import answer, fake_model

ROOT = Path(__file__).resolve().parent.parent
SETTING_NAMES = {f.name for s in REGISTRY.values() for f in dataclasses.fields(s.settings_type)}

CARRIERS = {
    ("graphs/app/eval/arms.py", "Arm", "action_format"): "the format an eval arm runs under",
    ("graphs/app/recipe.py", "Recipe", "base_url"): "the batch's model server, from --base-url",
    ("graphs/storage/records.py", "RunRecord", "base_url"): "the recorded run's model server",
    ("graphs/scripted.py", "ScriptedChatModel", "model_name"): "LangChain's model attribute",
}
"""Classes that hold a value named like a setting without declaring it (no default, bounds or
description of the setting): each with the reason. Anything else is a second declaration."""


def test_the_view_holds_the_field_and_the_variants_default_only() -> None:
    assert [f.name for f in dataclasses.fields(Setting)] == ["field", "hint", "default"]
    for spec in REGISTRY.values():
        fields = dataclasses.fields(spec.settings_type)
        hints = typing.get_type_hints(spec.settings_type)
        assert [s.name for s in spec.settings] == [f.name for f in fields]
        for setting, field in zip(spec.settings, fields, strict=True):
            assert setting.field is field
            assert setting.knob is field.metadata["knob"] is knob_of(field)
            assert setting.hint == hints[field.name]
            assert setting.default == spec.defaults.get(field.name, default_of(field))


def test_every_settings_field_is_declared_with_its_knob() -> None:
    kinds = {RunSettings, *(spec.settings_type for spec in REGISTRY.values())}
    for kind in kinds:
        for field in dataclasses.fields(kind):
            assert isinstance(field.metadata.get("knob"), Knob), (kind.__name__, field.name)
            assert field.metadata.keys() == {"knob"}, (kind.__name__, field.name)


def test_the_command_lines_flags_are_the_fields() -> None:
    build = {
        setting.name
        for spec in REGISTRY.values()
        for setting in spec.settings
        if setting.knob.build
    }
    assert set(flag_settings()) == build
    assert set(MODEL_FLAGS) == SETTING_NAMES - build
    for name, takers in flag_settings().items():
        for variant, setting in takers.items():
            assert REGISTRY[variant].setting(name) == setting


@pytest.mark.parametrize("variant", VARIANTS)
def test_studios_form_is_the_per_run_fields(variant: str) -> None:
    spec = REGISTRY[variant]
    extra = {"context_window": 100_000} if spec.setting("context_window") else {}
    graph = build_graph(variant, model=fake_model(answer("ok")), tools=[], **extra)
    form = {f.name: f for f in dataclasses.fields(graph.context_schema)}
    own = {s.name: s for s in spec.settings if s.knob.per_run}
    assert list(form) == list(own)
    assert set(graph.get_context_jsonschema()["properties"]) == set(own)
    for name, field in form.items():
        assert field.type == own[name].hint
        assert field.metadata["description"] == own[name].knob.description


def test_no_other_class_declares_a_setting() -> None:
    found = set()
    for path in sorted(
        p for top in ("graphs", "nodes", "tools") for p in (ROOT / top).rglob("*.py")
    ):
        where = path.relative_to(ROOT).as_posix()
        if where == "nodes/vocabulary/run_settings.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            named = [line.target for line in node.body if isinstance(line, ast.AnnAssign)]
            found |= {
                (where, node.name, target.id)
                for target in named
                if isinstance(target, ast.Name) and target.id in SETTING_NAMES
            }
    assert found == set(CARRIERS), (
        "a setting is declared once, as a field of nodes/vocabulary/run_settings.py: read the "
        "run's settings value (deps.run_settings(state)) instead of copying its fields"
    )


def test_each_runs_settings_are_made_once_with_a_batchs_runs_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch's runs (100 by default) take turns, each reading its settings several times a
    step: each run's typed value is made once, not again at every read."""
    from reactgraph.nodes.loop.deps import make_deps

    made: list[int] = []
    over = RunSettings.over

    def counted(self: RunSettings, values: typing.Mapping[str, typing.Any]) -> RunSettings:
        made.append(1)
        return over(self, values)

    monkeypatch.setattr(RunSettings, "over", counted)
    deps = make_deps(fake_model(), [], RunSettings())
    states = [{"settings": {"max_turns": 3 + n % 5}} for n in range(100)]
    for _ in range(4):  # four steps, every run's turn in each
        for state in states:
            assert deps.run_settings(state).max_turns == state["settings"]["max_turns"]
    assert len(made) == len(states)
