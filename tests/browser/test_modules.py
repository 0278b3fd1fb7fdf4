"""The pages' pure modules (PCM, resampling, Prometheus parsing), run in Chromium as the pages run them."""

from __future__ import annotations

import base64
import struct

import pytest

from cluster import cluster

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with cluster(workers=0, log_dir=tmp_path_factory.mktemp("logs")) as c:
        yield c


@pytest.fixture
def page(gateway, open_page):
    return open_page(gateway.url + "/")


RESAMPLE = """
async ([from, to, freq, block]) => {
  const { Resampler } = await import("/static/shared/pcm.js");
  const input = Float32Array.from({ length: from }, (_, i) => Math.sin((2 * Math.PI * freq * i) / from));
  const whole = new Resampler(from, to).process(input);
  const streamed = new Resampler(from, to);
  const parts = [];
  for (let i = 0; i < input.length; i += block) parts.push(...streamed.process(input.subarray(i, i + block)));
  const middle = whole.slice(Math.floor(whole.length / 4), Math.floor((3 * whole.length) / 4));
  let crossings = 0;
  for (let i = 1; i < middle.length; i++) if (middle[i - 1] < 0 !== middle[i] < 0) crossings++;
  return {
    length: whole.length,
    maxDiff: Math.max(...parts.map((v, i) => Math.abs(v - whole[i]))),
    sameLength: parts.length === whole.length,
    peak: Math.max(...middle.map(Math.abs)),
    rms: Math.sqrt(middle.reduce((a, v) => a + v * v, 0) / middle.length),
    crossingsPerSecond: (crossings * to) / middle.length,
  };
}
"""


@pytest.mark.parametrize(("rate_in", "rate_out"), [(48000, 16000), (44100, 24000), (16000, 24000)])
def test_resampler_keeps_speech_band_tones_and_joins_blocks_seamlessly(page, rate_in, rate_out):
    got = page.evaluate(RESAMPLE, [rate_in, rate_out, 1000, 441])
    assert got["sameLength"] and got["maxDiff"] < 1e-6, got  # block boundaries change nothing
    assert abs(got["length"] - rate_out) < 0.01 * rate_out, got  # one second in, about one second out
    assert 0.97 < got["peak"] < 1.03, got
    assert abs(got["crossingsPerSecond"] - 2000) < 20, got  # still 1 kHz


def test_resampler_filters_what_the_lower_rate_cannot_hold(page):
    got = page.evaluate(RESAMPLE, [48000, 16000, 10000, 960])  # 10 kHz is above 16 kHz's Nyquist
    assert got["rms"] < 0.02, got  # instead of aliasing to 6 kHz at full strength


def test_pcm16_base64_matches_the_wire_format(page):
    samples = [0, 1, -1, 32767, -32768, 1234]
    encoded = page.evaluate(
        """async (samples) => {
          const pcm = await import("/static/shared/pcm.js");
          const b64 = pcm.pcm16ToBase64(Int16Array.from(samples));
          const floats = pcm.pcm16ToFloat(pcm.base64ToPcm16(b64));
          return { b64, back: Array.from(pcm.floatToPcm16(floats)) };
        }""",
        samples,
    )
    assert base64.b64decode(encoded["b64"]) == struct.pack("<6h", *samples)
    assert encoded["back"] == [0, 1, -1, 32766, -32767, 1234]  # the scaling omnivox.audio.pcm uses


def test_prometheus_parser_reads_the_gateway_metrics(page):
    got = page.evaluate(
        """async () => {
          const m = await import("/static/shared/prometheus.js");
          const text = await (await fetch("/metrics")).text();
          const samples = m.parseMetrics(text);
          const odd = m.parseMetrics('x_total{code="a\\\\"b",kind="c"} 2\\n# HELP y\\ny 3.5e0\\n');
          return {
            queue: m.total(samples, "omnivox_queue_length"),
            workerStates: Object.keys(m.byLabel(samples, "omnivox_workers", "state")).length,
            odd,
          };
        }"""
    )
    assert got["queue"] == 0 and got["workerStates"] == 7, got
    assert got["odd"] == [
        {"name": "x_total", "labels": {"code": 'a"b', "kind": "c"}, "value": 2},
        {"name": "y", "labels": {}, "value": 3.5},
    ]
