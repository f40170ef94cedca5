import datetime as dt

import pytest

from pyledger import Ledger, Money, Posting, UnbalancedTransaction, parse_amount
from pyledger.accounts import AccountType, Chart


def test_balances_use_natural_sign(ledger):
    assert ledger.balance("assets:bank:checking") == parse_amount("2300.00")
    assert ledger.balance("income:salary") == parse_amount("2500.00")
    assert ledger.balance("liabilities:card") == parse_amount("84.20")
    assert ledger.balance("expenses") == parse_amount("1284.20")


def test_balance_as_of_is_inclusive(ledger):
    assert ledger.balance("expenses", as_of=dt.date(2026, 1, 10)) == parse_amount("1200.00")
    assert ledger.balance("expenses", as_of=dt.date(2026, 1, 9)) == Money(0)


def test_unbalanced_transaction_is_rejected():
    book = Ledger()
    with pytest.raises(UnbalancedTransaction):
        book.record(dt.date(2026, 1, 1), "typo", [
            Posting("assets:cash", Money(100)),
            Posting("income:misc", Money(-90)),
        ])
    assert book.transactions == []


def test_transactions_are_kept_in_date_order():
    book = Ledger()
    book.transfer(dt.date(2026, 3, 1), "b", Money(1), "assets:cash", "expenses:x")
    book.transfer(dt.date(2026, 1, 1), "a", Money(1), "assets:cash", "expenses:x")
    book.transfer(dt.date(2026, 3, 1), "c", Money(1), "assets:cash", "expenses:x")
    assert [t.description for t in book.transactions] == ["a", "b", "c"]


def test_chart_infers_types_and_rejects_bad_names():
    chart = Chart()
    assert chart.open("liabilities:card").type is AccountType.LIABILITY
    assert chart.open("liabilities:card").parent == "liabilities"
    with pytest.raises(ValueError):
        chart.open("assets::cash")
    with pytest.raises(ValueError):
        chart.open("misc:thing")
