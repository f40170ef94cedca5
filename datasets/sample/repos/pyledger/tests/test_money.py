import pytest

from pyledger.money import CurrencyMismatch, Money, format_amount, parse_amount


def test_parse_amount_basic():
    assert parse_amount("12.34") == Money(1234)
    assert parse_amount("-0.5") == Money(-50)
    assert parse_amount(" 7 ") == Money(700)


def test_parse_amount_rounds_half_up():
    assert parse_amount("0.125") == Money(13)
    assert parse_amount("19.99") == Money(1999)


@pytest.mark.parametrize("bad", ["", "  ", "abc", "1.2.3"])
def test_parse_amount_rejects_garbage(bad):
    with pytest.raises(ValueError):
        parse_amount(bad)


def test_arithmetic_and_currency_check():
    assert Money(150) + Money(50) == Money(200)
    assert Money(150) - Money(200) == Money(-50)
    assert -Money(5) == Money(-5)
    assert Money(5) * 3 == Money(15)
    with pytest.raises(CurrencyMismatch):
        Money(1, "USD") + Money(1, "EUR")


def test_money_rejects_float_cents():
    with pytest.raises(TypeError):
        Money(1.5)


def test_format_amount():
    assert format_amount(Money(123456)) == "1,234.56 USD"
    assert format_amount(Money(-5, "EUR")) == "-0.05 EUR"
