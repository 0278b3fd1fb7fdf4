"""Turn-taking driven by fake heard events: what was heard in, typed actions out (no models, no I/O)."""

from __future__ import annotations

from omnivox.protocol import realtime_events as ev
from omnivox.protocol.realtime_session import TurnDetection
from omnivox.voice.listener import Heard
from omnivox.worker.realtime.turns import (
    BargeIn,
    CommitTurn,
    DropPrepared,
    Emit,
    Floor,
    Prepare,
    StopIdle,
    TurnTaking,
)

QUIET = Floor()  # the assistant is silent
TALKING = Floor(speaking=True, responding=True)
PLAYING = Floor(speaking=True, responding=False)  # its reply is done but still playing


def events(actions: list) -> list:
    return [a.event for a in actions if isinstance(a, Emit)]


def test_a_whole_turn_commits_and_replies_at_once() -> None:
    turns = TurnTaking(TurnDetection())
    started = turns.heard(Heard("speech_started", 1200.0), 10.0, QUIET)
    assert isinstance(started[0], StopIdle)
    speech = events(started)[0]
    assert isinstance(speech, ev.SpeechStarted) and speech.audio_start_ms == 1200
    assert turns.in_turn
    assert turns.heard(Heard("speech_confirmed", 1400.0), 10.2, QUIET) == []  # nobody to interrupt
    stopped = events(turns.heard(Heard("speech_stopped", 3000.0), 12.0, QUIET))[0]
    assert isinstance(stopped, ev.SpeechStopped) and stopped.item_id == speech.item_id
    # the final transcript comes 500 ms of audio after the end of speech, in a chunk that arrived at 12.6
    final = turns.heard(Heard("final", 3500.0, "  what time is it "), 12.6, QUIET)
    assert final == [CommitTurn(speech.item_id, "what time is it", respond=True, speech_end_at=12.1)]
    assert not turns.in_turn


def test_noise_makes_no_item_and_no_reply() -> None:
    turns = TurnTaking(TurnDetection())
    turns.heard(Heard("speech_started", 0.0), 0.0, QUIET)
    actions = turns.heard(Heard("final", 900.0, ""), 1.0, QUIET)
    assert isinstance(events(actions)[0], ev.Cleared) and actions[-1] == DropPrepared()
    assert not any(isinstance(a, CommitTurn) for a in actions)


def test_speech_over_the_assistant_is_a_barge_in_only_once_confirmed_and_only_if_allowed() -> None:
    turns = TurnTaking(TurnDetection())
    assert not any(isinstance(a, BargeIn) for a in turns.heard(Heard("speech_started", 0.0), 0.0, TALKING))
    assert turns.heard(Heard("speech_confirmed", 150.0), 0.2, TALKING) == [BargeIn("turn_detected")]
    assert turns.heard(Heard("speech_confirmed", 150.0), 0.2, PLAYING) == [BargeIn("turn_detected")]
    polite = TurnTaking(TurnDetection(interrupt_response=False))
    assert polite.heard(Heard("speech_confirmed", 150.0), 0.2, TALKING) == []


def test_a_pause_prepares_a_reply_and_more_speech_drops_it() -> None:
    turns = TurnTaking(TurnDetection())
    turns.heard(Heard("speech_started", 0.0), 0.0, QUIET)
    assert turns.heard(Heard("pause", 2000.0, " call my sister "), 2.0, QUIET) == [Prepare("call my sister")]
    # a pause that is not the end of the turn: the user goes on
    assert turns.heard(Heard("resumed", 2300.0), 2.3, QUIET) == [DropPrepared()]
    assert turns.in_turn  # still the same turn


def test_no_reply_is_prepared_for_silence_while_a_response_runs_or_without_create_response() -> None:
    turns = TurnTaking(TurnDetection())
    assert turns.heard(Heard("pause", 0.0, ""), 0.0, QUIET) == []
    assert turns.heard(Heard("pause", 0.0, "hi"), 0.0, TALKING) == []
    manual_reply = TurnTaking(TurnDetection(create_response=False))
    assert manual_reply.heard(Heard("pause", 0.0, "hi"), 0.0, QUIET) == []


def test_a_turn_that_ends_while_a_response_runs_is_committed_without_a_reply() -> None:
    turns = TurnTaking(TurnDetection())
    turns.heard(Heard("speech_started", 0.0), 0.0, TALKING)
    actions = turns.heard(Heard("final", 800.0, "wait"), 1.0, TALKING)
    assert isinstance(actions[0], CommitTurn) and not actions[0].respond
    assert actions[-1] == DropPrepared()


def test_transcription_deltas_send_only_what_two_partials_agree_on() -> None:
    turns = TurnTaking(TurnDetection())
    turns.heard(Heard("speech_started", 0.0), 0.0, QUIET)
    sent = []
    for partial in ["what", "what is", "what is the", "what was the", "what was the weather"]:
        sent += [e.delta for e in events(turns.heard(Heard("partial", 0.0, partial), 0.0, QUIET))]
    # "what" once two partials agree on it, then "is"; the recogniser then took "is" back: deltas
    # only append, so nothing more is sent for this item (the final transcript settles it)
    assert sent == ["what", " is"]
    again = turns.heard(Heard("partial", 0.0, "what was the weather"), 0.0, QUIET)
    assert events(again) == []


def test_deltas_append_only_and_stop_without_transcription() -> None:
    turns = TurnTaking(TurnDetection())
    turns.heard(Heard("speech_started", 0.0), 0.0, QUIET)
    deltas = []
    for partial in ["good", "good morning", "good morning to", "good morning to you"]:
        deltas += [e.delta for e in events(turns.heard(Heard("partial", 0.0, partial), 0.0, QUIET))]
    assert deltas == ["good", " morning", " to"]
    quiet = TurnTaking(TurnDetection(), transcribe=False)
    quiet.heard(Heard("speech_started", 0.0), 0.0, QUIET)
    for partial in ["a", "a b", "a b c"]:
        assert quiet.heard(Heard("partial", 0.0, partial), 0.0, QUIET) == []


def test_partials_before_speech_started_send_nothing() -> None:
    turns = TurnTaking(TurnDetection())
    assert turns.heard(Heard("partial", 0.0, "x"), 0.0, QUIET) == []
    assert turns.heard(Heard("partial", 0.0, "x y"), 0.0, QUIET) == []


def test_a_manual_commit_keeps_even_an_empty_turn_and_never_replies_by_itself() -> None:
    turns = TurnTaking(None)
    actions = turns.commit("", keep_empty=True)
    assert isinstance(actions[0], CommitTurn) and actions[0].text == "" and not actions[0].respond
    # a manual turn never started with speech_started still gets a fresh item id each time
    again = turns.commit("hello", keep_empty=True)
    assert again[0].item_id != actions[0].item_id


def test_speech_stopped_without_speech_started_still_names_an_item() -> None:
    turns = TurnTaking(TurnDetection())
    stopped = events(turns.heard(Heard("speech_stopped", 500.0), 1.0, QUIET))[0]
    committed = turns.heard(Heard("final", 1000.0, "hi"), 1.5, QUIET)[0]
    assert committed.item_id == stopped.item_id
