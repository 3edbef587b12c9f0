"""The reading of a key in plain math (canonical.reading / read): what the reader made of a text, visible."""

from fractions import Fraction

from galahad.flywheel.problems.canonical import Read, canonical_key, read, reading


def test_reading_shows_the_expression():
    assert reading("(5-3)*2") == "(5 - 3) × 2"
    assert reading("What is 17 mod 5?") == "17 mod 5"
    assert reading("2 - 5") == "2 - 5"
    assert reading("(-3)^2") == "(-3)^2"
    assert reading("Solve 2x = 8") == "x = 4"


def test_read_is_key_value_and_reading():
    got = read("What is (5 - 3) * 2?")
    assert isinstance(got, Read)
    assert got.key == canonical_key("What is (5 - 3) * 2?")
    assert got.value == Fraction(4)
    assert got.reading == "(5 - 3) × 2"


def test_no_key_no_reading():
    assert reading("What is the capital of France?") is None
    assert read("What is the capital of France?") is None
    assert reading("e:+(") is None


def test_a_key_reads_too():
    assert reading("e:*(12,20)") == "12 × 20"
    assert reading("q:2x-8") == "2x = 8"
