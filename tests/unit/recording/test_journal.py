"""The journal's lines: each timeline event as the JSON line the recording keeps."""

from __future__ import annotations

from omnivox.protocol.timelines.reader import Marker, TurnFigures, TurnStages
from omnivox.recording.journal import describe


def test_a_turns_breakdown_is_a_stages_line_beside_its_figures() -> None:
    stages = {"decided": 0.52, "first_audio_sent": 0.81}
    assert describe(TurnStages(stages)) == {"type": "stages", "stages": stages}
    assert describe(TurnFigures({"voice_to_voice_s": 0.81})) == {
        "type": "figures",
        "values": {"voice_to_voice_s": 0.81},
        "next_turn": False,
    }
    assert describe(Marker("commit")) == {"type": "marker", "name": "commit"}
