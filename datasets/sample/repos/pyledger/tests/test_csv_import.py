import datetime as dt
import io

import pytest

from pyledger import Ledger, parse_amount
from pyledger.csv_import import CsvImportError, import_csv

CSV = """date,description,amount,category
2026-01-04,Coffee,-3.50,expenses:coffee
2026-01-05,Refund,12.00,
2026-01-06,Paycheck,1500.00,income:salary
"""


def test_import_csv_records_each_row():
    ledger = Ledger()
    count = import_csv(ledger, io.StringIO(CSV), "assets:bank:checking")
    assert count == 3
    assert ledger.balance("assets:bank:checking") == parse_amount("1508.50")
    assert ledger.balance("expenses:coffee") == parse_amount("3.50")
    assert ledger.balance("expenses:uncategorized") == parse_amount("-12.00")
    assert ledger.transactions[0].date == dt.date(2026, 1, 4)


def test_import_csv_reports_line_numbers():
    bad = "date,description,amount\n2026-01-04,ok,1.00\n2026-13-01,bad date,2.00\n"
    with pytest.raises(CsvImportError) as info:
        import_csv(Ledger(), io.StringIO(bad), "assets:bank")
    assert info.value.line == 3


def test_import_csv_requires_columns():
    with pytest.raises(CsvImportError, match="missing columns: amount"):
        import_csv(Ledger(), io.StringIO("date,description\n"), "assets:bank")
