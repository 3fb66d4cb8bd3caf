"""The command line's setting flags are generated from the variants' settings: one flag per
setting, its help showing the spec's defaults, no default of its own; the CLI-only options
travel apart from the settings."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from reactgraph.app import cli, flags
from reactgraph.app.flags import MODEL_FLAGS, RunOptions, UsageError, flag, settings_from
from reactgraph.app.options import run_settings
from reactgraph.app.recipe import Recipe, tool_timeout
from reactgraph.nodes.vocabulary.run_settings import RunSettings, knob
from reactgraph.variants import REGISTRY, VARIANTS

RUNNING_COMMANDS = ("ask", "batch", "eval")


def command(name: str) -> argparse.ArgumentParser:
    parser = cli.make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def options_of(parser: argparse.ArgumentParser) -> list[str]:
    return [option for action in parser._actions for option in action.option_strings]


def action(parser: argparse.ArgumentParser, option: str) -> argparse.Action:
    return next(a for a in parser._actions if option in a.option_strings)


@pytest.mark.parametrize("name", RUNNING_COMMANDS)
def test_every_setting_of_every_variant_has_exactly_one_flag(name: str) -> None:
    parser = command(name)
    options = options_of(parser)
    for spec in REGISTRY.values():
        for setting in spec.settings:
            option = flag(setting.name) if setting.knob.build else MODEL_FLAGS[setting.name]
            assert options.count(option) == 1, (spec.name, setting.name, option)


@pytest.mark.parametrize("name", RUNNING_COMMANDS)
def test_each_flag_shows_the_spec_defaults_and_has_none_of_its_own(name: str) -> None:
    parser = command(name)
    parser.format_help()  # renders (a % in a description would break it)
    for spec in REGISTRY.values():
        for setting in spec.settings:
            if not setting.knob.build:
                continue
            shown = action(parser, flag(setting.name))
            assert shown.default is None, setting.name
            assert setting.knob.description.split(" (")[0] in shown.help
            assert flags.shown(setting) in shown.help, (spec.name, setting.name, shown.help)


def test_per_variant_defaults_and_takers_are_said() -> None:
    parser = command("ask")
    turns = action(parser, "--max-turns").help
    assert "10 (transcript), 40 (notes), 60 (compaction, notes_compaction)" in turns
    assert "only" not in turns
    assert "default: 10.0)" in action(parser, "--tool-timeout").help
    window = action(parser, "--context-window").help
    assert "only compaction, notes_compaction" in window and "default: looked up" in window
    assert "only notes, notes_compaction" in action(parser, "--notes-dir").help


@dataclasses.dataclass(frozen=True, kw_only=True)
class Knobbed(RunSettings):
    """The transcript variant's settings and one added later: a field is all a setting is."""

    brand_new_knob: int = knob(5, "A knob added later.", minimum=1)


def test_a_new_setting_gets_its_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = REGISTRY["transcript"]
    changed = dict(REGISTRY, transcript=dataclasses.replace(spec, settings_type=Knobbed))
    monkeypatch.setattr(flags, "REGISTRY", changed)
    parser = command("ask")
    shown = action(parser, "--brand-new-knob")
    assert shown.help == "A knob added later. (default: 5; only transcript)"
    args = parser.parse_args(["q", "--brand-new-knob", "7"])
    assert settings_from(args, ["transcript"]) == {"brand_new_knob": 7}


def ask(*argv: str) -> argparse.Namespace:
    return command("ask").parse_args(["q", *argv])


def test_a_setting_not_given_keeps_the_spec_default() -> None:
    settings, options = run_settings(ask())
    assert settings == {} and options == RunOptions()
    assert (
        tool_timeout("transcript", settings)
        == REGISTRY["transcript"].setting("tool_timeout").default
    )
    settings, _ = run_settings(ask("--tool-timeout", "2.5", "--variant", "notes"))
    assert settings == {"tool_timeout": 2.5} and tool_timeout("notes", settings) == 2.5


def test_values_are_checked_by_the_setting(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        ask("--compaction-threshold", "1.5", "--variant", "compaction")
    assert stopped.value.code == 2
    assert "--compaction-threshold: must be <= 1, got 1.5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ask("--max-turns", "ten")
    assert "'ten' is not a whole number" in capsys.readouterr().err


def test_a_flag_the_variant_does_not_take_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--context-window does not apply to the transcript"):
        run_settings(ask("--context-window", "4096"))
    with pytest.raises(UsageError, match="only to: notes, notes_compaction"):
        run_settings(ask("--window-turns", "3", "--variant", "compaction"))
    with pytest.raises(UsageError, match="--notes-in-db does not apply"):
        run_settings(ask("--notes-in-db"))


def test_an_eval_setting_applies_to_the_variants_that_take_it() -> None:
    args = command("eval").parse_args(["--bundled", "--context-window", "4096"])
    assert settings_from(args, list(VARIANTS)) == {"context_window": 4096}
    with pytest.raises(UsageError, match="does not apply"):
        settings_from(args, ["transcript", "notes"])
    recipe = Recipe("transcript", "m", None, 1.0, None, {"context_window": 4096}, "db")
    assert recipe.record("t", "q").settings == {}
    moved = dataclasses.replace(recipe, variant="compaction")
    assert moved.record("t", "q").settings == {"context_window": 4096}


def test_cli_only_options_travel_apart_from_the_settings() -> None:
    settings, options = run_settings(ask("--variant", "notes", "--notes-in-db"))
    assert settings == {} and options == RunOptions(notes_in_db=True)
    recipe = Recipe("notes", "m", None, 1.0, None, {"max_turns": 3}, "db", options=options)
    record = recipe.record("t", "q")
    assert record.settings == {"max_turns": 3}
    assert RunOptions.of(record.options) == options
    assert RunOptions.of({**options.as_dict(), "from_a_newer_version": 1}) == options


@pytest.mark.parametrize("name", RUNNING_COMMANDS)
def test_the_approve_flag_takes_tool_names_given_once_or_more(name: str) -> None:
    parser = command(name)
    needed = {"ask": ["q"], "batch": ["q.jsonl", "--out", "r.jsonl"], "eval": []}[name]
    approve = action(parser, "--approve")
    assert approve.metavar == "TOOL" and "repeatable" in approve.help
    for given, chosen in (
        (["--approve", "search"], ("search",)),
        (
            ["--approve", "search", "--approve", "calculator, lookup"],
            ("search", "calculator", "lookup"),
        ),
        (["--approve", "all"], ("all",)),
        (["--approve", "none"], ()),
    ):
        args = parser.parse_args([*needed, *given])
        assert settings_from(args, ["transcript"])["approve"] == chosen, given
    assert "approve" not in settings_from(parser.parse_args(needed), ["transcript"])
    args = parser.parse_args([*needed, "--approve", "none", "--approve", "search"])
    with pytest.raises(UsageError, match="--approve: 'none' cannot be combined with names"):
        settings_from(args, ["transcript"])
