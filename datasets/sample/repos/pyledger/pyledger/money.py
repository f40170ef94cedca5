"""Currency amounts stored as integer minor units (cents)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

DEFAULT_CURRENCY = "USD"


class CurrencyMismatch(ValueError):
    """Raised when amounts in different currencies are combined."""


@dataclass(frozen=True)
class Money:
    cents: int
    currency: str = DEFAULT_CURRENCY

    def __post_init__(self) -> None:
        if not isinstance(self.cents, int) or isinstance(self.cents, bool):
            raise TypeError(f"cents must be an int, got {type(self.cents).__name__}")

    @classmethod
    def zero(cls, currency: str = DEFAULT_CURRENCY) -> Money:
        return cls(0, currency)

    def _check(self, other: Money) -> None:
        if not isinstance(other, Money):
            raise TypeError(f"expected Money, got {type(other).__name__}")
        if self.currency != other.currency:
            raise CurrencyMismatch(f"{self.currency} != {other.currency}")

    def __add__(self, other: Money) -> Money:
        self._check(other)
        return Money(self.cents + other.cents, self.currency)

    def __sub__(self, other: Money) -> Money:
        self._check(other)
        return Money(self.cents - other.cents, self.currency)

    def __neg__(self) -> Money:
        return Money(-self.cents, self.currency)

    def __mul__(self, factor: int) -> Money:
        if not isinstance(factor, int):
            raise TypeError("Money can only be multiplied by an int")
        return Money(self.cents * factor, self.currency)

    def is_zero(self) -> bool:
        return self.cents == 0

    def __str__(self) -> str:
        return format_amount(self)


def parse_amount(text: str, currency: str = DEFAULT_CURRENCY) -> Money:
    """Parse a decimal string such as "12.34" or "-0.5" into Money.

    Values with more than two decimals are rounded half-up to the cent.
    """
    cleaned = text.strip()
    if not cleaned:
        raise ValueError("empty amount")
    try:
        value = Decimal(cleaned)
    except InvalidOperation as exc:
        raise ValueError(f"invalid amount: {text!r}") from exc
    cents = (value * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP)
    return Money(int(cents), currency)


def format_amount(amount: Money) -> str:
    """Render Money as "-1,234.50 USD"."""
    sign = "-" if amount.cents < 0 else ""
    whole, frac = divmod(abs(amount.cents), 100)
    return f"{sign}{whole:,}.{frac:02d} {amount.currency}"
