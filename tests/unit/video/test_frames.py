"""Images in JSON messages: PNG/JPEG only, bounded pixels checked before decoding, errors as data."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from PIL import Image

from omnivox.core.errors import InvalidImage
from omnivox.video.frames import (
    decode_image,
    decode_image_b64,
    encode_jpeg,
    encode_png,
    image_format,
    image_format_b64,
)


def picture(h: int = 24, w: int = 32) -> np.ndarray:
    img = np.zeros((h, w, 3), np.uint8)
    img[:, : w // 2, 0] = 255  # red left half
    img[:, w // 2 :, 2] = 255  # blue right half
    return img


def test_png_round_trips_exactly() -> None:
    img = picture()
    assert np.array_equal(decode_image(encode_png(img), 10_000), img)


def test_jpeg_decodes_to_rgb_close_to_the_original() -> None:
    img = picture()
    back = decode_image(encode_jpeg(img, quality=95), 10_000)
    assert back.shape == (24, 32, 3) and back.dtype == np.uint8
    assert np.abs(back.astype(int) - img.astype(int)).mean() < 10


def test_formats_from_magic_bytes() -> None:
    assert image_format(encode_png(picture())) == "png"
    assert image_format(encode_jpeg(picture())) == "jpeg"
    with pytest.raises(InvalidImage):
        image_format(b"GIF89a")
    assert image_format_b64(base64.b64encode(encode_png(picture())).decode()) == "png"


def test_base64_and_data_urls() -> None:
    data = base64.b64encode(encode_png(picture())).decode()
    assert decode_image_b64(data, 10_000).shape == (24, 32, 3)
    assert decode_image_b64("data:image/png;base64," + data, 10_000).shape == (24, 32, 3)
    with pytest.raises(InvalidImage):
        decode_image_b64("data:image/png," + data, 10_000)
    with pytest.raises(InvalidImage):
        decode_image_b64("@@@", 10_000)


def test_grey_and_alpha_images_become_rgb() -> None:
    import io

    buf = io.BytesIO()
    Image.new("LA", (8, 4), (128, 255)).save(buf, "PNG")
    assert decode_image(buf.getvalue(), 100).shape == (4, 8, 3)


def test_too_many_pixels_is_refused() -> None:
    with pytest.raises(InvalidImage, match="exceeds the limit"):
        decode_image(encode_png(picture(100, 100)), 50 * 50)


def test_a_bomb_header_is_refused_without_allocating_it() -> None:
    # a PNG that claims 100000 x 100000 pixels: refused from the header alone
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    bomb = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")
    with pytest.raises(InvalidImage):
        decode_image(bomb, 4096 * 4096)


@pytest.mark.parametrize("data", [b"\x89PNG\r\n\x1a\ngarbage", b"\xff\xd8\xff\xe0" + b"\x00" * 20, b""])
def test_undecodable_images_are_invalid(data: bytes) -> None:
    with pytest.raises(InvalidImage):
        decode_image(data, 10_000)
