"""Reports built on top of a Ledger."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from .accounts import AccountType
from .ledger import Ledger
from .money import Money


@dataclass(frozen=True)
class TrialBalanceRow:
    account: str
    debit: Money
    credit: Money


@dataclass(frozen=True)
class IncomeStatement:
    start: dt.date
    end: dt.date
    currency: str
    income: dict[str, Money]
    expenses: dict[str, Money]

    @property
    def total_income(self) -> Money:
        return sum(self.income.values(), Money.zero(self.currency))

    @property
    def total_expenses(self) -> Money:
        return sum(self.expenses.values(), Money.zero(self.currency))

    @property
    def net(self) -> Money:
        return self.total_income - self.total_expenses


def trial_balance(ledger: Ledger, as_of: dt.date | None = None) -> list[TrialBalanceRow]:
    """One row per account with a non-zero balance, debits and credits separated."""
    zero = Money.zero(ledger.currency)
    rows = []
    for account in ledger.chart:
        total = zero
        for _, posting in ledger.postings(end=as_of):
            if posting.account == account.name:
                total = total + posting.amount
        if total.is_zero():
            continue
        if total.cents > 0:
            rows.append(TrialBalanceRow(account.name, total, zero))
        else:
            rows.append(TrialBalanceRow(account.name, zero, -total))
    return rows


def income_statement(ledger: Ledger, start: dt.date, end: dt.date) -> IncomeStatement:
    """Income and expenses for the period from `start` to `end`, both inclusive."""
    if end < start:
        raise ValueError("end must not be before start")
    income: dict[str, Money] = {}
    expenses: dict[str, Money] = {}
    zero = Money.zero(ledger.currency)
    for _, posting in ledger.postings(start=start, end=end):
        kind = ledger.chart.type_of(posting.account)
        if kind is AccountType.INCOME:
            income[posting.account] = income.get(posting.account, zero) - posting.amount
        elif kind is AccountType.EXPENSE:
            expenses[posting.account] = expenses.get(posting.account, zero) + posting.amount
    return IncomeStatement(start, end, ledger.currency, income, expenses)


def monthly_totals(ledger: Ledger, account: str, year: int) -> list[Money]:
    """Net postings to `account` for each month of `year` (index 0 = January)."""
    totals = [Money.zero(ledger.currency) for _ in range(12)]
    start, end = dt.date(year, 1, 1), dt.date(year, 12, 31)
    for txn, posting in ledger.postings(account, start=start, end=end):
        totals[txn.date.month - 1] = totals[txn.date.month - 1] + posting.amount
    return totals

