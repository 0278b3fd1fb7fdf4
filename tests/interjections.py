"""The bench's interjections over a hibari reply's echo, heard by the server's own hearing (echo gate,
silero, Whisper tiny.en) and kept as data, so that the judge's tests read the same evidence on every
machine.

Whisper's words and scores for these synthetic clips change from one CPU to another (CTranslate2
and its matrix libraries pick their kernels by the instruction set: an AMD Zen 5 and the machine the
cases were first heard on disagree in the second decimal), and several cases sit on a threshold by
design, so a live hearing cannot pin a borderline verdict. The judge's tests read
``data/interjections.json``; the live tests hear the clear-cut cases again and compare only those.

Record again after a change to the hearing (the echo gate, the input path, the recogniser):
``.venv/bin/python tests/interjections.py``.
"""

from __future__ import annotations

import functools
import json
import platform
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "interjections.json"


@dataclass(frozen=True)
class Case:
    """What the caller says over the reply: ``noise`` bursts are espeak-ng phonemes (breathy coughs)
    whichever voice is named; ``line`` g711 puts the clip and the reply's echo through a telephone
    line (8 kHz mu-law and back)."""

    voice: str
    said: str
    gain_db: float = -10.0
    noise: bool = False
    line: str = "wide"

    @property
    def key(self) -> str:
        return f"{self.line}/{self.voice}/{self.gain_db:g}/{self.said}"


CASES = [
    Case("hibari", "[[h@@]]", noise=True),
    Case("espeak", "[[hV]]", noise=True),
    Case("hibari", "mhm"),
    Case("espeak", "mm hmm"),
    Case("hibari", "okay"),
    Case("espeak", "okay"),
    Case("hibari", "mostly sunny with a light breeze"),  # the reply's own words: its echo
    Case("espeak", "a chance of rain later in the evening"),
    Case("hibari", "uh huh"),
    Case("espeak", "mhm", -6.0),
    Case("hibari", "sure"),
    Case("espeak", "mhm"),
    Case("hibari", "[[h@@ h@@ h@@]]", -20.0, noise=True),
    Case("hibari", "[[h@@ h@@]]", noise=True),
    Case("espeak", "[[h@@ h@@]]", noise=True),
    Case("espeak", "wait", -6.0),
    Case("hibari", "what about tomorrow"),
    Case("espeak", "sorry, what was that"),
    Case("hibari", "i see", -6.0),
    Case("hibari", "okay", line="g711"),
    Case("espeak", "yeah", line="g711"),
    Case("hibari", "[[h@@]]", noise=True, line="g711"),
    Case("hibari", "mm hmm", line="g711"),
    Case("hibari", "uh huh", line="g711"),
    Case("espeak", "mhm", line="g711"),
    Case("hibari", "sure", line="g711"),
    Case("hibari", "hold on", line="g711"),
    Case("espeak", "what about tomorrow", line="g711"),
    Case("espeak", "sorry, what was that", line="g711"),
]


class Hearer:
    """The server's hearing and the bench's voices, loaded once: hears a case live."""

    def __init__(self) -> None:
        from omnivox.bench.interruptions import REPLY, Hearing, telephone
        from omnivox.bench.turns import synthetic_voices, trim

        self._hearing, self._voices, self._trim, self._telephone = (
            Hearing(),
            synthetic_voices(),
            trim,
            telephone,
        )
        self._reply = trim(self._voices["hibari"](REPLY))
        self._phone_echo = telephone(self._reply)

    def hear(self, case: Case) -> Any:
        from omnivox.bench.interruptions import Observation, hear_case

        clip = self._trim(self._voices["espeak" if case.noise else case.voice](case.said))
        echo = None
        if case.line == "g711":
            clip, echo = self._telephone(clip), self._phone_echo
        paused, points = hear_case(self._hearing, self._reply, clip, gain_db=case.gain_db, echo=echo)
        return Observation("case", case.voice, case.said, case.gain_db, paused, points)


@functools.cache
def _recorded() -> dict[str, Any]:
    from omnivox.bench.interruptions import Observation, Settled

    with DATA.open() as f:
        saved = json.load(f)["cases"]
    return {
        key: Observation(**{**o, "points": [Settled(**p) for p in o["points"]]}) for key, o in saved.items()
    }


def recorded(case: Case) -> Any:
    """The case as it was heard when the data was recorded (a KeyError: record again)."""
    return _recorded()[case.key]


def recorded_keys() -> set[str]:
    return set(_recorded())


def record() -> None:
    import ctranslate2

    hearer = Hearer()
    cases = {}
    for case in CASES:
        cases[case.key] = asdict(hearer.hear(case))
        print(case.key, [p["text"] for p in cases[case.key]["points"]], flush=True)
    machine = {
        "cpu": _cpu(),
        "ctranslate2": ctranslate2.__version__,
        "python": platform.python_version(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps({"recorded_on": machine, "cases": cases}, indent=1) + "\n")


def _cpu() -> str:
    """The CPU's name, family and model, and its widest vector instructions (what the kernels depend on)."""
    try:
        info = dict(
            line.split(":", 1) for line in Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines()
        )
    except (OSError, ValueError):
        return platform.processor() or platform.machine()
    info = {k.strip(): v.strip() for k, v in info.items()}
    flags = info.get("flags", "").split()
    isa = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"
    family, model = info.get("cpu family", "?"), info.get("model", "?")
    return f"{info.get('model name', '?')}, family {family} model {model}, {isa}"


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    record()
