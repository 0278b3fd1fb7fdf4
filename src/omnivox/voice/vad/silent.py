"""Silero VAD's step on a window of digital silence, without the model call.

A caller's muted microphone, a phone line's idle code, the silence a client sends between its
turns and the input the echo gate silenced under a reply are all exact zeros, and a session hears
them for most of a call (the bench's callers: about two thirds of their windows). The model still
has to hear them: its recurrent state keeps moving through a silence (for seconds, measured), and
the next word's scores depend on where it got to, so skipping those windows, or resetting the state
after them, moves the VAD's speech starts and ends (docs/benchmarks.md, "Orchestration per session,
round 5"). But on an input of zeros everything before the recurrent cell is a constant: the STFT of
zeros is zeros, and the encoder's convolutions of zeros are a fixed vector of their biases. What is
left is one LSTM cell step and the decoder's 1x1 convolution, which this module computes in numpy
(~10 us) instead of the whole graph on onnxruntime (~120 us), from the weights in the same packaged
ONNX file. The scores and states are onnxruntime's to float rounding (within 1e-5, tested), so the
VAD hears the same thing.

The weights are read with a small reader of the ONNX protobuf (the ``onnx`` package is not a
dependency): the graph is Silero v5's (an ``If`` on the sample rate, each branch an STFT, four
convolutions, an LSTM cell and a decoder), and anything else in the file makes ``SilentStep.load``
return None, so the detector scores every window with the model as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

_FLOAT = 1  # TensorProto.FLOAT
_INT64 = 7


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one protobuf message."""
    i, n = 0, len(data)
    while i < n:
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        elif wire == 2:
            length, i = _varint(data, i)
            value, i = data[i : i + length], i + length
        else:
            raise ValueError(f"protobuf wire type {wire}")
        yield number, wire, value


def _packed(value: int | bytes, wire: int) -> list[int]:
    if isinstance(value, int):
        return [value - (1 << 64) if value >= 1 << 63 else value]
    if wire != 2:
        raise ValueError("a fixed-width value where an integer was expected")
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v - (1 << 64) if v >= 1 << 63 else v)
    return out


def _tensor(data: bytes) -> np.ndarray:
    """A TensorProto's value (float32 or int64; raw or listed data)."""
    dims: list[int] = []
    kind = _FLOAT
    raw: bytes | None = None
    floats: list[np.ndarray] = []
    ints: list[int] = []
    for number, wire, value in _fields(data):
        if number == 1:
            dims += _packed(value, wire)
        elif number == 2 and isinstance(value, int):
            kind = value
        elif number == 9:
            raw = _bytes(value)
        elif number == 4:
            floats.append(np.frombuffer(_bytes(value), "<f4"))
        elif number == 7:
            ints += _packed(value, wire)
    if kind not in (_FLOAT, _INT64):
        raise ValueError(f"tensor type {kind}")
    wire_type = np.dtype("<f4") if kind == _FLOAT else np.dtype("<i8")
    if raw is not None:
        array = np.frombuffer(raw, wire_type)
    elif kind == _FLOAT:
        array = np.concatenate(floats) if floats else np.zeros(0, wire_type)
    else:
        array = np.array(ints, np.int64)
    return array.reshape(dims).astype(np.float32 if kind == _FLOAT else np.int64)


@dataclass
class _Graph:
    constants: dict[str, np.ndarray]  # every Constant node's value and initializer, by name
    branches: list[tuple[str, _Graph]]  # the subgraphs of If nodes (then_branch, else_branch)


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError("a varint where a message was expected")
    return value


def _graph(data: bytes) -> _Graph:
    graph = _Graph({}, [])
    for number, _, value in _fields(data):
        if number == 5:  # initializer
            name = next((_bytes(v).decode() for n, _, v in _fields(_bytes(value)) if n == 8), "")
            graph.constants[name] = _tensor(_bytes(value))
        elif number == 1:  # node
            _node(_bytes(value), graph)
    return graph


def _node(data: bytes, graph: _Graph) -> None:
    op, outputs, attributes = "", [], []
    for number, _, value in _fields(data):
        if number == 2:
            outputs.append(_bytes(value).decode())
        elif number == 4:
            op = _bytes(value).decode()
        elif number == 5:
            attributes.append(_bytes(value))
    for attribute in attributes:
        name = ""
        for number, _, value in _fields(attribute):
            if number == 1:
                name = _bytes(value).decode()
            elif number == 5 and op == "Constant":  # t
                graph.constants[outputs[0]] = _tensor(_bytes(value))
            elif number == 6:  # g: a branch of an If
                graph.branches.append((name, _graph(_bytes(value))))


def _by_suffix(constants: dict[str, np.ndarray], suffix: str) -> np.ndarray:
    found = [v for k, v in constants.items() if k.endswith(suffix)]
    if len(found) != 1:
        raise KeyError(suffix)
    return found[0]


def _conv(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, stride: int) -> np.ndarray:
    """Conv1d of (channels, time) with kernel 3 and padding 1 (the encoder's)."""
    padded = np.pad(x, ((0, 0), (1, 1)))
    steps = (padded.shape[1] - 3) // stride + 1
    cols = np.stack([padded[:, t * stride : t * stride + 3] for t in range(steps)])  # (T, C, 3)
    return np.einsum("tck,ock->ot", cols, weight) + bias[:, None]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class SilentStep:
    """Silero's step on an all-zero input (context and window) at one sample rate, for streams
    stacked on the state's second axis: ``step(state) -> (probabilities, next state)``."""

    # the encoder's strides (Silero v5's four reparametrised convolutions)
    STRIDES = (1, 2, 2, 1)

    def __init__(self, constants: dict[str, np.ndarray], frames: int) -> None:
        enc = np.zeros((_by_suffix(constants, "encoder.0.reparam_conv.weight").shape[1], frames), np.float64)
        for layer, stride in enumerate(self.STRIDES):
            weight = _by_suffix(constants, f"encoder.{layer}.reparam_conv.weight").astype(np.float64)
            bias = _by_suffix(constants, f"encoder.{layer}.reparam_conv.bias").astype(np.float64)
            enc = np.maximum(_conv(enc, weight, bias, stride), 0.0)
        if enc.shape[1] != 1:
            raise ValueError(f"the encoder gives {enc.shape[1]} frames a window, not 1")
        w_ih = _by_suffix(constants, "decoder.rnn.weight_ih").astype(np.float64)
        w_hh = _by_suffix(constants, "decoder.rnn.weight_hh").astype(np.float64)
        b_ih = _by_suffix(constants, "decoder.rnn.bias_ih").astype(np.float64)
        b_hh = _by_suffix(constants, "decoder.rnn.bias_hh").astype(np.float64)
        self.hidden = w_hh.shape[1]
        # the gates' input part is the same every silent window: PyTorch's order, i f g o
        self._x = (w_ih @ enc[:, 0] + b_ih + b_hh).astype(np.float32)
        self._w_hh_t = np.ascontiguousarray(w_hh.T.astype(np.float32))  # (hidden, 4 hidden)
        self._w_out = _by_suffix(constants, "decoder.decoder.2.weight").reshape(-1).astype(np.float32)
        self._b_out = np.float32(_by_suffix(constants, "decoder.decoder.2.bias").reshape(-1)[0])

    def step(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``state`` (2, streams, hidden): h then c. Returns (probabilities (streams,), next state)."""
        n = self.hidden
        gates = state[0] @ self._w_hh_t
        gates += self._x  # (streams, 4 hidden): i f g o
        g = np.tanh(gates[:, 2 * n : 3 * n])
        np.negative(gates, out=gates)  # the sigmoid of all four (g's is not used)
        np.exp(gates, out=gates)
        gates += 1.0
        np.reciprocal(gates, out=gates)
        out = np.empty((2, len(gates), n), np.float32)
        c_next = out[1]
        np.multiply(gates[:, n : 2 * n], state[1], out=c_next)
        g *= gates[:, :n]
        c_next += g
        h_next = out[0]
        np.tanh(c_next, out=h_next)
        h_next *= gates[:, 3 * n :]
        logit = np.maximum(h_next, 0.0) @ self._w_out + self._b_out
        return (1.0 / (1.0 + np.exp(-logit))).astype(np.float32), out

    @classmethod
    def load(cls, path: str) -> dict[int, SilentStep] | None:
        """The steps of the model file at ``path`` by sample rate; None if its graph is not the
        one this was written for (every window is then scored by the model)."""
        try:
            with open(path, "rb") as f:
                data = f.read()
            model = None
            for number, _, value in _fields(data):
                if number == 7:  # ModelProto.graph
                    model = _graph(_bytes(value))
            if model is None:
                return None
            branches = dict(model.branches)
            # the top If is on sr == 16000 (its one scalar constant): then 16 kHz, else 8 kHz
            rate = int(next(v for v in model.constants.values() if v.shape == ()))
            if rate != 16000:
                return None
            # frames the encoder sees: (window + context, padded by the STFT's 64) over its hop
            steps = {}
            for sample_rate, branch, samples, filt in (
                (16000, branches["then_branch"], 512 + 64, 256),
                (8000, branches["else_branch"], 256 + 32, 128),
            ):
                hop = filt // 2
                frames = (samples + filt // 4 - filt) // hop + 1
                steps[sample_rate] = cls(_flatten(branch), frames)
            return steps
        except (KeyError, ValueError, IndexError, StopIteration, OSError):
            return None


def _flatten(graph: _Graph) -> dict[str, np.ndarray]:
    constants = dict(graph.constants)
    for _, branch in graph.branches:
        constants.update(_flatten(branch))
    return constants
