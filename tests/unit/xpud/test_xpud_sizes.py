# SPDX-License-Identifier: Apache-2.0
"""xpu/sizes.py: memory sizes in binary units, compute shares in 0.1 %."""

import pytest
from xpu import sizes
from xpu.sizes import GIB, KIB, MIB, TIB


@pytest.mark.parametrize("text, expected", [
    ("512MiB", 512 * MIB),
    ("8GiB", 8 * GIB),
    ("8gib", 8 * GIB),
    ("8Gi", 8 * GIB),
    ("1.5GiB", 1536 * MIB),
    ("0.5KiB", 512),
    ("2TiB", 2 * TIB),
    ("4KiB", 4 * KIB),
    (" 3 MiB ", 3 * MIB),
    ("1048576", MIB),
    ("1048576B", MIB),
    ("0", 0),
    (4096, 4096),
])
def test_sizes_people_write(text, expected):
    assert sizes.parse_size(text) == expected


@pytest.mark.parametrize("text", ["8G", "8GB", "8gb", "512M", "512MB", "1T",
                                  "4k", "4KB"])
def test_decimal_units_are_refused_as_ambiguous(text):
    with pytest.raises(ValueError) as e:
        sizes.parse_size(text)
    msg = str(e.value)
    assert msg.startswith(f"'{text}' is ambiguous")
    number = text.rstrip("BbKkMmGgTt")
    assert f"write {number}{text[len(number)].upper()}iB" in msg


@pytest.mark.parametrize("text, message", [
    ("", "is not a size"),
    ("-1MiB", "is not a size"),
    ("MiB", "is not a size"),
    ("1,5GiB", "is not a size"),
    ("12X", "unknown unit 'X'"),
    ("1.3B", "not a whole number of bytes"),
    ("0.1KiB", "not a whole number of bytes"),
    ("17179869184TiB", "out of range"),
])
def test_bad_sizes_say_why(text, message):
    with pytest.raises(ValueError, match=message):
        sizes.parse_size(text)


@pytest.mark.parametrize("value", [True, 1.5, None, [1]])
def test_sizes_of_the_wrong_type(value):
    with pytest.raises(TypeError, match="is not a size"):
        sizes.parse_size(value)


@pytest.mark.parametrize("n, text", [
    (0, "0B"),
    (100, "100B"),
    (1023, "1023B"),
    (1025, "1025B"),
    (KIB, "1KiB"),
    (512 * MIB, "512MiB"),
    (8 * GIB, "8GiB"),
    (1536 * MIB, "1.5GiB"),
    (1280 * MIB, "1.25GiB"),
    (GIB + MIB, "1025MiB"),
    (8 * GIB - 1, "7.99GiB"),
    (TIB + 1, "1.00TiB"),
    (80 * GIB, "80GiB"),
])
def test_format_size(n, text):
    assert sizes.format_size(n) == text


@pytest.mark.parametrize("n", [MIB, 3 * MIB, 1536 * MIB, 80 * GIB, TIB])
def test_format_size_round_trips_when_exact(n):
    assert sizes.parse_size(sizes.format_size(n)) == n


@pytest.mark.parametrize("value, tenths", [
    ("25", 250), ("25%", 250), ("12.5%", 125), (" 12.5 % ", 125),
    ("0", 0), ("100", 1000), ("100.0%", 1000), ("0.1", 1),
    (25, 250), (12.5, 125), (0.1 + 0.2, 3), (100, 1000),
])
def test_shares(value, tenths):
    assert sizes.parse_share(value) == tenths


@pytest.mark.parametrize("value, message", [
    ("12.55", "finer than the 0.1 % steps"),
    (12.55, "finer than the 0.1 % steps"),
    ("101", "101% is not between 0 and 100%"),
    (-1, "is not between 0 and 100%"),
    ("-5", "is not a percentage"),
    ("half", "is not a percentage"),
    (float("nan"), "is not a percentage"),
])
def test_bad_shares(value, message):
    with pytest.raises(ValueError, match=message):
        sizes.parse_share(value)


def test_share_as_json_number_and_text():
    assert sizes.share_percent(250) == 25
    assert isinstance(sizes.share_percent(250), int)
    assert sizes.share_percent(125) == 12.5
    assert sizes.format_share(125) == "12.5%"
    assert sizes.format_share(0) == "0%"
