import datetime as dt

import pytest

from pyledger import Ledger, parse_amount


@pytest.fixture
def ledger() -> Ledger:
    book = Ledger()
    book.transfer(dt.date(2026, 1, 1), "Opening balance", parse_amount("1000.00"),
                  "equity:opening", "assets:bank:checking")
    book.transfer(dt.date(2026, 1, 3), "Salary", parse_amount("2500.00"),
                  "income:salary", "assets:bank:checking")
    book.transfer(dt.date(2026, 1, 10), "Rent", parse_amount("1200.00"),
                  "assets:bank:checking", "expenses:rent")
    book.transfer(dt.date(2026, 2, 2), "Groceries", parse_amount("84.20"),
                  "liabilities:card", "expenses:groceries")
    return book
