"""Import transactions from bank CSV exports.

The CSV must have a header row with at least ``date``, ``description`` and
``amount`` columns. An optional ``category`` column names the counter account.
Positive amounts are money coming into the imported account.
"""

from __future__ import annotations

import csv
import datetime as dt
from typing import TextIO

from .ledger import Ledger, Posting
from .money import parse_amount

REQUIRED_COLUMNS = ("date", "description", "amount")
DEFAULT_COUNTER_ACCOUNT = "expenses:uncategorized"


class CsvImportError(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def parse_date(raw: str) -> dt.date:
    return dt.date.fromisoformat(raw.strip())


def import_csv(
    ledger: Ledger,
    stream: TextIO,
    account: str,
    counter_account: str = DEFAULT_COUNTER_ACCOUNT,
) -> int:
    """Record one transaction per CSV row. Returns the number of rows imported."""
    reader = csv.DictReader(stream)
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise CsvImportError(1, f"missing columns: {', '.join(missing)}")
    count = 0
    for line, row in enumerate(reader, start=2):
        try:
            date = parse_date(row["date"])
            amount = parse_amount(row["amount"], ledger.currency)
        except ValueError as exc:
            raise CsvImportError(line, str(exc)) from exc
        counter = (row.get("category") or "").strip() or counter_account
        ledger.record(
            date,
            row["description"].strip(),
            [Posting(account, amount), Posting(counter, -amount)],
        )
        count += 1
    return count
