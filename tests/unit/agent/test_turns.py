"""Turn-taking driven by fake heard events: what was heard in, typed actions out (no models, no I/O)."""

from __future__ import annotations

from dataclasses import replace

from omnivox.agent.events import InputCleared, SpeechJudged, SpeechStarted, SpeechStopped
from omnivox.agent.interruption import InterruptionPolicy, Phase
from omnivox.agent.turns import (
    BargeIn,
    CommitTurn,
    DropPrepared,
    Emit,
    Floor,
    PauseReply,
    Prefill,
    Prepare,
    ResumeReply,
    StopIdle,
    TurnSettings,
    TurnTaking,
)
from omnivox.voice.asr.base import SpeechScores
from omnivox.voice.listener import Heard

QUIET = Floor()  # the assistant is silent
TALKING = Floor(speaking=True, responding=True)
PLAYING = Floor(speaking=True, responding=False)  # its reply is done but still playing


def events(actions: list) -> list:
    return [a.event for a in actions if isinstance(a, Emit)]


def acts(actions: list) -> list:
    """The actions but the emitted judgements (``judged`` reads those)."""
    return [a for a in actions if not (isinstance(a, Emit) and isinstance(a.event, SpeechJudged))]


def judged(actions: list) -> list[SpeechJudged]:
    return [e for e in events(actions) if isinstance(e, SpeechJudged)]


def test_a_whole_turn_commits_and_replies_at_once() -> None:
    turns = TurnTaking(TurnSettings())
    started = turns.heard(Heard("speech_started", 1200.0), 10.0, QUIET)
    assert isinstance(started[0], StopIdle)
    speech = events(started)[0]
    assert isinstance(speech, SpeechStarted) and speech.audio_ms == 1200
    assert turns.in_turn
    assert turns.heard(Heard("speech_confirmed", 1400.0), 10.2, QUIET) == []  # nobody to interrupt
    stopped = events(turns.heard(Heard("speech_stopped", 3000.0), 12.0, QUIET))[0]
    assert isinstance(stopped, SpeechStopped) and stopped.turn_id == speech.turn_id
    # the final transcript comes 500 ms of audio after the end of speech, in a chunk that arrived at 12.6
    final = turns.heard(Heard("final", 3500.0, "  what time is it "), 12.6, QUIET)
    assert final == [CommitTurn(speech.turn_id, "what time is it", respond=True, speech_end_at=12.1)]
    assert not turns.in_turn


def test_noise_makes_no_turn_and_no_reply() -> None:
    turns = TurnTaking(TurnSettings())
    turns.heard(Heard("speech_started", 0.0), 0.0, QUIET)
    actions = turns.heard(Heard("final", 900.0, ""), 1.0, QUIET)
    assert isinstance(events(actions)[0], InputCleared) and actions[-1] == DropPrepared()
    assert not any(isinstance(a, CommitTurn) for a in actions)


def test_without_recovery_speech_over_the_assistant_cuts_it_once_confirmed_and_only_if_allowed() -> None:
    turns = TurnTaking(TurnSettings(), policy=InterruptionPolicy(resume_ms=0))
    assert not any(isinstance(a, BargeIn) for a in turns.heard(Heard("speech_started", 0.0), 0.0, TALKING))
    assert turns.heard(Heard("speech_confirmed", 150.0), 0.2, TALKING) == [BargeIn("turn_detected")]
    turns.commit("")
    turns.heard(Heard("speech_started", 0.0), 0.0, PLAYING)
    assert turns.heard(Heard("speech_confirmed", 150.0), 0.2, PLAYING) == [BargeIn("turn_detected")]
    polite = TurnTaking(TurnSettings(interrupt_response=False))
    assert polite.heard(Heard("speech_confirmed", 150.0), 0.2, TALKING) == []


def test_speech_over_the_assistant_pauses_it_and_words_make_it_a_barge_in() -> None:
    turns = TurnTaking(TurnSettings())
    turns.heard(Heard("speech_started", 1000.0), 10.0, TALKING)
    assert turns.heard(Heard("speech_confirmed", 1150.0), 10.2, TALKING) == [PauseReply()]
    assert turns.interruption.phase is Phase.PAUSED
    # a partial that is only a backchannel so far settles nothing; words cut it
    assert turns.heard(Heard("partial", 1600.0, "yeah"), 10.6, TALKING) == []
    cut = turns.heard(Heard("partial", 2200.0, "yeah but wait"), 11.2, TALKING)
    assert acts(cut)[0] == BargeIn("turn_detected")
    # the judgement comes first, with its reason and the words it was made on
    assert judged(cut) == [SpeechJudged("words", "cut", "yeah but wait", {"voiced_ms": 0.0})]
    turns.heard(Heard("speech_stopped", 3000.0), 12.0, TALKING)
    # the reply is being cut: the turn gets its own reply although the floor still says responding
    final = turns.heard(Heard("final", 3500.0, "yeah but wait"), 12.5, TALKING)
    assert next(a for a in final if isinstance(a, CommitTurn)).respond


def test_an_early_partials_few_words_wait_visibly_and_the_settled_words_decide() -> None:
    """Whisper's first partial of a short sound is sure of wrong words ("What did that?" for a
    cough's first quarter second): it does not cut; the judgement says it waited, with its words."""
    turns = TurnTaking(TurnSettings())
    turns.heard(Heard("speech_started", 1000.0), 10.0, TALKING)  # its onset 300 ms later (padding)
    turns.heard(Heard("speech_confirmed", 1450.0), 10.2, TALKING)
    early = turns.heard(Heard("partial", 1556.0, "What did that?"), 10.3, TALKING)
    assert not any(isinstance(a, BargeIn) for a in early)
    assert [(j.verdict, j.action, j.text) for j in judged(early)] == [("words", "wait", "What did that?")]
    assert turns.interruption.phase is Phase.PAUSED and turns.interruption.verdict is None
    resumed = turns.heard(Heard("pause", 1700.0, ""), 10.5, TALKING)  # settled: no words
    assert acts(resumed) == [ResumeReply("no_words")]
    assert [(j.verdict, j.action) for j in judged(resumed)] == [("no_words", "resume")]


def test_a_cough_pauses_the_reply_and_resumes_it_with_no_turn() -> None:
    turns = TurnTaking(TurnSettings())
    turns.heard(Heard("speech_started", 1000.0), 10.0, TALKING)
    assert turns.heard(Heard("speech_confirmed", 1150.0), 10.2, TALKING) == [PauseReply()]
    resumed = turns.heard(Heard("pause", 1500.0, ""), 10.5, TALKING)
    assert acts(resumed) == [ResumeReply("no_words")]
    assert [(j.verdict, j.action) for j in judged(resumed)] == [("no_words", "resume")]
    turns.heard(Heard("speech_stopped", 1400.0), 10.9, TALKING)
    final = turns.heard(Heard("final", 1900.0, ""), 10.9, TALKING)
    assert isinstance(events(final)[0], InputCleared) and not any(isinstance(a, CommitTurn) for a in final)
    assert turns.interruption.phase is Phase.NONE


def test_a_backchannel_resumes_the_reply_and_is_kept_without_a_reply() -> None:
    turns = TurnTaking(TurnSettings())
    turns.heard(Heard("speech_started", 700.0), 10.0, TALKING)  # padded 300 ms: speech from 1000
    turns.heard(Heard("speech_confirmed", 1150.0), 10.2, TALKING)
    assert acts(turns.heard(Heard("pause", 1600.0, "Mm-hmm."), 10.6, TALKING)) == [ResumeReply("backchannel")]
    turns.heard(Heard("speech_stopped", 1450.0), 11.0, TALKING)
    final = turns.heard(Heard("final", 1950.0, "Mm-hmm."), 11.0, QUIET)  # even if the reply just ended
    commit = [a for a in final if isinstance(a, CommitTurn)]
    assert commit and commit[0].text == "Mm-hmm." and not commit[0].respond


def test_a_long_utterance_of_backchannel_words_is_a_barge_in() -> None:
    turns = TurnTaking(TurnSettings(), policy=InterruptionPolicy(backchannel_max_ms=1000))
    turns.heard(Heard("speech_started", 700.0), 10.0, TALKING)
    turns.heard(Heard("speech_confirmed", 1150.0), 10.2, TALKING)
    assert acts(turns.heard(Heard("pause", 2600.0, "okay okay okay okay"), 11.6, TALKING)) == [
        BargeIn("turn_detected")
    ]


def test_the_assistants_own_words_heard_back_resume_it_and_make_no_turn() -> None:
    turns = TurnTaking(TurnSettings())
    echo = Floor(
        speaking=True, responding=True, spoken="Once upon a time a brave little fox lived by a river."
    )
    turns.heard(Heard("speech_started", 1000.0), 10.0, echo)
    turns.heard(Heard("speech_confirmed", 1150.0), 10.2, echo)
    assert turns.heard(Heard("partial", 1800.0, "a brave little fox"), 10.8, echo) == []
    assert acts(turns.heard(Heard("pause", 2600.0, "a brave little fox lived"), 11.6, echo)) == [
        ResumeReply("echo")
    ]
    turns.heard(Heard("speech_stopped", 2450.0), 12.0, echo)
    final = turns.heard(Heard("final", 2950.0, "a brave little fox lived"), 12.0, echo)
    assert isinstance(events(final)[0], InputCleared) and not any(isinstance(a, CommitTurn) for a in final)
    # without the echo guard the same words are the user's
    unguarded = TurnTaking(TurnSettings(), policy=InterruptionPolicy(echo_words=False))
    unguarded.heard(Heard("speech_started", 1000.0), 10.0, echo)
    unguarded.heard(Heard("speech_confirmed", 1150.0), 10.2, echo)
    assert acts(unguarded.heard(Heard("pause", 2600.0, "a brave little fox lived"), 11.6, echo)) == [
        BargeIn("turn_detected")
    ]


def test_a_pause_with_nothing_settled_expires_on_the_words_so_far() -> None:
    turns = TurnTaking(TurnSettings(), policy=InterruptionPolicy(resume_ms=1500))
    turns.heard(Heard("speech_started", 1000.0), 10.0, TALKING)
    turns.heard(Heard("speech_confirmed", 1150.0), 10.2, TALKING)
    assert not turns.interruption.due(2600.0) and turns.interruption.due(2650.0)
    assert acts(turns.expire(Heard("partial", 2650.0, ""), TALKING)) == [ResumeReply("no_words")]
    assert not turns.interruption.due(4000.0)
    # the same noise going on into words pauses it again; words then cut it
    assert turns.heard(Heard("resumed", 4100.0), 14.0, TALKING) == [DropPrepared(), PauseReply()]
    assert acts(turns.expire(Heard("partial", 5600.0, "hold on"), TALKING)) == [BargeIn("turn_detected")]


def test_a_pause_prepares_a_reply_and_more_speech_drops_it() -> None:
    turns = TurnTaking(TurnSettings())
    turns.heard(Heard("speech_started", 0.0), 0.0, QUIET)
    assert turns.heard(Heard("pause", 2000.0, " call my sister "), 2.0, QUIET) == [Prepare("call my sister")]
    # a pause that is not the end of the turn: the user goes on
    # ... and the LLM goes back to the words still believed (the prepared reply's state is dropped)
    assert turns.heard(Heard("resumed", 2300.0), 2.3, QUIET) == [DropPrepared(), Prefill("call my sister")]
    assert turns.in_turn  # still the same turn


def test_no_reply_is_prepared_for_silence_while_a_response_runs_or_without_create_response() -> None:
    turns = TurnTaking(TurnSettings())
    assert turns.heard(Heard("pause", 0.0, ""), 0.0, QUIET) == []
    assert turns.heard(Heard("pause", 0.0, "hi"), 0.0, TALKING) == []
    manual_reply = TurnTaking(TurnSettings(create_response=False))
    assert manual_reply.heard(Heard("pause", 0.0, "hi"), 0.0, QUIET) == []


def test_a_turn_that_ends_while_a_response_runs_is_committed_without_a_reply() -> None:
    turns = TurnTaking(TurnSettings())
    turns.heard(Heard("speech_started", 0.0), 0.0, TALKING)
    actions = turns.heard(Heard("final", 800.0, "wait"), 1.0, TALKING)
    assert isinstance(actions[0], CommitTurn) and not actions[0].respond
    assert actions[-1] == DropPrepared()


def test_transcription_deltas_send_only_what_two_partials_agree_on() -> None:
    turns = TurnTaking(TurnSettings())
    turns.heard(Heard("speech_started", 0.0), 0.0, QUIET)
    sent = []
    for partial in ["what", "what is", "what is the", "what was the", "what was the weather"]:
        sent += [e.text for e in events(turns.heard(Heard("partial", 0.0, partial), 0.0, QUIET))]
    # "what" once two partials agree on it, then "is"; the recogniser then took "is" back: deltas
    # only append, so nothing more is sent for this turn (the final transcript settles it)
    assert sent == ["what", " is"]
    again = turns.heard(Heard("partial", 0.0, "what was the weather"), 0.0, QUIET)
    assert events(again) == []


def test_deltas_append_only_and_stop_without_transcription() -> None:
    turns = TurnTaking(TurnSettings())
    turns.heard(Heard("speech_started", 0.0), 0.0, QUIET)
    deltas = []
    for partial in ["good", "good morning", "good morning to", "good morning to you"]:
        deltas += [e.text for e in events(turns.heard(Heard("partial", 0.0, partial), 0.0, QUIET))]
    assert deltas == ["good", " morning", " to"]
    quiet = TurnTaking(TurnSettings(), transcribe=False)
    quiet.heard(Heard("speech_started", 0.0), 0.0, QUIET)
    for partial in ["a", "a b", "a b c"]:
        assert events(quiet.heard(Heard("partial", 0.0, partial), 0.0, QUIET)) == []


def test_partials_before_speech_started_send_nothing() -> None:
    turns = TurnTaking(TurnSettings())
    assert turns.heard(Heard("partial", 0.0, "x"), 0.0, QUIET) == []
    assert turns.heard(Heard("partial", 0.0, "x y"), 0.0, QUIET) == []


def test_a_manual_commit_keeps_even_an_empty_turn_and_never_replies_by_itself() -> None:
    turns = TurnTaking(None)
    actions = turns.commit("", keep_empty=True)
    assert isinstance(actions[0], CommitTurn) and actions[0].text == "" and not actions[0].respond
    # a manual turn never started with speech_started still gets a fresh turn id each time
    again = turns.commit("hello", keep_empty=True)
    assert again[0].turn_id != actions[0].turn_id


def test_speech_stopped_without_speech_started_still_names_a_turn() -> None:
    turns = TurnTaking(TurnSettings())
    stopped = events(turns.heard(Heard("speech_stopped", 500.0), 1.0, QUIET))[0]
    committed = turns.heard(Heard("final", 1000.0, "hi"), 1.5, QUIET)[0]
    assert committed.turn_id == stopped.turn_id


def test_turn_ids_are_the_adapters() -> None:
    ids = iter(["item_a", "item_b"])
    turns = TurnTaking(TurnSettings(), new_id=lambda: next(ids))
    started = events(turns.heard(Heard("speech_started", 0.0), 0.0, QUIET))[0]
    assert started.turn_id == "item_a"
    assert (
        turns.commit("hi")[0].turn_id == "item_a" and turns.commit("", keep_empty=True)[0].turn_id == "item_b"
    )


def prefills(actions: list) -> list[str]:
    return [a.text for a in actions if isinstance(a, Prefill)]


def test_the_words_so_far_are_prefilled_as_they_settle_and_rolled_back_when_the_user_goes_on() -> None:
    turns = TurnTaking(TurnSettings())
    assert prefills(turns.heard(Heard("speech_started", 0.0), 0.0, QUIET)) == [""]  # the turn's opening
    said = [
        prefills(turns.heard(Heard("partial", 0.0, p), 0.0, QUIET))
        for p in ["call", "call my sis", "call my"]
    ]
    assert said == [[], ["call my"], []]  # all but the word still being cut; nothing new, nothing again
    assert prefills(turns.heard(Heard("pause", 900.0, "call my sister"), 0.9, QUIET)) == []  # the reply's
    assert prefills(turns.heard(Heard("resumed", 1000.0), 1.0, QUIET)) == ["call my sister"]  # rolled back
    # after the pause the recogniser hears a new utterance: its words follow the ones before it
    assert prefills(turns.heard(Heard("partial", 0.0, "at home now"), 1.5, QUIET)) == [
        "call my sister at home"
    ]


def test_nothing_is_prefilled_while_a_reply_speaks_or_when_no_reply_will_come() -> None:
    speaking = TurnTaking(TurnSettings())
    assert prefills(speaking.heard(Heard("speech_started", 0.0), 0.0, TALKING)) == []
    assert prefills(speaking.heard(Heard("partial", 0.0, "wait a moment"), 0.0, TALKING)) == []
    silent = TurnTaking(TurnSettings(create_response=False))
    assert prefills(silent.heard(Heard("speech_started", 0.0), 0.0, QUIET)) == []
    manual = TurnTaking(None)
    assert prefills(manual.heard(Heard("partial", 0.0, "a b c"), 0.0, QUIET)) == []


# ---- speech as the reply plays out: the server's model has it over, the listener's player not yet

PLAYED_OUT = Floor(speaking=False, responding=False, played_out_s=0.3)  # by the model, 300 ms ago
REPORTED = Floor(speaking=False, responding=False, played_out_s=None)  # the listener said it stopped


def at_the_end(floor: Floor = PLAYED_OUT, **policy) -> TurnTaking:
    """A turn whose speech began (1000 ms, padded 300) as the reply played out and holds at 1200."""
    turns = TurnTaking(TurnSettings(), policy=InterruptionPolicy(**policy))
    turns.heard(Heard("speech_started", 700.0), 10.0, floor)
    return turns


def test_a_barge_in_as_the_reply_plays_out_cuts_it_and_its_words_are_answered() -> None:
    turns = at_the_end()
    assert turns.heard(Heard("speech_confirmed", 1200.0), 10.2, PLAYED_OUT) == [PauseReply()]
    cut = turns.heard(Heard("partial", 1700.0, "wait tell me"), 10.7, PLAYED_OUT)
    assert acts(cut)[0] == BargeIn("turn_detected")  # what its player has left stops
    turns.heard(Heard("speech_stopped", 2600.0), 11.6, QUIET)
    final = turns.heard(Heard("final", 3100.0, "wait tell me about the train"), 12.1, QUIET)
    commit = next(a for a in final if isinstance(a, CommitTurn))
    assert commit.text == "wait tell me about the train" and commit.respond


def test_a_quick_yes_as_the_reply_plays_out_is_answered_not_swallowed() -> None:
    # "... shall I book it?" "yes": a backchannel's word, but the reply is over: nothing plays on
    turns = at_the_end()
    assert turns.heard(Heard("speech_confirmed", 1200.0), 10.2, PLAYED_OUT) == [PauseReply()]
    resumed = turns.heard(Heard("pause", 1500.0, "Yes."), 10.5, PLAYED_OUT)
    assert acts(resumed)[0] == ResumeReply("backchannel")  # (nothing is left to play on)
    assert any(isinstance(a, Prepare) for a in resumed)  # its answer is prepared meanwhile
    turns.heard(Heard("speech_stopped", 1400.0), 10.9, QUIET)
    final = turns.heard(Heard("final", 1900.0, "Yes."), 10.9, QUIET)
    commit = next(a for a in final if isinstance(a, CommitTurn))
    assert commit.text == "Yes." and commit.respond
    # the same word over a reply that still plays acknowledges it: kept, not answered
    turns.heard(Heard("speech_started", 5700.0), 20.0, PLAYING)
    turns.heard(Heard("speech_confirmed", 6150.0), 20.2, PLAYING)
    turns.heard(Heard("pause", 6500.0, "Yes."), 20.5, PLAYING)
    turns.heard(Heard("speech_stopped", 6400.0), 20.9, PLAYING)
    final = turns.heard(Heard("final", 6900.0, "Yes."), 20.9, QUIET)
    assert not next(a for a in final if isinstance(a, CommitTurn)).respond


def test_an_unclear_word_as_the_reply_plays_out_is_answered() -> None:
    turns = at_the_end()
    turns.heard(Heard("speech_confirmed", 1200.0), 10.2, PLAYED_OUT)
    unsure = Heard("pause", 1500.0, "Door.", scores=SpeechScores(0.1, -0.95))
    assert acts(turns.heard(unsure, 10.5, PLAYED_OUT))[0] == ResumeReply("unclear")
    turns.heard(Heard("speech_stopped", 1400.0), 10.9, QUIET)
    final = turns.heard(Heard("final", 1900.0, "Door.", scores=SpeechScores(0.1, -0.95)), 10.9, QUIET)
    assert next(a for a in final if isinstance(a, CommitTurn)).respond


def test_the_replys_echo_tail_as_it_plays_out_is_no_barge_in_and_no_turn() -> None:
    echo = replace(PLAYED_OUT, spoken="It opens at nine on sunday morning.")
    turns = at_the_end(echo)
    assert turns.heard(Heard("speech_confirmed", 1200.0), 10.2, echo) == [PauseReply()]
    resumed = turns.heard(Heard("pause", 1600.0, "sunday morning"), 10.6, echo)
    assert acts(resumed)[0] == ResumeReply("echo")
    assert not any(isinstance(a, BargeIn) for a in resumed)
    turns.heard(Heard("speech_stopped", 1500.0), 11.0, QUIET)
    final = turns.heard(Heard("final", 2000.0, "sunday morning"), 11.0, QUIET)
    assert isinstance(events(final)[0], InputCleared) and not any(isinstance(a, CommitTurn) for a in final)


def test_a_cough_as_the_reply_plays_out_makes_no_turn() -> None:
    turns = at_the_end()
    turns.heard(Heard("speech_confirmed", 1200.0), 10.2, PLAYED_OUT)
    assert acts(turns.heard(Heard("pause", 1500.0, ""), 10.5, PLAYED_OUT)) == [ResumeReply("no_words")]
    turns.heard(Heard("speech_stopped", 1400.0), 10.9, QUIET)
    final = turns.heard(Heard("final", 1900.0, ""), 10.9, QUIET)
    assert not any(isinstance(a, CommitTurn) for a in final)


def test_speech_after_a_reporting_listeners_player_stopped_is_a_new_turn_with_no_allowance() -> None:
    turns = at_the_end(REPORTED)
    assert turns.heard(Heard("speech_confirmed", 1200.0), 10.2, REPORTED) == []  # no pause, no judge
    turns.heard(Heard("speech_stopped", 1400.0), 10.9, QUIET)
    final = turns.heard(Heard("final", 1900.0, "Yes."), 10.9, QUIET)
    commit = next(a for a in final if isinstance(a, CommitTurn))
    assert commit.respond and not judged(final)


def test_speech_that_began_well_after_the_reply_played_out_is_a_new_turn() -> None:
    late = replace(PLAYED_OUT, played_out_s=0.8)  # began 600 ms after the model's end
    turns = at_the_end(late)
    assert turns.heard(Heard("speech_confirmed", 1200.0), 10.2, late) == []
    assert turns.interruption.phase is Phase.NONE


def test_the_next_turns_opening_is_prefilled_when_a_reply_ends_unless_the_user_speaks_already() -> None:
    turns = TurnTaking(TurnSettings())
    assert prefills(turns.reply_over(PLAYING)) == [""]  # the conversation with the reply, as it renders
    turns.heard(Heard("speech_started", 0.0), 0.0, QUIET)
    turns.heard(Heard("partial", 0.0, "call my sis"), 0.0, QUIET)
    assert turns.reply_over(QUIET) == []  # a cut reply ending as they talk: their words are prefilled
    went_on = turns.heard(Heard("partial", 0.0, "call my sister now"), 0.0, QUIET)
    assert prefills(went_on) == ["call my sister"]
    assert TurnTaking(TurnSettings(create_response=False)).reply_over(QUIET) == []  # no reply will come
    assert TurnTaking(None).reply_over(QUIET) == []
    assert TurnTaking(TurnSettings()).reply_over(TALKING) == []  # another reply has the LLM


def test_unsure_words_in_a_finished_reply_s_last_lag_resume_it_and_are_answered() -> None:
    # the reply has 100 ms of what it sent left to play as modelled: "mm hmm" heard as
    # "That's it." (unsure) resumes what is left, and the words are answered as a turn
    ending = Floor(speaking=True, responding=False, played_out_s=0.0, left_s=0.1)
    turns = at_the_end(ending)
    assert turns.heard(Heard("speech_confirmed", 1200.0), 10.2, ending) == [PauseReply()]
    unsure = SpeechScores(0.64, -0.867)
    assert acts(turns.heard(Heard("pause", 1500.0, "That's it.", scores=unsure), 10.5, ending))[0] == (
        ResumeReply("unclear")
    )
    turns.heard(Heard("speech_stopped", 1400.0), 10.9, QUIET)
    final = turns.heard(Heard("final", 1900.0, "That's it.", scores=unsure), 10.9, QUIET)
    commit = next(a for a in final if isinstance(a, CommitTurn))
    assert commit.text == "That's it." and commit.respond
    # a reply still being made when the turn ends plays on, and the words are kept, not answered
    making = Floor(speaking=True, responding=True, played_out_s=None, left_s=0.1)
    late = at_the_end(making)
    late.heard(Heard("speech_confirmed", 1200.0), 10.2, making)
    assert acts(late.heard(Heard("pause", 1500.0, "That's it.", scores=unsure), 10.5, making))[0] == (
        ResumeReply("unclear")
    )
    late.heard(Heard("speech_stopped", 1400.0), 10.9, making)
    final = late.heard(Heard("final", 1900.0, "That's it.", scores=unsure), 10.9, making)
    assert not next(a for a in final if isinstance(a, CommitTurn)).respond
    # the same words with more of the reply to play cut it: over the reply, the words decide
    playing = Floor(speaking=True, responding=False, played_out_s=0.0, left_s=0.9)
    over = at_the_end(playing)
    assert over.heard(Heard("speech_confirmed", 1200.0), 10.2, playing) == [PauseReply()]
    cut = over.heard(Heard("pause", 1500.0, "That's it.", scores=unsure), 10.5, playing)
    assert acts(cut)[0] == BargeIn("turn_detected")
