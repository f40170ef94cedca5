"""Chart of accounts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum


class AccountType(str, Enum):
    ASSET = "asset"
    LIABILITY = "liability"
    EQUITY = "equity"
    INCOME = "income"
    EXPENSE = "expense"


# Accounts whose balance grows with debits; all others grow with credits.
DEBIT_NORMAL = frozenset({AccountType.ASSET, AccountType.EXPENSE})

_PREFIXES = {
    "assets": AccountType.ASSET,
    "liabilities": AccountType.LIABILITY,
    "equity": AccountType.EQUITY,
    "income": AccountType.INCOME,
    "expenses": AccountType.EXPENSE,
}


class UnknownAccount(KeyError):
    """Raised when an account name is not in the chart."""


def infer_type(name: str) -> AccountType:
    """Derive the account type from the first segment of its name."""
    head = name.split(":", 1)[0]
    try:
        return _PREFIXES[head]
    except KeyError:
        raise ValueError(
            f"cannot infer account type for {name!r}; expected one of {sorted(_PREFIXES)}"
        ) from None


@dataclass(frozen=True)
class Account:
    name: str
    type: AccountType

    @property
    def parent(self) -> str | None:
        head, sep, _ = self.name.rpartition(":")
        return head if sep else None

    @property
    def is_debit_normal(self) -> bool:
        return self.type in DEBIT_NORMAL


class Chart:
    """The set of accounts a ledger knows about."""

    def __init__(self) -> None:
        self._accounts: dict[str, Account] = {}

    def open(self, name: str, type: AccountType | None = None) -> Account:
        if not name or name.startswith(":") or name.endswith(":") or "::" in name:
            raise ValueError(f"invalid account name: {name!r}")
        existing = self._accounts.get(name)
        account_type = type or infer_type(name)
        if existing is not None:
            if existing.type != account_type:
                raise ValueError(f"{name} is already open as {existing.type.value}")
            return existing
        account = Account(name, account_type)
        self._accounts[name] = account
        return account

    def get(self, name: str) -> Account:
        try:
            return self._accounts[name]
        except KeyError:
            raise UnknownAccount(name) from None

    def type_of(self, name: str) -> AccountType:
        """Type of an open account, or the inferred type of a parent path."""
        account = self._accounts.get(name)
        return account.type if account is not None else infer_type(name)

    def __contains__(self, name: object) -> bool:
        return name in self._accounts

    def __iter__(self) -> Iterator[Account]:
        return iter(sorted(self._accounts.values(), key=lambda a: a.name))
