"""GET /v1/voices (voices gathered from workers) and the reference-audio registry under /api/assets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from omnivox.audio.opus import encode_opus
from omnivox.audio.wav import read_wav, write_wav
from omnivox.core.config import Settings
from omnivox.core.errors import InvalidAudio, MessageTooLarge, NotFound, QuotaExceeded
from omnivox.gateway.app import create_gateway_app
from omnivox.gateway.http.assets import (
    STORED_RATE,
    RefAudioLimits,
    RefAudioStore,
    _clean_name,
    _filename_stem,
    decode_upload,
)
from omnivox.gateway.http.voices import gather_voices
from omnivox.protocol.control.workers import Capabilities, WorkerHealth, WorkerState

URL = "/api/assets/ref_audio"
MAX_BYTES = 200_000


# ---- /v1/voices


def _health(state: WorkerState, voices: list[str]) -> WorkerHealth:
    return WorkerHealth(
        state=state, engine="cascade", capabilities=Capabilities(audio_out=True), voices=voices
    )


def _voices_client(workers: list[tuple[WorkerState, list[str]]]) -> TestClient:
    """A gateway whose pool holds ``workers``, their health applied as the health loop would.

    The client is not entered, so the lifespan's health loop never runs: it would probe these
    made-up URLs and mark every worker OFFLINE.
    """
    app = create_gateway_app(Settings())
    pool = app.state.ctx.store.pool  # the in-memory store's
    for i, (state, voices) in enumerate(workers):
        worker = pool.add_worker(f"http://worker-{i}")
        reported = WorkerState.IDLE if state is WorkerState.OFFLINE else state
        pool.apply_health(worker, _health(reported, voices))
        if state is WorkerState.OFFLINE:
            pool.mark_offline(worker)
        assert worker.state is state
    return TestClient(app)


def test_voices_union_of_usable_workers_first_voice_is_default():
    client = _voices_client(
        [
            (WorkerState.IDLE, ["heart", "bella"]),
            (WorkerState.OFFLINE, ["onyx"]),  # unreachable: offers nothing
            (WorkerState.IDLE, ["heart", "emma"]),
            (WorkerState.ERROR, ["nova"]),  # its engine failed: offers nothing
        ]
    )
    resp = client.get("/v1/voices")
    assert resp.status_code == 200
    assert resp.json() == {
        "voices": [
            {"id": "heart", "default": True},
            {"id": "bella", "default": False},
            {"id": "emma", "default": False},
        ],
        "default": "heart",
    }


def test_voices_default_skips_an_offline_first_worker_and_workers_without_voices():
    client = _voices_client(
        [
            (WorkerState.OFFLINE, ["onyx", "heart"]),
            (WorkerState.IDLE, []),  # an echo engine: no TTS
            (WorkerState.IDLE, ["emma", "heart"]),
        ]
    )
    body = client.get("/v1/voices").json()
    assert body["default"] == "emma"
    assert [v["id"] for v in body["voices"]] == ["emma", "heart"]
    assert [v["default"] for v in body["voices"]] == [True, False]


def test_voices_empty_without_workers_or_voices():
    assert _voices_client([]).get("/v1/voices").json() == {"voices": [], "default": None}
    assert _voices_client([(WorkerState.IDLE, [])]).get("/v1/voices").json() == {
        "voices": [],
        "default": None,
    }
    assert gather_voices([]) == {"voices": [], "default": None}


# ---- reference audio


@pytest.fixture(scope="module")
def speech_24k() -> np.ndarray:
    """About two seconds of hibari speech at 24 kHz."""
    from omnivox.voice.tts.hibari import HibariTts

    tts = HibariTts(seed=0)
    audio = np.concatenate([c.audio for c in tts.synthesize("Hello, this is my voice.")])
    assert 1.2 < len(audio) / 24000 < 2.9  # inside the limits the client fixture sets
    return audio


def tone(seconds: float, rate: int = STORED_RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def client(data_dir: Path) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=data_dir, ref_audio_max_bytes=MAX_BYTES, ref_audio_min_s=1.0, ref_audio_max_s=3.0
    )
    # entered: the lifespan runs, and the gateway must come up with no worker at all
    with TestClient(create_gateway_app(settings)) as c:
        assert c.get("/health").json()["workers"] == 0
        yield c


def upload(client: TestClient, data: bytes, filename: str = "clip.wav", **form: str):
    return client.post(URL, files={"file": (filename, data, "audio/wav")}, data=form)


def stored_files(data_dir: Path) -> list[str]:
    folder = data_dir / "ref_audio"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []  # .tmp files too


def assert_error(resp, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.json()["detail"]["code"] == code
    assert resp.json()["detail"]["message"]


def test_ref_audio_upload_list_get_download_delete(client: TestClient, data_dir: Path, speech_24k):
    assert client.get(URL).json() == {"ref_audio": []}

    resp = upload(client, write_wav(speech_24k, 24000), "my voice.wav")
    assert resp.status_code == 201, resp.text
    ref = resp.json()
    assert set(ref) == {"id", "name", "duration_s", "sample_rate", "bytes", "created_at"}
    assert ref["id"].startswith("ref_")
    assert ref["name"] == "my voice"  # the file name, without its extension
    assert ref["sample_rate"] == 24000
    assert ref["duration_s"] == pytest.approx(len(speech_24k) / 24000, abs=1e-3)
    assert stored_files(data_dir) == [f"{ref['id']}.json", f"{ref['id']}.wav"]
    assert ref["bytes"] == (data_dir / "ref_audio" / f"{ref['id']}.wav").stat().st_size

    assert client.get(URL).json() == {"ref_audio": [ref]}
    assert client.get(f"{URL}/{ref['id']}").json() == ref

    wav = client.get(f"{URL}/{ref['id']}/audio")
    assert wav.status_code == 200 and wav.headers["content-type"] == "audio/wav"
    audio, rate = read_wav(wav.content)
    assert rate == 24000 and len(audio) == len(speech_24k)
    assert np.max(np.abs(audio - speech_24k)) < 1e-3  # 16-bit rounding only

    assert client.delete(f"{URL}/{ref['id']}").json() == {"id": ref["id"], "deleted": True}
    assert_error(client.get(f"{URL}/{ref['id']}"), 404, "not_found")
    assert client.get(URL).json() == {"ref_audio": []}
    assert stored_files(data_dir) == []


@pytest.mark.parametrize("rate", [8000, 16000, 48000])
def test_ref_audio_other_rates_are_resampled_to_24k(client: TestClient, rate: int):
    ref = upload(client, write_wav(tone(2.0, rate), rate), name="tone").json()
    assert ref["name"] == "tone" and ref["sample_rate"] == 24000
    assert ref["duration_s"] == pytest.approx(2.0, abs=0.01)
    audio, stored_rate = read_wav(client.get(f"{URL}/{ref['id']}/audio").content)
    assert stored_rate == 24000 and len(audio) == pytest.approx(48000, abs=5)


def test_ref_audio_ogg_opus_is_stored_as_wav(client: TestClient):
    resp = client.post(URL, files={"file": ("clip.ogg", encode_opus(tone(2.0, 24000)), "audio/ogg")})
    assert resp.status_code == 201, resp.text
    ref = resp.json()
    assert ref["duration_s"] == pytest.approx(2.0, abs=0.1)  # Opus pads to whole packets
    data = client.get(f"{URL}/{ref['id']}/audio").content
    assert data[:4] == b"RIFF" and read_wav(data)[1] == 24000


def test_ref_audio_listing_is_in_upload_order(client: TestClient):
    ids = [upload(client, write_wav(tone(1.5, 16000), 16000), name=f"n{i}").json()["id"] for i in range(3)]
    assert [r["id"] for r in client.get(URL).json()["ref_audio"]] == ids


def test_ref_audio_name_from_a_windows_path_filename(client: TestClient):
    ref = upload(client, write_wav(tone(1.5, 16000), 16000), "C:\\Users\\me\\take 2.wav").json()
    assert ref["name"] == "take 2"


@pytest.mark.parametrize(
    ("make", "status", "code"),
    [
        (lambda: b"this is not audio at all", 400, "invalid_audio"),
        (lambda: b"RIFF\x00\x00\x00\x00WAVEjunk", 400, "invalid_audio"),  # a broken WAV header
        (lambda: b"OggS" + bytes(200), 400, "invalid_audio"),  # damaged Ogg
        (lambda: write_wav(tone(0.5, 24000), 24000), 400, "invalid_audio"),  # too short (min 1 s)
        (lambda: write_wav(tone(4.0, 16000), 16000), 400, "invalid_audio"),  # too long (max 3 s)
        (lambda: write_wav(tone(2.0, 12345), 12345), 400, "invalid_audio"),  # a rate we do not convert
        (lambda: write_wav(tone(3.0, 48000), 48000), 413, "message_too_large"),  # Content-Length over
        (lambda: b"RIFF" + bytes(MAX_BYTES), 413, "message_too_large"),  # file over, form within slack
    ],
    ids=["not-audio", "broken-wav", "broken-ogg", "too-short", "too-long", "44k1", "huge", "just-over"],
)
def test_ref_audio_rejections(client: TestClient, data_dir: Path, make, status: int, code: str):
    assert_error(upload(client, make()), status, code)
    assert stored_files(data_dir) == []
    assert client.get(URL).json() == {"ref_audio": []}


def test_ref_audio_chunked_upload_without_length_is_cut_off(client: TestClient, data_dir: Path):
    boundary = "omnivoxtestboundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
            "Content-Type: audio/wav\r\n\r\n"
        ).encode()
        + bytes(400_000)
        + f"\r\n--{boundary}--\r\n".encode()
    )

    def chunks() -> Iterator[bytes]:  # an iterator body goes out chunked, with no Content-Length
        for i in range(0, len(body), 32768):
            yield body[i : i + 32768]

    resp = client.post(
        URL, content=chunks(), headers={"content-type": f"multipart/form-data; boundary={boundary}"}
    )
    assert "content-length" not in resp.request.headers
    assert_error(resp, 413, "message_too_large")
    assert stored_files(data_dir) == []


def test_ref_audio_bad_forms(client: TestClient):
    assert_error(client.post(URL, content=write_wav(tone(2, 16000), 16000)), 400, "unsupported_content")
    assert_error(client.post(URL, data={"name": "no file"}), 400, "unsupported_content")
    no_file = client.post(URL, files={"name": (None, "only a name")})
    assert_error(no_file, 422, "invalid_message")


@pytest.mark.parametrize("suffix", ["", "/audio"])
def test_ref_audio_unknown_id(client: TestClient, suffix: str):
    assert_error(client.get(f"{URL}/ref_0123456789abcdef{suffix}"), 404, "not_found")
    assert_error(client.get(f"{URL}/not-an-id{suffix}"), 404, "not_found")


def test_ref_audio_delete_unknown_id(client: TestClient):
    assert_error(client.delete(f"{URL}/ref_0123456789abcdef"), 404, "not_found")


@pytest.mark.parametrize(
    "ref_id",
    ["..", "%2E%2E", "..%2Fsecret", "..%2F..%2Fsecret", "ref_..%2Fsecret", "%2E%2E%5Csecret", "secret"],
)
def test_ref_audio_path_traversal_touches_nothing(client: TestClient, data_dir: Path, ref_id: str):
    # files a traversal would reach: next to the folder and one level up
    (data_dir / "ref_audio").mkdir(parents=True)
    targets = [data_dir / "secret.json", data_dir / "secret.wav", data_dir.parent / "secret.json"]
    for target in targets:
        target.write_text('{"id": "ref_0123456789abcdef"}')
    for resp in (
        client.get(f"{URL}/{ref_id}"),
        client.get(f"{URL}/{ref_id}/audio"),
        client.delete(f"{URL}/{ref_id}"),
    ):
        assert resp.status_code in (400, 404)
        assert b"ref_0123456789abcdef" not in resp.content
    assert all(t.read_text() == '{"id": "ref_0123456789abcdef"}' for t in targets)


def test_store_refuses_ids_it_could_not_have_made(tmp_path: Path):
    store = RefAudioStore(tmp_path / "ref_audio", RefAudioLimits(MAX_BYTES, 1.0, 3.0))
    (tmp_path / "x.json").write_text("{}")
    for bad in ("../x", "..", "ref_../../x", "/etc/passwd", "REF_0123456789ABCDEF"):
        with pytest.raises(NotFound):
            store.delete(bad)
        with pytest.raises(NotFound):
            store.read_audio(bad)
    assert (tmp_path / "x.json").exists()


def test_ref_audio_damaged_metadata_is_not_listed(client: TestClient, data_dir: Path):
    good = upload(client, write_wav(tone(1.5, 16000), 16000)).json()
    bad = upload(client, write_wav(tone(1.5, 16000), 16000)).json()
    (data_dir / "ref_audio" / f"{bad['id']}.json").write_text("{not json")
    assert client.get(URL).json() == {"ref_audio": [good]}
    assert_error(client.get(f"{URL}/{bad['id']}"), 404, "not_found")
    stored = json.loads((data_dir / "ref_audio" / f"{good['id']}.json").read_text())
    assert stored.pop("owner") == "address:testclient" and stored == good  # whose: kept, never answered


# ---- quotas and a disk that will not take it (issue 25, finding 9)


def _quota_app(data_dir: Path, **limits: int):
    settings = Settings(data_dir=data_dir, ref_audio_max_bytes=MAX_BYTES, ref_audio_max_s=3.0, **limits)
    return create_gateway_app(settings)


def test_uploads_are_bounded_per_client_and_in_total(data_dir: Path):
    app = _quota_app(data_dir, ref_audio_max_clips_per_client=2, ref_audio_max_clips=3)
    clip = write_wav(tone(1.5, 16000), 16000)
    one = TestClient(app, client=("10.0.0.1", 5000))
    two = TestClient(app, client=("10.0.0.2", 5000))
    first = [upload(one, clip).json() for _ in range(2)]
    assert_error(upload(one, clip), 429, "quota_exceeded")  # its share is full
    assert upload(two, clip).status_code == 201  # another client still has room
    assert_error(upload(two, clip), 429, "quota_exceeded")  # all of them together are full
    assert one.delete(f"{URL}/{first[0]['id']}").status_code == 200
    assert upload(one, clip).status_code == 201  # room again
    assert len(one.get(URL).json()["ref_audio"]) == 3 == len(stored_files(data_dir)) // 2


def test_a_full_quota_refuses_an_upload_before_reading_it(data_dir: Path):
    app = _quota_app(data_dir, ref_audio_max_clips_per_client=1)
    client = TestClient(app)
    assert upload(client, write_wav(tone(1.5, 16000), 16000)).status_code == 201
    read = 0

    def body():
        nonlocal read
        for _ in range(100):
            read += 1
            yield b"x" * 1000

    resp = client.post(URL, content=body(), headers={"content-type": "multipart/form-data; boundary=b"})
    assert_error(resp, 429, "quota_exceeded")
    assert read <= 1  # (the test client hands over the first chunk with the request)


def test_with_a_client_key_each_key_is_a_client_whatever_its_address(data_dir: Path):
    app = create_gateway_app(
        Settings(data_dir=data_dir, client_key="k1", ref_audio_max_s=3.0, ref_audio_max_clips_per_client=1)
    )
    client = TestClient(app)
    clip = write_wav(tone(1.5, 16000), 16000)
    headers = {"Authorization": "Bearer k1"}
    resp = client.post(URL, files={"file": ("c.wav", clip, "audio/wav")}, headers=headers)
    assert resp.status_code == 201
    again = client.post(URL, files={"file": ("c.wav", clip, "audio/wav")}, headers=headers)
    assert_error(again, 429, "quota_exceeded")
    owner = json.loads((data_dir / "ref_audio" / f"{resp.json()['id']}.json").read_text())["owner"]
    assert owner.startswith("key:") and "k1" not in owner  # a digest of the key, never the key


def test_a_disk_short_of_free_space_stores_nothing(data_dir: Path):
    client = TestClient(_quota_app(data_dir, ref_audio_min_free_mb=2**30))  # never enough
    assert_error(upload(client, write_wav(tone(1.5, 16000), 16000)), 507, "storage_unavailable")
    assert stored_files(data_dir) == []
    assert client.get(URL).json() == {"ref_audio": []}


def test_byte_quotas_count_the_stored_wavs(tmp_path: Path):
    clip = write_wav(tone(1.0, 24000), 24000)  # stored as it is: 48,044 bytes
    limits = RefAudioLimits(max_bytes=MAX_BYTES, min_s=0.5, max_s=3.0, max_bytes_per_owner=100_000)
    store = RefAudioStore(tmp_path / "ref_audio", limits)
    store.add(clip, owner="a")
    store.add(clip, owner="a")
    with pytest.raises(QuotaExceeded):
        store.add(clip, owner="a")
    store.add(clip, owner="b")
    total = RefAudioStore(
        tmp_path / "ref_audio", RefAudioLimits(MAX_BYTES, 0.5, 3.0, max_total_bytes=180_000)
    )
    with pytest.raises(QuotaExceeded):
        total.add(clip, owner="c")
    assert len(store.entries()) == 3


@pytest.fixture
def store(tmp_path):
    return RefAudioStore(tmp_path / "ref_audio", RefAudioLimits(max_bytes=200_000, min_s=0.5, max_s=2.0))


# ---- names


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (None, ""),
        ("", ""),
        ("  my voice  ", "my voice"),
        ("a\x00b\nc\td", "abcd"),
        ("\u200bzero width", "zero width"),
        ("x" * 150, "x" * 100),
        ("y" * 99 + " z", "y" * 99),  # cut at 100, then trimmed again
        ("caf\u00e9 \u00e0 Paris", "caf\u00e9 \u00e0 Paris"),
    ],
)
def test_clean_name(raw, clean):
    assert _clean_name(raw) == clean


@pytest.mark.parametrize(
    ("filename", "stem"),
    [
        (None, ""),
        ("", ""),
        ("voice.wav", "voice"),
        ("C:\\Users\\me\\clips\\hello.ogg", "hello"),
        ("/home/me/take 2.wav", "take 2"),
        ("archive.tar.gz", "archive.tar"),
        ("noext", "noext"),
    ],
)
def test_filename_stem(filename, stem):
    assert _filename_stem(filename) == stem


# ---- decoding


def test_a_24k_wav_decodes_as_it_is():
    audio = tone(0.5)
    decoded = decode_upload(write_wav(audio, STORED_RATE))
    assert decoded.dtype == np.float32 and len(decoded) == len(audio)
    assert np.max(np.abs(decoded - audio)) < 1e-3


def test_a_16k_wav_is_resampled_to_24k():
    decoded = decode_upload(write_wav(tone(0.5, 16000), 16000))
    assert abs(len(decoded) - STORED_RATE // 2) <= 2


@pytest.mark.parametrize("data", [b"", b"hello world", b"RIFF\x00\x00\x00\x00AVI LIST", b"ID3\x03mp3"])
def test_anything_else_is_not_audio(data):
    with pytest.raises(InvalidAudio):
        decode_upload(data)


def test_a_truncated_wav_is_not_audio():
    with pytest.raises(InvalidAudio):
        decode_upload(write_wav(tone(0.1), STORED_RATE)[:30])


# ---- the store


def test_limits_from_settings():
    limits = RefAudioLimits.from_settings(
        Settings(
            ref_audio_max_bytes=4096,
            ref_audio_min_s=0.2,
            ref_audio_max_s=5,
            ref_audio_max_clips=7,
            ref_audio_max_total_mb=3,
            ref_audio_max_clips_per_client=2,
            ref_audio_max_mb_per_client=1,
            ref_audio_min_free_mb=9,
        )
    )
    assert limits == RefAudioLimits(4096, 0.2, 5.0, 7, 3 * 2**20, 2, 2**20, 9 * 2**20)


def test_store_under_the_data_dir(tmp_path):
    s = RefAudioStore.from_settings(Settings(data_dir=tmp_path))
    assert s.root == tmp_path / "ref_audio"


def test_add_stores_a_24k_wav_and_metadata(store):
    ref = store.add(write_wav(tone(1.0, 16000), 16000), "  Greeting\n")
    assert ref.name == "Greeting" and ref.sample_rate == STORED_RATE and ref.duration_s == 1.0
    audio, rate = read_wav(store.read_audio(ref.id))
    assert rate == STORED_RATE and len(audio) == STORED_RATE
    assert ref.bytes == len(store.read_audio(ref.id))
    assert json.loads((store.root / f"{ref.id}.json").read_text())["name"] == "Greeting"
    assert store.get(ref.id) == ref and store.entries() == [ref]
    assert not list(store.root.glob("*.tmp"))


def test_a_nameless_clip_is_named_by_its_id(store):
    ref = store.add(write_wav(tone(1.0), STORED_RATE), None)
    assert ref.name == ref.id


def test_clips_too_short_or_too_long_are_refused_and_nothing_is_kept(store):
    with pytest.raises(InvalidAudio, match="at least"):
        store.add(write_wav(tone(0.25), STORED_RATE))
    with pytest.raises(InvalidAudio, match="at most"):
        store.add(write_wav(tone(3.0, 8000), 8000))
    assert store.entries() == []


def test_a_file_over_the_byte_limit_is_refused_before_decoding(store):
    with pytest.raises(MessageTooLarge):
        store.add(b"\x00" * 200_001)


def test_delete_removes_both_files_and_twice_is_not_found(store):
    ref = store.add(write_wav(tone(1.0), STORED_RATE))
    store.delete(ref.id)
    assert list(store.root.iterdir()) == [] and store.entries() == []
    with pytest.raises(NotFound):
        store.delete(ref.id)
    with pytest.raises(NotFound):
        store.read_audio(ref.id)


def test_an_entry_whose_wav_vanished_cannot_be_read(store):
    ref = store.add(write_wav(tone(1.0), STORED_RATE))
    (store.root / f"{ref.id}.wav").unlink()
    assert store.get(ref.id) == ref
    with pytest.raises(NotFound):
        store.read_audio(ref.id)


def test_an_orphan_wav_is_not_listed(store):
    store.root.mkdir(parents=True)
    (store.root / "ref_0123456789abcdef.wav").write_bytes(write_wav(tone(1.0), STORED_RATE))
    assert store.entries() == []
