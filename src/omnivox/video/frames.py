"""Images and video frames carried inside JSON messages: base64 PNG or JPEG -> RGB uint8 arrays.

Inside omnivox a frame is a numpy array, height x width x 3, uint8 RGB. Every decoder here checks
its input before decoding anything: the format by its magic bytes (PNG or JPEG only) and the size
from the header (``max_pixels``), so a small file that claims a huge image (a decompression bomb)
is refused without allocating it. Anything that is not such an image is ``InvalidImage``.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings

import numpy as np
from PIL import Image, UnidentifiedImageError

from omnivox.core.errors import InvalidImage

_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8\xff"
_FORMATS = {"PNG": "png", "JPEG": "jpeg", "MPO": "jpeg"}  # MPO: a JPEG with extra frames (phones)


def image_format(data: bytes) -> str:
    """``"png"`` or ``"jpeg"`` from the magic bytes; anything else is ``InvalidImage``."""
    if data.startswith(_PNG):
        return "png"
    if data.startswith(_JPEG):
        return "jpeg"
    raise InvalidImage("an image must be a PNG or a JPEG")


def decode_image(data: bytes, max_pixels: int) -> np.ndarray:
    """PNG or JPEG bytes -> RGB uint8 array (height x width x 3), at most ``max_pixels`` pixels."""
    image_format(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                if image.format not in _FORMATS:
                    raise InvalidImage(f"an image must be a PNG or a JPEG, not {image.format}")
                width, height = image.size
                if width * height > max_pixels:
                    raise InvalidImage(
                        f"image of {width}x{height} pixels exceeds the limit of {max_pixels}",
                        limit=max_pixels,
                    )
                rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except InvalidImage:
        raise
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise InvalidImage(f"the image could not be decoded: {exc}") from None
    except Image.DecompressionBombWarning as exc:
        raise InvalidImage(f"the image is too large: {exc}") from None
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.size == 0:
        raise InvalidImage(f"the image decoded to an unusable shape {rgb.shape}")
    return rgb


def decode_image_b64(text: str, max_pixels: int) -> np.ndarray:
    """Base64 (optionally a ``data:image/...;base64,`` URL) of a PNG or JPEG -> RGB uint8 array."""
    if text.startswith("data:"):
        head, _, text = text.partition(",")
        if not head.endswith(";base64"):
            raise InvalidImage("a data URL image must be base64-encoded")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidImage(f"image is not valid base64: {exc}") from None
    return decode_image(data, max_pixels)


def image_format_b64(text: str) -> str:
    """The format of a base64 image from its first bytes, without decoding the rest."""
    head = text.partition(",")[2] if text.startswith("data:") else text
    try:
        return image_format(base64.b64decode(head[:16], validate=True))
    except (binascii.Error, ValueError) as exc:
        raise InvalidImage(f"image is not valid base64: {exc}") from None


def check_image_b64(text: str, max_pixels: int) -> tuple[int, int]:
    """An image part's (width, height), read from its header only: PNG or JPEG of at most
    ``max_pixels``, else ``InvalidImage``. Cheap: the pixels are not decoded."""
    head = text.partition(",")[2] if text.startswith("data:") else text
    try:
        data = base64.b64decode(head, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidImage(f"image is not valid base64: {exc}") from None
    image_format(data)
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InvalidImage(f"the image could not be read: {exc}") from None
    if width * height > max_pixels:
        raise InvalidImage(
            f"image of {width}x{height} pixels exceeds the limit of {max_pixels}", limit=max_pixels
        )
    return width, height


def encode_jpeg(frame: np.ndarray, quality: int = 85) -> bytes:
    """An RGB uint8 frame as JPEG bytes (for recordings and tests)."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8), "RGB").save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def encode_png(frame: np.ndarray) -> bytes:
    """An RGB uint8 frame as PNG bytes."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8), "RGB").save(buf, "PNG")
    return buf.getvalue()
