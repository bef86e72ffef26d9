"""The pipeline driver's C++ (:mod:`gpurtl.sim.backends.fast.driver`): the package data template
with its six generated fields gives, byte for byte, the text the generator gave when the C++ was
a Python string (so the models built from either are the same and keep their cache keys)."""

import hashlib

import pytest

from gpurtl.sim.backends.fast import driver

#: sha256 of ``driver_source(*arguments)`` from the former generator.
SHA256 = {
    ("fp32_add", 65, 32, 1): "6889bde291c98444e21a94a82985ecff312612a1faf916446323b81f12dd83eb",
    ("ray_accel", 2100, 600, 2): "a2821fbae6246c178169ba870001a5a6130d9e6053434518f74f405762edc34b",
    ("x", 40, 70, 1): "cc7e9efba08f77b2a888cf8af7c26c60cd2d6a3fae8b513ebb0925be076c83a4",
}


@pytest.mark.parametrize("arguments", sorted(SHA256))
def test_the_template_gives_the_former_text(arguments):
    text = driver.driver_source(*arguments)
    assert "@" not in text.replace("always @", "")  # every field filled
    assert hashlib.sha256(text.encode()).hexdigest() == SHA256[arguments]


def test_a_wide_payload_is_set_word_by_word_and_masked():
    text = driver.driver_source("t", 70, 33, 2)
    assert "top->i___05Fpayload[2] = in_row[2] & 0x3fu;" in text  # 70 bits: 6 in the last word
    assert (
        "static const int IN_WORDS = 3;" in text and "static const bool ONE_EVAL = false;" in text
    )
    with pytest.raises(ValueError, match="`evals`"):
        driver.driver_source("t", 70, 33, 3)
