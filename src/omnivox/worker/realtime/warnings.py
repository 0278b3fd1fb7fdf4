"""Settings a client asked for that this worker accepts but does not serve, said once each.

Some are never served (``protocol.realtime.session_config.unserved``: noise reduction, logprobs, tracing);
others depend on the worker's models: a transcription model or a voice it does not have, tools for
an LLM that cannot call functions. Each is logged and goes, to clients that asked for omnivox's own
events, as one ``omnivox.warning`` right after the ``session.updated`` that accepted it (which shows
what is in effect), and only the first time in the session; so do images added for an LLM that
cannot see them (after the first such item).
"""

from __future__ import annotations

from typing import Any

from omnivox.protocol.realtime import events as ev
from omnivox.protocol.realtime.session_config import SessionConfig, unserved
from omnivox.voice.models import VoiceProfile

# names that mean "whatever the server transcribes with"
_OWN_ASR = {"default", "omnivox", "", None}


def own_recogniser(model: str | None) -> bool:
    """Whether a transcription model name means the worker's own recogniser."""
    return model in _OWN_ASR


class SettingWarnings:
    def __init__(self, profile: VoiceProfile) -> None:
        self.profile = profile
        self._said: set[str] = set()

    def check(self, patch: dict[str, Any], config: SessionConfig) -> list[ev.SettingWarning]:
        """The warnings ``patch`` (applied, giving ``config``) earns that were not said before."""
        found = unserved(patch)
        transcription = config.audio.input.transcription
        if transcription is not None and not own_recogniser(transcription.model):
            found.append(
                (
                    "session.audio.input.transcription.model",
                    f"transcription model {transcription.model!r} is not served: "
                    f"omnivox's own recogniser ({self.profile.asr_name}) transcribes",
                )
            )
        asked = _asked_voice(patch)
        if asked is not None and asked not in self.profile.voices:
            found.append(
                (
                    "session.audio.output.voice",
                    f"voice {asked!r} is not served: {config.audio.output.voice!r} speaks instead",
                )
            )
        if config.tools and not self.profile.tool_calls:
            found.append(
                (
                    "session.tools",
                    f"the LLM ({self.profile.llm_name}) cannot call functions: tools are kept and never "
                    "called; serve one that can behind --llm-url",
                )
            )
        return self._unsaid(found)

    def unseen_images(self) -> ev.SettingWarning | None:
        """The LLM cannot see the images a client adds (said with the first one; None after)."""
        if self.profile.vision:
            return None
        why = (
            f"the LLM ({self.profile.llm_name}) cannot see images: they are kept in the conversation "
            "and not shown to it; serve a vision model behind --llm-url"
        )
        said = self._unsaid([("item.content", why)])
        return said[0] if said else None

    def _unsaid(self, found: list[tuple[str, str]]) -> list[ev.SettingWarning]:
        out = []
        for param, why in found:
            if param not in self._said:
                self._said.add(param)
                out.append(ev.SettingWarning(message=why, param=param))
        return out


def _asked_voice(patch: dict[str, Any]) -> str | None:
    voice = patch.get("voice")
    audio = patch.get("audio")
    if isinstance(audio, dict) and isinstance(audio.get("output"), dict):
        voice = audio["output"].get("voice", voice)
    return voice if isinstance(voice, str) else None
