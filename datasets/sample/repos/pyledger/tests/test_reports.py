import datetime as dt

from pyledger import Money, parse_amount
from pyledger.reports import income_statement, monthly_totals, trial_balance


def test_trial_balance_debits_equal_credits(ledger):
    rows = trial_balance(ledger)
    debits = sum((r.debit for r in rows), Money(0))
    credits = sum((r.credit for r in rows), Money(0))
    assert debits == credits
    assert [r.account for r in rows][0] == "assets:bank:checking"


def test_income_statement_period(ledger):
    report = income_statement(ledger, dt.date(2026, 1, 1), dt.date(2026, 1, 31))
    assert report.total_income == parse_amount("2500.00")
    assert report.total_expenses == parse_amount("1200.00")
    assert report.net == parse_amount("1300.00")


def test_monthly_totals(ledger):
    totals = monthly_totals(ledger, "expenses", 2026)
    assert totals[0] == parse_amount("1200.00")
    assert totals[1] == parse_amount("84.20")
    assert all(t.is_zero() for t in totals[2:])

