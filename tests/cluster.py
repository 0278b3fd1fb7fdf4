"""Tests use the same process launcher as the benchmarks.

``ECHO_VOICE``: the cascade with the echo LLM and PocketSphinx, for tests of the serving machinery
(turn-taking, barge-in, errors, pages) that need to know what the reply says ("You said: ...");
``EMBEDDED_VOICE`` is the default cascade (Whisper, the local LLM), named for tests that mean it.
"""

from omnivox.testing.cluster import Cluster, cluster, free_port

ECHO_VOICE = {"OMNIVOX_LLM": "echo", "OMNIVOX_ASR": "pocketsphinx"}
EMBEDDED_VOICE = {"OMNIVOX_LLM": "local", "OMNIVOX_ASR": "whisper"}

__all__ = ["ECHO_VOICE", "EMBEDDED_VOICE", "Cluster", "cluster", "free_port"]
