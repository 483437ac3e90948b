"""Images of every bit depth load with their values, not saturated: a 16-bit grey PNG keeps its
gradient (Pillow's own conversion turns it white), and a float image is refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from trainables.data.folder.image_folder import UnreadableImage, readable_loader


def test_a_16_bit_png_keeps_its_values(tmp_path):
    values = (np.arange(64).reshape(8, 8) * 1040).astype(np.uint16)  # 0 .. 65520
    Image.fromarray(values).save(tmp_path / "deep.png")
    assert Image.open(tmp_path / "deep.png").mode.startswith("I")
    rgb = np.asarray(readable_loader(str(tmp_path / "deep.png")))
    assert rgb.shape == (8, 8, 3) and rgb.dtype == np.uint8
    expected = np.round(values / 257).astype(np.uint8)
    assert np.abs(rgb[..., 0].astype(int) - expected).max() <= 1
    assert rgb.min() == 0 and rgb.max() == 255 and len(np.unique(rgb)) > 32  # not saturated


def test_an_8_bit_image_is_unchanged(tmp_path):
    pixels = np.random.default_rng(0).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "rgb.png")
    assert np.array_equal(np.asarray(readable_loader(str(tmp_path / "rgb.png"))), pixels)


def test_a_float_image_is_refused_naming_the_file(tmp_path):
    Image.fromarray(np.linspace(0, 3, 64, dtype=np.float32).reshape(8, 8)).save(tmp_path / "float.tif")
    with pytest.raises(UnreadableImage, match=r"float.tif: floating-point pixels \(mode F\) have no known range"):
        readable_loader(str(tmp_path / "float.tif"))
