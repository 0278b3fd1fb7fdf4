"""Pipeline specs: validation of the graph and the plans it gives requests."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from omnivox.core.errors import InvalidMessage
from omnivox.pipeline.spec import PipelineSpec, load_spec, shipped_specs


def spec(*stages: dict) -> PipelineSpec:
    return PipelineSpec.model_validate({"name": "t", "stages": list(stages)})


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
