"""Double-entry ledger: transactions made of balanced postings."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .accounts import DEBIT_NORMAL, Chart
from .money import DEFAULT_CURRENCY, CurrencyMismatch, Money


class UnbalancedTransaction(ValueError):
    """Raised when the postings of a transaction do not sum to zero."""


@dataclass(frozen=True)
class Posting:
    account: str
    amount: Money  # positive = debit, negative = credit


@dataclass
class Transaction:
    date: dt.date
    description: str
    postings: list[Posting]

    def total(self) -> Money:
        total = Money.zero(self.postings[0].amount.currency)
        for posting in self.postings:
            total = total + posting.amount
        return total

    def is_balanced(self) -> bool:
        return self.total().is_zero()


def _in_account(name: str, account: str) -> bool:
    return name == account or name.startswith(account + ":")


class Ledger:
    def __init__(self, chart: Chart | None = None, currency: str = DEFAULT_CURRENCY) -> None:
        self.chart = chart if chart is not None else Chart()
        self.currency = currency
        self.transactions: list[Transaction] = []

    def record(
        self, date: dt.date, description: str, postings: Iterable[Posting]
    ) -> Transaction:
        """Validate and store a transaction, opening unknown accounts on the fly."""
        postings = list(postings)
        if len(postings) < 2:
            raise UnbalancedTransaction("a transaction needs at least two postings")
        for posting in postings:
            if posting.amount.currency != self.currency:
                raise CurrencyMismatch(
                    f"{posting.account}: {posting.amount.currency} != {self.currency}"
                )
            if posting.account not in self.chart:
                self.chart.open(posting.account)
        txn = Transaction(date, description, postings)
        if not txn.is_balanced():
            raise UnbalancedTransaction(f"{description!r} is off by {txn.total()}")
        # Keep transactions ordered by date; same-day entries stay in insertion order.
        index = len(self.transactions)
        while index > 0 and self.transactions[index - 1].date > date:
            index -= 1
        self.transactions.insert(index, txn)
        return txn

    def transfer(
        self, date: dt.date, description: str, amount: Money, source: str, destination: str
    ) -> Transaction:
        """Move `amount` from `source` (credited) to `destination` (debited)."""
        return self.record(
            date, description, [Posting(destination, amount), Posting(source, -amount)]
        )

    def postings(
        self,
        account: str | None = None,
        start: dt.date | None = None,
        end: dt.date | None = None,
    ) -> Iterator[tuple[Transaction, Posting]]:
        """Postings to `account` (and its sub-accounts) dated start..end inclusive."""
        for txn in self.transactions:
            if start is not None and txn.date < start:
                continue
            if end is not None and txn.date > end:
                break
            for posting in txn.postings:
                if account is None or _in_account(posting.account, account):
                    yield txn, posting

    def raw_balance(self, account: str, as_of: dt.date | None = None) -> Money:
        """Sum of debits minus credits for `account` up to and including `as_of`."""
        total = Money.zero(self.currency)
        for _, posting in self.postings(account, end=as_of):
            total = total + posting.amount
        return total

    def balance(self, account: str, as_of: dt.date | None = None) -> Money:
        """Balance with the account's natural sign (credit-normal accounts flipped)."""
        raw = self.raw_balance(account, as_of)
        if self.chart.type_of(account) in DEBIT_NORMAL:
            return raw
        return -raw
