"""Pipeline specs: validation of the graph and the plans it gives requests."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from omnivox.core.errors import InvalidMessage
from omnivox.pipeline.messages import CLIENT
from omnivox.pipeline.spec import PipelineSpec, StageSpec, load_spec, shipped_specs, to_toml


def spec(*stages: dict, name: str = "t") -> PipelineSpec:
    return PipelineSpec.model_validate({"name": name, "stages": list(stages)})


def test_the_shipped_specs_load() -> None:
    assert {"cascade", "fanin", "noop"} <= set(shipped_specs())
    cascade = load_spec("cascade")
    assert cascade.names == ["asr", "llm", "tts"] and cascade.stage("asr").slots >= 1


@pytest.mark.parametrize(
    "stages",
    [
        [{"name": "a", "scheduler": "simple", "model": "m", "next": ["nowhere"]}],
        [{"name": "a", "scheduler": "magic", "model": "m"}],
        [{"name": "a", "scheduler": "simple", "model": "m", "next": ["a"]}],
        [
            {"name": "a", "scheduler": "simple", "model": "m", "next": ["b"]},
            {"name": "b", "scheduler": "simple", "model": "m", "next": ["a"]},
        ],
        [
            {"name": "a", "scheduler": "simple", "model": "m"},
            {"name": "a", "scheduler": "simple", "model": "m"},
        ],
        [{"name": "a", "scheduler": "simple", "model": "m", "slots": 0}],
        [{"name": "a", "scheduler": "simple", "model": "m", "next": ["client"], "stream": ["b"]}],
        [  # a stage taking a stream may have one input only
            {"name": "a", "scheduler": "simple", "model": "m", "next": ["c"], "stream": ["c"]},
            {"name": "b", "scheduler": "simple", "model": "m", "next": ["c"]},
            {"name": "c", "scheduler": "streaming", "model": "m"},
        ],
    ],
)
def test_bad_specs_are_refused(stages: list[dict]) -> None:
    with pytest.raises(ValidationError):
        spec(*stages)


def test_the_cascade_gives_each_kind_of_request_its_route() -> None:
    cascade = load_spec("cascade")
    hearing = cascade.plan(["asr"], ["asr"])
    assert hearing.targets == {"asr": ["client"]} and hearing.streams == {"asr": ["client"]}
    reply = cascade.plan(["llm"])
    assert reply.exits == ["llm", "tts"]
    assert reply.targets["llm"] == ["tts", "client"] and reply.inputs["tts"] == ["llm"]
    whole = cascade.plan()
    assert whole.entries == ["asr"] and whole.targets["asr"] == ["llm"]


def test_fan_in_inputs_and_bad_routes() -> None:
    fanin = load_spec("fanin")
    plan = fanin.plan()
    assert plan.inputs["llm"] == ["audio_encoder", "image_encoder"]
    with pytest.raises(InvalidMessage):
        fanin.plan(["llm"], ["audio_encoder"])
    with pytest.raises(InvalidMessage):
        fanin.plan(["nope"])


def test_a_spec_written_as_toml_reads_back_the_same(tmp_path) -> None:
    from omnivox.pipeline.spec import to_toml

    for name in ("cascade", "fanin", "noop"):
        spec = load_spec(name)
        path = tmp_path / f"{name}.toml"
        path.write_text(to_toml(spec))
        assert load_spec(str(path)) == spec


def stage(name: str, **kw) -> dict:
    return {"name": name, "scheduler": kw.pop("scheduler", "simple"), "model": kw.pop("model", "noop"), **kw}


def test_stage_defaults() -> None:
    s = StageSpec.model_validate(stage("a"))
    assert s.slots == 1 and s.batch == 1 and s.threads == 1
    assert s.next == [CLIENT] and s.stream == [] and s.placement == "local"
    assert s.holds_sessions is False and s.options == {}


@pytest.mark.parametrize(
    "bad",
    [
        stage("A"),  # upper case
        stage("1a"),  # starts with a digit
        stage("a-b"),  # dash
        stage("a" * 33),  # too long
        stage(""),
        stage("a", slots=0),
        stage("a", slots=4097),
        stage("a", batch=0),
        stage("a", threads=257),
        stage("a", placement="cloud"),
        stage("a", scheduler="batch"),
        {"name": "a", "scheduler": "simple"},  # model missing
        {"name": "a", "model": "m"},  # scheduler missing
        stage("a", next=["client"], stream=["elsewhere"]),
    ],
)
def test_bad_stage_fields_are_refused(bad: dict) -> None:
    with pytest.raises(ValidationError):
        StageSpec.model_validate(bad)


def test_the_longest_allowed_name_and_the_limits_are_accepted() -> None:
    s = StageSpec.model_validate(stage("a" + "_9" * 15 + "z", slots=4096, batch=4096, threads=256))
    assert len(s.name) == 32 and s.slots == 4096


def test_a_stream_to_the_client_needs_no_next_entry() -> None:
    s = StageSpec.model_validate(stage("a", next=["b"], stream=[CLIENT]))
    assert s.stream == [CLIENT]


@pytest.mark.parametrize(
    ("stages", "words"),
    [
        ([], None),  # at least one stage
        ([stage("client")], "not a stage name"),
        ([stage("a", next=["b"])], "unknown stages"),
        ([stage("a", next=["a"])], "itself"),
        ([stage("a"), stage("a")], "unique"),
        (
            [stage("a", next=["b"]), stage("b", next=["c"]), stage("c", next=["a"])],
            "cycle",
        ),
    ],
)
def test_graph_errors_say_what_is_wrong(stages: list[dict], words: str | None) -> None:
    with pytest.raises(ValidationError) as info:
        spec(*stages)
    if words:
        assert words in str(info.value)


def test_a_diamond_is_not_a_cycle() -> None:
    s = spec(
        stage("a", next=["b", "c"]),
        stage("b", next=["d"]),
        stage("c", next=["d"]),
        stage("d"),
    )
    plan = s.plan()
    assert plan.entries == ["a"] and plan.exits == ["d"]
    assert sorted(plan.inputs["d"]) == ["b", "c"] and plan.inputs["a"] == []
    assert plan.targets["d"] == [CLIENT]


def test_views() -> None:
    s = spec(stage("a", next=["b"]), stage("b"), stage("c"))
    assert s.names == ["a", "b", "c"]
    assert s.sources == ["a", "c"]
    assert s.stage("b").name == "b"
    with pytest.raises(KeyError):
        s.stage("zzz")


def test_the_default_route_covers_every_source_and_client_sender() -> None:
    s = spec(stage("a", next=["b"]), stage("b"), stage("c"))
    plan = s.plan(client_host="h")
    assert sorted(plan.entries) == ["a", "c"]
    assert sorted(plan.exits) == ["b", "c"]
    assert plan.client_host == "h"


def test_a_plan_keeps_only_the_part_of_the_graph_between_entries_and_exits() -> None:
    s = spec(
        stage("a", next=["b", "x"], stream=["b"]),
        stage("b", next=["c", CLIENT], stream=["c", CLIENT]),
        stage("c"),
        stage("x"),
    )
    plan = s.plan(["a"], ["b"])
    assert set(plan.targets) == {"a", "b"}  # c and x are off the route
    assert plan.targets == {"a": ["b"], "b": [CLIENT]}
    assert plan.streams == {"a": ["b"], "b": [CLIENT]}  # b's stream to c is off the route
    assert plan.inputs == {"a": [], "b": ["a"]}


def test_an_exit_in_the_middle_also_sends_to_the_client() -> None:
    s = spec(stage("a", next=["b"]), stage("b", next=["c"]), stage("c"))
    plan = s.plan(["a"], ["b", "c"])
    assert plan.targets["b"] == ["c", CLIENT] and plan.targets["c"] == [CLIENT]


@pytest.mark.parametrize(
    ("entries", "exits"),
    [
        (["ghost"], None),
        (["a"], ["ghost"]),
        (["b"], ["a"]),  # upstream of the entry: unreachable
        (["c"], ["b"]),  # another branch
    ],
)
def test_routes_the_graph_lacks_are_invalid_messages(entries, exits) -> None:
    s = spec(stage("a", next=["b"]), stage("b"), stage("c"))
    with pytest.raises(InvalidMessage) as info:
        s.plan(entries, exits)
    assert info.value.code == "invalid_message"


def test_loading_a_toml_file_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'name = "mine"\n'
        "[[stages]]\n"
        'name = "enc"\nscheduler = "simple"\nmodel = "noop"\nbatch = 4\nnext = ["dec"]\n'
        "[stages.options]\nsleep_ms = 5\n"
        "[[stages]]\n"
        'name = "dec"\nscheduler = "ar"\nmodel = "count"\n'
    )
    s = load_spec(str(path))
    assert s.name == "mine" and s.names == ["enc", "dec"]
    assert s.stage("enc").batch == 4 and s.stage("enc").options == {"sleep_ms": 5}
    assert s.stage("dec").next == [CLIENT]


@pytest.mark.parametrize(
    "text",
    [
        'name = "x"\nstages = []\n',
        'name = "x"\n[[stages]]\nname = "a"\nscheduler = "nope"\nmodel = "m"\n',
        'name = "x"\n[[stages]]\nname = "a"\nscheduler = "simple"\nmodel = "m"\nslots = -1\n',
        'name = "x"\n[[stages]]\nname = "a"\nscheduler = "simple"\nmodel = "m"\nnext = ["b"]\n',
        '[[stages]]\nname = "a"\nscheduler = "simple"\nmodel = "m"\n',  # no pipeline name
    ],
)
def test_invalid_toml_specs_are_validation_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValidationError):
        load_spec(str(path))


def test_a_file_that_is_not_toml_is_refused(tmp_path: Path) -> None:
    import tomllib

    path = tmp_path / "broken.toml"
    path.write_text("name = \n[[[")
    with pytest.raises(tomllib.TOMLDecodeError):
        load_spec(str(path))


def test_an_unknown_spec_name_says_which_exist(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        load_spec("no-such-pipeline")
    assert "cascade" in str(info.value)
    with pytest.raises(FileNotFoundError):
        load_spec(str(tmp_path / "missing.toml"))


def test_every_shipped_spec_loads_and_plans() -> None:
    for name in shipped_specs():
        s = load_spec(name)
        plan = s.plan()
        assert plan.entries and plan.exits
        assert set(plan.entries) <= set(s.names) and set(plan.exits) <= set(s.names)


def test_to_toml_writes_options_and_booleans_and_reads_back(tmp_path: Path) -> None:
    s = spec(
        stage(
            "a",
            next=["b"],
            stream=["b"],
            holds_sessions=True,
            options={"voice": "x", "rate": 1.5, "on": False},
        ),
        stage("b", scheduler="streaming", model="echo", slots=3, options={"ids": [1, 2]}),
        name="round",
    )
    text = to_toml(s)
    assert "holds_sessions = true" in text and "[stages.options]" in text
    path = tmp_path / "round.toml"
    path.write_text(text)
    assert load_spec(str(path)) == s


def test_to_toml_refuses_values_it_cannot_write() -> None:
    s = spec(stage("a", options={"nested": {"k": 1}}))
    with pytest.raises(TypeError):
        to_toml(s)


def test_to_toml_escapes_strings(tmp_path: Path) -> None:
    s = spec(stage("a", options={"prompt": 'say "hi"\nthen \\ bye'}))
    path = tmp_path / "esc.toml"
    path.write_text(to_toml(s))
    assert load_spec(str(path)).stage("a").options["prompt"] == 'say "hi"\nthen \\ bye'
