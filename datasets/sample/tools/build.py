#!/usr/bin/env python3
"""Generate and verify the Lightsout sample dataset (datasets/sample).

Usage, from the repository root:

    python3 datasets/sample/tools/build.py [--no-tests]

Inputs: the hand-written base trees in repos/ and TASKS below. A task's
"edits" are exact string edits (replace/append/create) against its base tree;
the diff is produced by `git diff`. Line numbers are never written by hand:
bugs, comments and findings carry an "anchor" (path, substring) that must occur
exactly once in the post-PR file and resolves to the line where it starts.
Comments: "reply_to" makes a reply (same location), "substantive"/"severity"
feed the annotation; "substantive_override" replaces the substantive list
(every task has an annotation file, as the benchmark's harness requires). "related" are the extra files of
config_C. Outputs: README.md, crbugbench.jsonl, swe-prbench/**, scripted.json.
Python 3.10+, standard library only; needs git >= 2.28.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPOS = {
    "pyledger": {
        "name": "lightsout-samples/pyledger",
        "image": "python:3.12-slim",
        "language": "python",
    },
    "tinyq": {
        "name": "lightsout-samples/tinyq",
        "image": "node:22-slim",
        "language": "typescript",
    },
}


def replace(path, old, new):
    return ("replace", path, old, new)


def append(path, text):
    return ("append", path, text)


def create(path, text):
    return ("create", path, text)


TASKS = []

# --- pyledger

TASKS.append({
    "task_id": "pyledger-001",
    "repo": "pyledger",
    "pr_number": 41,
    "track": "pre-merge",
    "difficulty": "Type1_Direct",
    "pr_type": "bugfix",
    "title": "Accept bank-export amount formats in CSV import",
    "description": (
        "Several of the banks we import from export amounts as \"$1,234.56\", use "
        "parentheses for money going out, or put the direction in a DR/CR suffix, and "
        "import_csv currently rejects all of those rows. This adds a parse_bank_amount "
        "helper to csv_import that strips currency symbols and thousands separators and "
        "understands both sign conventions, and uses it for the amount column. Plain "
        "decimal amounts keep working as before."
    ),
    "edits": [
        replace("pyledger/csv_import.py",
                "from .money import parse_amount\n",
                "from .money import Money\n"),
        replace("pyledger/csv_import.py",
                'DEFAULT_COUNTER_ACCOUNT = "expenses:uncategorized"\n',
                'DEFAULT_COUNTER_ACCOUNT = "expenses:uncategorized"\n'
                '_CURRENCY_SYMBOLS = "$\u20ac\u00a3"\n'),
        replace("pyledger/csv_import.py",
                "    return dt.date.fromisoformat(raw.strip())\n",
                '''    return dt.date.fromisoformat(raw.strip())


def parse_bank_amount(raw: str, currency: str) -> Money:
    """Parse "1,234.56", "$-12.00", "(12.00)" or "12.00 DR"; ( ) and DR mean money out."""
    text = raw.strip().upper()
    negative = False
    if text.startswith("(") and text.endswith(")"):
        negative, text = True, text[1:-1].strip()
    elif text.endswith(" DR"):
        negative, text = True, text[:-3].strip()
    elif text.endswith(" CR"):
        text = text[:-3].strip()
    text = text.lstrip(_CURRENCY_SYMBOLS).replace(",", "")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"invalid amount: {raw!r}") from None
    cents = int(value * 100)
    return Money(-cents if negative else cents, currency)
'''),
        replace("pyledger/csv_import.py",
                'amount = parse_amount(row["amount"], ledger.currency)',
                'amount = parse_bank_amount(row["amount"], ledger.currency)'),
        replace("tests/test_csv_import.py",
                "from pyledger.csv_import import CsvImportError, import_csv\n",
                "from pyledger.csv_import import CsvImportError, import_csv, parse_bank_amount\n"),
        append("tests/test_csv_import.py", '''

@pytest.mark.parametrize("raw, expected", [
    ("$1,234.50", "1234.50"),
    ("(12.00)", "-12.00"),
    ("12.00 DR", "-12.00"),
    ("7.25 cr", "7.25"),
])
def test_parse_bank_amount(raw, expected):
    assert parse_bank_amount(raw, "USD") == parse_amount(expected)
'''),
    ],
    "bugs": [{
        "description": (
            "parse_bank_amount converts the amount through a binary float and truncates with "
            "int(value * 100), so values that are not exactly representable lose a cent "
            "(\"19.99\" becomes 1998 cents, \"0.29\" becomes 28). Previously amounts went through "
            "Decimal with half-up rounding; the cleaned string should be parsed with Decimal "
            "(e.g. via parse_amount) instead."
        ),
        "anchor": ("pyledger/csv_import.py", "cents = int(value * 100)"),
    }],
    "comments": [
        {"id": 1, "author": "mkowalski",
         "body": ("`int(value * 100)` truncates, and `19.99 * 100` is `1998.9999999999998` in binary "
                  "floating point, so this books 19.98. Can we strip the symbols/separators and then "
                  "hand the string to `money.parse_amount` so we keep the Decimal rounding?"),
         "anchor": ("pyledger/csv_import.py", "cents = int(value * 100)"),
         "substantive": True, "severity": "P1"},
        {"id": 2, "author": "jlin", "reply_to": 1,
         "body": "Ouch, good catch. Switching to parse_amount after normalising the text."},
        {"id": 3, "author": "mkowalski",
         "body": "nit: this could live in money.py next to DEFAULT_CURRENCY if we ever want it for display too.",
         "anchor": ("pyledger/csv_import.py", "_CURRENCY_SYMBOLS = ")},
        {"id": 4, "author": "priya-s",
         "body": "Do any of our banks actually emit a lowercase `dr`? The `.upper()` handles it, just checking that's intentional.",
         "anchor": ("pyledger/csv_import.py", 'elif text.endswith(" DR"):')},
    ],
    "related": ["pyledger/money.py"],
    "findings": [
        {"id": "f1", "severity": "P1", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("pyledger/csv_import.py", "cents = int(value * 100)"),
         "body": ("Converting with float() and then int(value * 100) truncates binary rounding error: "
                  "'19.99' yields 1998 cents and '0.29' yields 28. Parse the cleaned string with Decimal "
                  "and quantize (or call parse_amount) instead.")},
        {"id": "f2", "severity": "P1", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("pyledger/csv_import.py", 'amount = parse_bank_amount(row["amount"], ledger.currency)'),
         "body": ("Precision regression for every import: plain amounts used to go through Decimal with "
                  "ROUND_HALF_UP, but now all rows take the float path, so imported balances drift by a "
                  "cent on many ordinary values.")},
        {"id": "f3", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("pyledger/csv_import.py", "value = float(text)"),
         "body": ("float() also accepts 'inf', 'nan' and exponents like '1e3'. 'inf' makes int() raise "
                  "OverflowError, which import_csv does not catch, so such a row escapes without a "
                  "CsvImportError line number.")},
        {"id": "f4", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("pyledger/csv_import.py", "text = text.lstrip(_CURRENCY_SYMBOLS)"),
         "body": ("A minus sign before the currency symbol ('-$12.00') is rejected, because lstrip only "
                  "removes symbols at the very start of the string.")},
        {"id": "f5", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("pyledger/csv_import.py", "def parse_bank_amount("),
         "body": "nit: the docstring could say that the returned sign follows the ledger convention (positive = money in)."},
        {"id": "f6", "severity": "P1", "identifies": [], "matches_comments": [], "fabricated": True,
         "anchor": ("pyledger/csv_import.py", "negative, text = True, text[1:-1].strip()"),
         "body": ("The parenthesised branch strips the parentheses but never sets `negative`, so '(12.00)' "
                  "is imported as a deposit instead of a withdrawal.")},
    ],
})

TASKS.append({
    "task_id": "pyledger-002",
    "repo": "pyledger",
    "pr_number": 44,
    "track": "post-merge",
    "difficulty": "Type1_Direct",
    "pr_type": "feature",
    "title": "Add tags to transactions",
    "description": (
        "Adds free-form tags to transactions so imports and reports can be filtered, e.g. "
        "everything tagged \"reimbursable\". Ledger.record accepts an optional tags list, "
        "Ledger.tag() attaches a tag to an already recorded transaction, and Ledger.tagged() "
        "returns the transactions carrying a tag. Existing callers are unaffected since the "
        "new argument is optional."
    ),
    "edits": [
        replace("pyledger/ledger.py",
                "from dataclasses import dataclass\n",
                "from dataclasses import dataclass, field\n"),
        replace("pyledger/ledger.py",
                "    postings: list[Posting]\n\n    def total",
                "    postings: list[Posting]\n    tags: list[str] = field(default_factory=list)\n\n    def total"),
        replace("pyledger/ledger.py",
                "    def record(\n"
                "        self, date: dt.date, description: str, postings: Iterable[Posting]\n"
                "    ) -> Transaction:\n",
                "    def record(\n"
                "        self,\n"
                "        date: dt.date,\n"
                "        description: str,\n"
                "        postings: Iterable[Posting],\n"
                "        tags: list[str] = [],\n"
                "    ) -> Transaction:\n"),
        replace("pyledger/ledger.py",
                "        txn = Transaction(date, description, postings)\n",
                "        txn = Transaction(date, description, postings, tags)\n"),
        replace("pyledger/ledger.py",
                "    def transfer(\n",
                '''    def tag(self, txn: Transaction, tag: str) -> None:
        """Attach `tag` to a recorded transaction (no-op if it is already there)."""
        if tag not in txn.tags:
            txn.tags.append(tag)

    def tagged(self, tag: str) -> list[Transaction]:
        return [txn for txn in self.transactions if tag in txn.tags]

    def transfer(
'''),
        append("tests/test_ledger.py", '''

def test_tags():
    book = Ledger()
    txn = book.transfer(dt.date(2026, 1, 2), "Taxi", Money(2300), "assets:cash", "expenses:travel")
    book.tag(txn, "reimbursable")
    book.tag(txn, "reimbursable")
    assert txn.tags == ["reimbursable"]
    assert book.tagged("reimbursable") == [txn]
'''),
    ],
    "bugs": [{
        "description": (
            "Ledger.record declares a mutable default argument `tags: list[str] = []` and stores that "
            "list object directly on the Transaction. Every transaction recorded without explicit tags "
            "(including all transfer() calls) shares the same list, and Ledger.tag() appends to it in "
            "place, so tagging one untagged transaction tags all of them."
        ),
        "anchor": ("pyledger/ledger.py", "tags: list[str] = [],"),
    }],
    "comments": [
        {"id": 1, "author": "priya-s",
         "body": "Should tags be a set? Order doesn't seem meaningful and `tag()` has to dedupe by hand.",
         "anchor": ("pyledger/ledger.py", "tags: list[str] = field(default_factory=list)")},
        {"id": 2, "author": "mkowalski",
         "body": ("Mutable default here, and the list is stored on the Transaction as-is, so `tag()` on one "
                  "untagged transaction appends to the list every other untagged transaction shares. "
                  "`tags: Iterable[str] = ()` plus `list(tags)` avoids it."),
         "anchor": ("pyledger/ledger.py", "tags: list[str] = [],"),
         "substantive": True, "severity": "P1"},
        {"id": 3, "author": "mkowalski",
         "body": "nit: `tagged` is the only public method without a docstring.",
         "anchor": ("pyledger/ledger.py", "def tagged(self, tag: str)")},
    ],
    "related": ["pyledger/csv_import.py"],
    "findings": [
        {"id": "f1", "severity": "P1", "identifies": ["b0"], "matches_comments": [2],
         "anchor": ("pyledger/ledger.py", "tags: list[str] = [],"),
         "body": ("`tags=[]` is evaluated once, and that same list is handed to every Transaction created "
                  "without tags. Because tag() mutates it in place, tagging one transfer makes every other "
                  "untagged transaction report the tag as well.")},
        {"id": "f2", "severity": "P1", "identifies": ["b0"], "matches_comments": [2],
         "anchor": ("pyledger/ledger.py", "txn = Transaction(date, description, postings, tags)"),
         "body": ("record() passes the caller's (or the default) list straight into the Transaction instead "
                  "of copying it, so tags leak between transactions; use list(tags) here.")},
        {"id": "f3", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("pyledger/ledger.py", "if tag not in txn.tags:"),
         "body": ("Tags are not normalised, so 'Reimbursable' and 'reimbursable ' end up as different tags. "
                  "Consider stripping and lower-casing in tag().")},
        {"id": "f4", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("pyledger/ledger.py", "def tag(self, txn: Transaction, tag: str) -> None:"),
         "body": "nit: tag() could return the transaction so calls can be chained."},
        {"id": "f5", "severity": "P1", "identifies": [], "matches_comments": [], "fabricated": True,
         "anchor": ("pyledger/ledger.py", "tags: list[str] = field(default_factory=list)"),
         "body": ("Transaction.tags has no default value, so every existing Transaction(...) call, e.g. in "
                  "csv_import.py, now raises TypeError for a missing argument.")},
    ],
})

TASKS.append({
    "task_id": "pyledger-003",
    "repo": "pyledger",
    "pr_number": 52,
    "track": "post-merge",
    "difficulty": "Type3_Latent_Candidate",
    "pr_type": "bugfix",
    "title": "Accept ISO-8601 timestamps in CSV date column",
    "description": (
        "Our card provider switched its export to full timestamps (2026-01-31T22:15:00-05:00) "
        "instead of plain dates, and import_csv rejects those rows. parse_date now accepts "
        "timestamps with or without an offset, including a trailing Z, and import_csv takes a tz "
        "argument naming the ledger's timezone (UTC by default). Plain YYYY-MM-DD dates are "
        "handled exactly as before."
    ),
    "edits": [
        replace("pyledger/csv_import.py",
                "def parse_date(raw: str) -> dt.date:\n"
                "    return dt.date.fromisoformat(raw.strip())\n",
                '''def parse_date(raw: str, tz: dt.tzinfo = dt.timezone.utc) -> dt.date:
    """Parse "YYYY-MM-DD" or an ISO-8601 timestamp.

    Timestamps are booked on their calendar date in `tz`, the ledger's
    timezone; naive timestamps are assumed to already be in `tz`.
    """
    text = raw.strip()
    if len(text) == 10:
        return dt.date.fromisoformat(text)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    stamp = dt.datetime.fromisoformat(text)
    return stamp.date()
'''),
        replace("pyledger/csv_import.py",
                "    counter_account: str = DEFAULT_COUNTER_ACCOUNT,\n) -> int:\n",
                "    counter_account: str = DEFAULT_COUNTER_ACCOUNT,\n"
                "    tz: dt.tzinfo = dt.timezone.utc,\n) -> int:\n"),
        replace("pyledger/csv_import.py",
                '            date = parse_date(row["date"])\n',
                '            date = parse_date(row["date"], tz)\n'),
        append("tests/test_csv_import.py", '''

def test_import_csv_accepts_timestamps():
    rows = (
        "date,description,amount\\n"
        "2026-01-07T09:30:00Z,Card payment,-20.00\\n"
        "2026-01-08 18:00:00,Cash deposit,5.00\\n"
    )
    ledger = Ledger()
    import_csv(ledger, io.StringIO(rows), "assets:bank")
    assert [t.date for t in ledger.transactions] == [dt.date(2026, 1, 7), dt.date(2026, 1, 8)]
'''),
    ],
    "bugs": [{
        "description": (
            "parse_date ignores its tz argument for offset-aware timestamps: `stamp.date()` takes the "
            "calendar date in the timestamp's own offset instead of converting to the ledger timezone "
            "with `stamp.astimezone(tz)`, so e.g. 2026-01-31T22:15:00-05:00 (Feb 1 in UTC) is booked "
            "on Jan 31 and lands in the wrong month in period reports."
        ),
        "anchor": ("pyledger/csv_import.py", "    return stamp.date()"),
    }],
    "comments": [
        {"id": 1, "author": "dnguyen",
         "body": ("Checking the length feels brittle; on 3.11+ `date.fromisoformat` also accepts `20260131`. "
                  "Maybe try the date parse first and fall back to datetime?"),
         "anchor": ("pyledger/csv_import.py", "if len(text) == 10:")},
        {"id": 2, "author": "priya-s",
         "body": "Could we get a test with a non-UTC offset as well?",
         "anchor": ("tests/test_csv_import.py", "2026-01-08 18:00:00,Cash deposit,5.00")},
        {"id": 3, "author": "jlin", "reply_to": 2,
         "body": "Sure, I'll add one in a follow-up, this one is blocking the February import."},
    ],
    "substantive_override": [],
    "related": ["pyledger/reports.py"],
    "findings": [
        {"id": "f1", "severity": "P1", "identifies": ["b0"], "matches_comments": [],
         "anchor": ("pyledger/csv_import.py", "    return stamp.date()"),
         "body": ("parse_date never uses `tz` for timestamps that carry an offset: stamp.date() is the date "
                  "in the timestamp's own offset, so '2026-01-31T22:15:00-05:00' is booked on Jan 31 even "
                  "though it is Feb 1 in the UTC ledger. Convert with stamp.astimezone(tz) first.")},
        {"id": "f2", "severity": "P1", "identifies": ["b0"], "matches_comments": [],
         "anchor": ("pyledger/csv_import.py", 'date = parse_date(row["date"], tz)'),
         "body": ("The new tz argument is threaded through import_csv but has no effect on aware "
                  "timestamps, so late-evening card payments near month end are attributed to the wrong "
                  "month in income statements and monthly totals.")},
        {"id": "f3", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("pyledger/csv_import.py", "stamp = dt.datetime.fromisoformat(text)"),
         "body": ("The time of day is dropped, so same-day rows keep file order in the ledger rather than "
                  "timestamp order; if an export is not chronological the ledger order differs from the "
                  "bank's.")},
        {"id": "f4", "severity": "P2", "identifies": [], "matches_comments": [1],
         "anchor": ("pyledger/csv_import.py", "if len(text) == 10:"),
         "body": "nit: `len(text) == 10` is a magic number; trying date.fromisoformat first would state the intent."},
        {"id": "f5", "severity": "P1", "identifies": [], "matches_comments": [], "fabricated": True,
         "anchor": ("tests/test_csv_import.py", "2026-01-08 18:00:00,Cash deposit,5.00"),
         "body": ("datetime.fromisoformat does not accept a space between date and time, so the second row "
                  "of the new test ('2026-01-08 18:00:00') raises and the test cannot pass.")},
    ],
})

TASKS.append({
    "task_id": "pyledger-004",
    "repo": "pyledger",
    "pr_number": 55,
    "track": "pre-merge",
    "difficulty": "Type1_Direct",
    "pr_type": "feature",
    "title": "Add SQLite persistence for ledgers",
    "description": (
        "Adds pyledger.storage with save(ledger, path), which writes every posting to a postings "
        "table in a SQLite file, and search(path, text), which finds postings by description. "
        "This is the first step towards letting the CLI keep state between runs; loading a ledger "
        "back will come in a separate PR. Only the standard library sqlite3 module is used."
    ),
    "edits": [
        create("pyledger/storage.py", '''"""Persist ledger postings to a SQLite database."""

from __future__ import annotations

import sqlite3

from .ledger import Ledger

SCHEMA = """
CREATE TABLE IF NOT EXISTS postings (
    txn_id      INTEGER NOT NULL,
    date        TEXT    NOT NULL,
    description TEXT    NOT NULL,
    account     TEXT    NOT NULL,
    cents       INTEGER NOT NULL,
    currency    TEXT    NOT NULL
)
"""


def save(ledger: Ledger, path: str) -> int:
    """Replace the postings stored at `path` with the ledger's. Returns the row count."""
    rows = [
        (txn_id, txn.date.isoformat(), txn.description, p.account, p.amount.cents, p.amount.currency)
        for txn_id, txn in enumerate(ledger.transactions, start=1)
        for p in txn.postings
    ]
    with sqlite3.connect(path) as conn:
        conn.execute(SCHEMA)
        conn.execute("DELETE FROM postings")
        conn.executemany("INSERT INTO postings VALUES (?, ?, ?, ?, ?, ?)", rows)
    return len(rows)


def search(path: str, text: str) -> list[tuple[str, str, str, int]]:
    """Postings whose description contains `text`, as (date, description, account, cents)."""
    conn = sqlite3.connect(path)
    try:
        cursor = conn.execute(
            "SELECT date, description, account, cents FROM postings "
            f"WHERE description LIKE '%{text}%' ORDER BY date, txn_id"
        )
        return cursor.fetchall()
    finally:
        conn.close()
'''),
        create("tests/test_storage.py", '''from pyledger.storage import save, search


def test_save_and_search(ledger, tmp_path):
    db = str(tmp_path / "ledger.db")
    assert save(ledger, db) == 8
    rows = search(db, "Rent")
    assert sorted(row[2] for row in rows) == ["assets:bank:checking", "expenses:rent"]
    assert save(ledger, db) == 8
    assert len(search(db, "")) == 8
'''),
    ],
    "bugs": [
        {"description": (
            "search() interpolates the user-supplied `text` into the SQL string with an f-string "
            "(LIKE '%{text}%'), which is an SQL injection vector and breaks on any description "
            "containing a quote (e.g. O'Brien); it should bind the pattern as a query parameter."),
         "anchor": ("pyledger/storage.py", "f\"WHERE description LIKE '%{text}%' ORDER BY date, txn_id\"")},
        {"description": (
            "save() relies on `with sqlite3.connect(path) as conn:` to clean up, but the sqlite3 "
            "connection context manager only commits or rolls back the transaction; it never closes "
            "the connection, so every save() call leaks a connection and its file handle."),
         "anchor": ("pyledger/storage.py", "with sqlite3.connect(path) as conn:")},
    ],
    "comments": [
        {"id": 1, "author": "mkowalski",
         "body": ("This interpolates `text` straight into the SQL. A search for `O'Brien` already blows up, "
                  "and it's an injection vector once the CLI passes user input through. Please bind it: "
                  "`LIKE ?` with `(f\"%{text}%\",)`."),
         "anchor": ("pyledger/storage.py", "f\"WHERE description LIKE '%{text}%' ORDER BY date, txn_id\""),
         "substantive": True, "severity": "P1"},
        {"id": 2, "author": "dnguyen",
         "body": ("Heads-up: the sqlite3 connection context manager only commits/rolls back, it doesn't close "
                  "the connection, so `save` leaks one per call. `contextlib.closing(...)` around it, or an "
                  "explicit `close()` like in `search`."),
         "anchor": ("pyledger/storage.py", "with sqlite3.connect(path) as conn:"),
         "substantive": True, "severity": "P2"},
        {"id": 3, "author": "jlin", "reply_to": 1,
         "body": "Yep, switching to a parameter."},
        {"id": 4, "author": "dnguyen",
         "body": "nit: an index on txn_id will help once loading lands.",
         "anchor": ("pyledger/storage.py", "CREATE TABLE IF NOT EXISTS postings (")},
    ],
    "related": ["tests/conftest.py"],
    "findings": [
        {"id": "f1", "severity": "P0", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("pyledger/storage.py", "f\"WHERE description LIKE '%{text}%' ORDER BY date, txn_id\""),
         "body": ("search() builds the WHERE clause with an f-string, so any quote in `text` breaks the query "
                  "and crafted input such as `%' OR 1=1 --` injects SQL. Bind the LIKE pattern as a "
                  "parameter.")},
        {"id": "f2", "severity": "P2", "identifies": ["b1"], "matches_comments": [2],
         "anchor": ("pyledger/storage.py", "with sqlite3.connect(path) as conn:"),
         "body": ("`with sqlite3.connect(...) as conn` does not close the connection; sqlite3's context "
                  "manager only handles commit/rollback. Each save() leaks a connection and file handle.")},
        {"id": "f3", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("pyledger/storage.py", "for txn_id, txn in enumerate(ledger.transactions, start=1)"),
         "body": ("txn_id is the transaction's position in ledger.transactions, which shifts whenever an "
                  "earlier-dated transaction is recorded, so ids are not stable between saves and can't "
                  "be used as keys later.")},
        {"id": "f4", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("pyledger/storage.py", "def search(path: str, text: str)"),
         "body": "nit: returning a NamedTuple instead of a bare tuple would make call sites easier to read."},
        {"id": "f5", "severity": "P1", "identifies": [], "matches_comments": [], "fabricated": True,
         "anchor": ("pyledger/storage.py", 'conn.executemany("INSERT INTO postings VALUES'),
         "body": ("executemany runs after the DELETE has already been committed, so if an insert fails the "
                  "table is left empty and the previous data is lost.")},
    ],
})

TASKS.append({
    "task_id": "pyledger-005",
    "repo": "pyledger",
    "pr_number": 58,
    "track": "post-merge",
    "difficulty": "Type2_Contextual",
    "pr_type": "refactor",
    "title": "Move normal-balance sign into AccountType",
    "description": (
        "Ledger.balance and Account.is_debit_normal both check membership in the module-level "
        "DEBIT_NORMAL set. This moves the rule onto the enum as AccountType.normal_sign (+1 or -1), "
        "so callers can simply multiply, and replaces the set with the (shorter) list of "
        "credit-normal types. No behaviour change intended."
    ),
    "edits": [
        replace("pyledger/accounts.py",
                '    EXPENSE = "expense"\n\n\n'
                "# Accounts whose balance grows with debits; all others grow with credits.\n"
                "DEBIT_NORMAL = frozenset({AccountType.ASSET, AccountType.EXPENSE})\n",
                '    EXPENSE = "expense"\n\n'
                "    @property\n"
                "    def normal_sign(self) -> int:\n"
                '        """+1 if the balance grows with debits, -1 if it grows with credits."""\n'
                "        return -1 if self in CREDIT_NORMAL else 1\n\n\n"
                "# Accounts whose balance grows with credits; all others grow with debits.\n"
                "CREDIT_NORMAL = frozenset({AccountType.LIABILITY, AccountType.INCOME})\n"),
        replace("pyledger/accounts.py",
                "        return self.type in DEBIT_NORMAL\n",
                "        return self.type.normal_sign > 0\n"),
        replace("pyledger/ledger.py",
                "from .accounts import DEBIT_NORMAL, Chart\n",
                "from .accounts import Chart\n"),
        replace("pyledger/ledger.py",
                "        raw = self.raw_balance(account, as_of)\n"
                "        if self.chart.type_of(account) in DEBIT_NORMAL:\n"
                "            return raw\n"
                "        return -raw\n",
                "        raw = self.raw_balance(account, as_of)\n"
                "        return raw * self.chart.type_of(account).normal_sign\n"),
    ],
    "bugs": [{
        "description": (
            "CREDIT_NORMAL only contains LIABILITY and INCOME, but EQUITY is credit-normal too (it was "
            "not in the old DEBIT_NORMAL set). After the refactor equity accounts get normal_sign +1, "
            "so Ledger.balance('equity:...') returns the negated balance (an opening balance of 1,000 "
            "now reports -1,000), contrary to the 'no behaviour change' intent."
        ),
        "anchor": ("pyledger/accounts.py", "CREDIT_NORMAL = frozenset({AccountType.LIABILITY, AccountType.INCOME})"),
    }],
    "comments": [
        {"id": 1, "author": "priya-s",
         "body": ("Inverting the set flips the default: anything not listed is now debit-normal. Equity was "
                  "credit-normal before (it wasn't in DEBIT_NORMAL), so `equity:opening` changes sign with "
                  "this."),
         "anchor": ("pyledger/accounts.py", "CREDIT_NORMAL = frozenset({AccountType.LIABILITY, AccountType.INCOME})"),
         "substantive": True, "severity": "P1"},
        {"id": 2, "author": "dnguyen",
         "body": "Nice, much easier to read at the call site.",
         "anchor": ("pyledger/ledger.py", "return raw * self.chart.type_of(account).normal_sign")},
        {"id": 3, "author": "jlin", "reply_to": 1,
         "body": "Hm, you're right. I'll add EQUITY and a test for the opening balance."},
    ],
    "related": ["tests/conftest.py"],
    "findings": [
        {"id": "f1", "severity": "P1", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("pyledger/accounts.py", "CREDIT_NORMAL = frozenset({AccountType.LIABILITY, AccountType.INCOME})"),
         "body": ("EQUITY is missing from CREDIT_NORMAL, so it falls through to +1 and "
                  "ledger.balance('equity:opening') returns -1,000.00 instead of 1,000.00. The old "
                  "DEBIT_NORMAL set treated equity as credit-normal, so this is a behaviour change.")},
        {"id": "f2", "severity": "P1", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("pyledger/ledger.py", "return raw * self.chart.type_of(account).normal_sign"),
         "body": ("balance() now silently flips the sign of every equity account (opening balances, retained "
                  "earnings) because of how normal_sign classifies equity; no test covers an equity "
                  "balance, which is why this wasn't caught.")},
        {"id": "f3", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("pyledger/accounts.py", "CREDIT_NORMAL = frozenset({AccountType.LIABILITY, AccountType.INCOME})"),
         "body": ("Removing the public DEBIT_NORMAL constant breaks downstream code that imports it from "
                  "pyledger.accounts; consider keeping it as a deprecated alias for a release.")},
        {"id": "f4", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("pyledger/accounts.py", "return self.type.normal_sign > 0"),
         "body": "nit: nothing in the package calls is_debit_normal any more; it could be deprecated."},
        {"id": "f5", "severity": "P1", "identifies": [], "matches_comments": [], "fabricated": True,
         "anchor": ("pyledger/ledger.py", "return raw * self.chart.type_of(account).normal_sign"),
         "body": ("Money.__mul__ only accepts non-negative factors, so `raw * -1` raises for every "
                  "credit-normal account and balance('income:salary') now throws.")},
    ],
})

# --- tinyq

TASKS.append({
    "task_id": "tinyq-001",
    "repo": "tinyq",
    "pr_number": 112,
    "track": "pre-merge",
    "difficulty": "Type1_Direct",
    "pr_type": "feature",
    "title": "Allow per-job maxAttempts override",
    "description": (
        "Some jobs (webhook deliveries) need more retries than the queue-wide default, and some "
        "(payment captures) must never be retried. enqueue() now accepts maxAttempts in its "
        "options and falls back to the queue setting. While there I made the retry decision in "
        "runJob() explicit about how many attempts remain, which reads better than comparing the "
        "two counters."
    ),
    "edits": [
        replace("src/queue.ts",
                "export interface EnqueueOptions {\n  runAt?: number;\n}\n",
                "export interface EnqueueOptions {\n  runAt?: number;\n"
                "  /** Overrides the queue's maxAttempts for this job. */\n"
                "  maxAttempts?: number;\n}\n"),
        replace("src/queue.ts",
                "    if (!this.handlers.has(name)) throw new Error(`no handler registered for \"${name}\"`);\n",
                "    if (!this.handlers.has(name)) throw new Error(`no handler registered for \"${name}\"`);\n"
                "    const maxAttempts = opts.maxAttempts ?? this.maxAttempts;\n"
                "    if (!(maxAttempts >= 1)) throw new RangeError(\"maxAttempts must be >= 1\");\n"),
        replace("src/queue.ts",
                "      maxAttempts: this.maxAttempts,\n",
                "      maxAttempts,\n"),
        replace("src/queue.ts",
                "      if (job.attempts < job.maxAttempts) {\n",
                "      const remaining = job.maxAttempts - job.attempts;\n"
                "      if (remaining >= 0) {\n"),
        append("test/queue.test.ts", '''
test("per-job maxAttempts overrides the queue default", async () => {
  const { clock, queue } = setup();
  let calls = 0;
  queue.register("webhook", async () => {
    calls++;
    if (calls < 5) throw new Error("503");
  });
  const job = queue.enqueue("webhook", null, { maxAttempts: 5 });
  for (let i = 0; i < 5; i++) {
    await queue.runDue();
    clock.advance(1_000);
  }
  assert.equal(job.status, "succeeded");
  assert.equal(calls, 5);
  assert.throws(() => queue.enqueue("webhook", null, { maxAttempts: 0 }), RangeError);
});
'''),
    ],
    "bugs": [{
        "description": (
            "The retry condition `remaining >= 0` is off by one: after the final allowed attempt "
            "remaining is 0 and the job is still rescheduled, so every job gets one attempt more than "
            "maxAttempts (a job enqueued with maxAttempts: 1 is retried once). It must be "
            "`remaining > 0`."
        ),
        "anchor": ("src/queue.ts", "if (remaining >= 0) {"),
    }],
    "comments": [
        {"id": 1, "author": "sam-okafor",
         "body": ("Off by one: after the last allowed attempt `remaining` is 0, and `>= 0` schedules yet "
                  "another retry. With `maxAttempts: 1` a payment capture would run twice. Should be "
                  "`remaining > 0`."),
         "anchor": ("src/queue.ts", "if (remaining >= 0) {"),
         "substantive": True, "severity": "P1"},
        {"id": 2, "author": "rhea-m",
         "body": "Should this reject non-integers too? `maxAttempts: 2.5` passes the check.",
         "anchor": ("src/queue.ts", "const maxAttempts = opts.maxAttempts ?? this.maxAttempts;")},
        {"id": 3, "author": "sam-okafor",
         "body": "nit: the test only exercises a larger value; a `maxAttempts: 1` case would be good to have too.",
         "anchor": ("test/queue.test.ts", "const job = queue.enqueue(\"webhook\", null, { maxAttempts: 5 });")},
    ],
    "related": ["src/backoff.ts"],
    "findings": [
        {"id": "f1", "severity": "P1", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("src/queue.ts", "if (remaining >= 0) {"),
         "body": ("`remaining >= 0` still retries when the job has used all its attempts: maxAttempts 1 "
                  "runs twice and the default of 3 becomes 4 attempts. Use `remaining > 0` (equivalent to "
                  "the previous `attempts < maxAttempts`).")},
        {"id": "f2", "severity": "P1", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("src/queue.ts", "const remaining = job.maxAttempts - job.attempts;"),
         "body": ("Jobs enqueued with maxAttempts: 1 specifically to avoid retries (e.g. payment captures) "
                  "will still be retried once, because `remaining` is computed after the attempt counter "
                  "was incremented and zero is treated as 'attempts left'.")},
        {"id": "f3", "severity": "P2", "identifies": [], "matches_comments": [2],
         "anchor": ("src/queue.ts", "if (!(maxAttempts >= 1)) throw new RangeError"),
         "body": ("The validation accepts non-integers such as 2.5; Number.isInteger (allowing Infinity "
                  "explicitly if 'retry forever' is wanted) would be stricter.")},
        {"id": "f4", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("src/queue.ts", "/** Overrides the queue's maxAttempts for this job. */"),
         "body": "nit: the doc comment could mention that maxAttempts counts the first attempt, as QueueOptions does."},
        {"id": "f5", "severity": "P1", "identifies": [], "matches_comments": [], "fabricated": True,
         "anchor": ("src/queue.ts", "      maxAttempts,\n"),
         "body": "enqueue() now ignores opts.runAt and always schedules the job at clock.now()."},
    ],
})

TASKS.append({
    "task_id": "tinyq-002",
    "repo": "tinyq",
    "pr_number": 118,
    "track": "post-merge",
    "difficulty": "Type2_Contextual",
    "pr_type": "feature",
    "title": "Add TokenBucket.fromRate for human-friendly limits",
    "description": (
        "Configuring limits as `new TokenBucket(10, 0.1666)` is error-prone, so this adds "
        "parseRate(\"600/min\") and TokenBucket.fromRate(rate), which builds a bucket whose "
        "capacity equals the count and which refills at the given average rate. Units s, min "
        "and h are supported. Both are exported from the package index."
    ),
    "edits": [
        replace("src/rateLimiter.ts",
                'import { systemClock, type Clock } from "./clock.ts";\n',
                r'''import { systemClock, type Clock } from "./clock.ts";

const UNIT_MS: Record<string, number> = { s: 1_000, min: 60_000, h: 3_600_000 };

export interface Rate {
  count: number;
  perMs: number;
}

/** Parse "10/s", "600/min" or "1000/h". */
export function parseRate(text: string): Rate {
  const match = /^\s*(\d+(?:\.\d+)?)\s*\/\s*(s|min|h)\s*$/.exec(text);
  if (!match) throw new Error(`invalid rate: "${text}"`);
  return { count: Number(match[1]), perMs: UNIT_MS[match[2]] };
}
'''),
        replace("src/rateLimiter.ts",
                "    this.lastRefill = clock.now();\n  }\n",
                "    this.lastRefill = clock.now();\n  }\n\n"
                "  /** A bucket that allows `rate` on average, with bursts up to the full count. */\n"
                "  static fromRate(rate: string | Rate, clock: Clock = systemClock): TokenBucket {\n"
                "    const { count, perMs } = typeof rate === \"string\" ? parseRate(rate) : rate;\n"
                "    return new TokenBucket(count, count / perMs, clock);\n"
                "  }\n"),
        replace("src/index.ts",
                'export { TokenBucket } from "./rateLimiter.ts";\n',
                'export { parseRate, TokenBucket, type Rate } from "./rateLimiter.ts";\n'),
        replace("test/rateLimiter.test.ts",
                'import { TokenBucket } from "../src/rateLimiter.ts";\n',
                'import { parseRate, TokenBucket } from "../src/rateLimiter.ts";\n'),
        append("test/rateLimiter.test.ts", '''
test("parseRate understands s, min and h", () => {
  assert.deepEqual(parseRate("10/s"), { count: 10, perMs: 1_000 });
  assert.deepEqual(parseRate(" 600 / min "), { count: 600, perMs: 60_000 });
  assert.throws(() => parseRate("10 per second"), /invalid rate/);
});

test("fromRate sizes the bucket from the count", () => {
  const bucket = TokenBucket.fromRate("5/s", new ManualClock());
  assert.equal(bucket.capacity, 5);
  assert.equal(bucket.available(), 5);
});
'''),
    ],
    "bugs": [{
        "description": (
            "Unit mixup in TokenBucket.fromRate: `count / perMs` is a rate in tokens per millisecond, "
            "but the constructor's second parameter is refillPerSecond, so every bucket built with "
            "fromRate refills 1000x too slowly (\"600/min\" gives 0.01 tokens/s instead of 10). It "
            "should pass `(count / perMs) * 1000`."
        ),
        "anchor": ("src/rateLimiter.ts", "return new TokenBucket(count, count / perMs, clock);"),
    }],
    "comments": [
        {"id": 1, "author": "rhea-m",
         "body": ("`count / perMs` is tokens per *millisecond*, but the constructor's second argument is "
                  "tokens per second, so `fromRate(\"600/min\")` refills at 0.01/s instead of 10/s. Needs a "
                  "`* 1000`."),
         "anchor": ("src/rateLimiter.ts", "return new TokenBucket(count, count / perMs, clock);"),
         "substantive": True, "severity": "P1"},
        {"id": 2, "author": "sam-okafor",
         "body": "Do we want `ms` as a unit too? Not needed now, just asking.",
         "anchor": ("src/rateLimiter.ts", "const match = /^")},
        {"id": 3, "author": "tomas-v",
         "body": "Could the fromRate test also check the refill (advance the clock and look at `available()`)?",
         "anchor": ("test/rateLimiter.test.ts", "assert.equal(bucket.capacity, 5);")},
        {"id": 4, "author": "tomas-v", "anchor": None, "path": "src/rateLimiter.ts",
         "body": "Could the README mention fromRate? Most people will reach for it first."},
    ],
    "related": ["src/worker.ts"],
    "findings": [
        {"id": "f1", "severity": "P1", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("src/rateLimiter.ts", "return new TokenBucket(count, count / perMs, clock);"),
         "body": ("Unit mismatch: count / perMs yields tokens per millisecond, while the TokenBucket "
                  "constructor expects refillPerSecond, so any rate built this way refills 1000x too "
                  "slowly (600/min becomes 0.01 tokens/s).")},
        {"id": "f2", "severity": "P1", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("src/rateLimiter.ts", "static fromRate(rate: string | Rate"),
         "body": ("After the initial burst, a Worker limited with TokenBucket.fromRate('10/s') would wait "
                  "about 100 s per job, because msUntilAvailable divides by the per-millisecond value that "
                  "was stored as refillPerSecond.")},
        {"id": "f3", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("src/rateLimiter.ts", "return { count: Number(match[1]), perMs: UNIT_MS[match[2]] };"),
         "body": ("parseRate accepts a count of 0 ('0/s'); fromRate then fails in the constructor with "
                  "'capacity must be positive', which doesn't point at the rate string.")},
        {"id": "f4", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("src/rateLimiter.ts", "const UNIT_MS: Record<string, number>"),
         "body": "nit: declaring UNIT_MS `as const` with a union key type would make `match[2]` indexing type-safe."},
        {"id": "f5", "severity": "P2", "identifies": [], "matches_comments": [], "fabricated": True,
         "anchor": ("src/rateLimiter.ts", "const match = /^"),
         "body": ("The regex requires whitespace around the slash, so the compact form '10/s' is rejected "
                  "and only '10 / s' parses.")},
    ],
})

TASKS.append({
    "task_id": "tinyq-003",
    "repo": "tinyq",
    "pr_number": 121,
    "track": "pre-merge",
    "difficulty": "Type2_Contextual",
    "pr_type": "feature",
    "title": "Add per-job timeouts",
    "description": (
        "A handler that hangs (say, a fetch without a timeout) currently blocks the worker forever. "
        "Jobs can now be enqueued with timeoutMs; if the handler hasn't settled by then, the attempt "
        "fails with a JobTimeoutError and goes through the normal retry path. The timer uses the "
        "queue's clock so the behaviour can be tested with ManualClock."
    ),
    "edits": [
        replace("src/queue.ts",
                "  runAt: number;\n  lastError?: string;\n}\n",
                "  runAt: number;\n  lastError?: string;\n"
                "  /** Fail the attempt if the handler has not settled after this many ms. */\n"
                "  timeoutMs?: number;\n}\n"),
        replace("src/queue.ts",
                "export interface EnqueueOptions {\n  runAt?: number;\n}\n",
                '''export interface EnqueueOptions {
  runAt?: number;
  timeoutMs?: number;
}

export class JobTimeoutError extends Error {
  constructor(ms: number) {
    super(`job timed out after ${ms} ms`);
    this.name = "JobTimeoutError";
  }
}

function withTimeout<T>(work: Promise<T>, ms: number, clock: Clock): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    clock.sleep(ms).then(() => reject(new JobTimeoutError(ms)));
    work.then(resolve, reject);
  });
}
'''),
        replace("src/queue.ts",
                "      runAt: opts.runAt ?? this.clock.now(),\n",
                "      runAt: opts.runAt ?? this.clock.now(),\n"
                "      timeoutMs: opts.timeoutMs,\n"),
        replace("src/queue.ts",
                "    try {\n      await handler(job);\n      job.status = \"succeeded\";\n",
                "    try {\n"
                "      if (job.timeoutMs !== undefined) {\n"
                "        withTimeout(handler(job), job.timeoutMs, this.clock);\n"
                "      } else {\n"
                "        await handler(job);\n"
                "      }\n"
                "      job.status = \"succeeded\";\n"),
        append("test/queue.test.ts", '''
test("a job with a timeout that finishes in time succeeds", async () => {
  const { queue } = setup();
  queue.register("fast", async () => {});
  const job = queue.enqueue("fast", null, { timeoutMs: 1_000 });
  await queue.runDue();
  assert.equal(job.status, "succeeded");
  assert.equal(job.attempts, 1);
});
'''),
    ],
    "bugs": [{
        "description": (
            "Missing await: in runJob() the timeout branch calls withTimeout(...) without awaiting it, "
            "so the job is marked succeeded as soon as the handler starts; a handler that rejects or "
            "times out produces an unhandled promise rejection (which terminates Node by default) "
            "instead of being caught and retried."
        ),
        "anchor": ("src/queue.ts", "withTimeout(handler(job), job.timeoutMs, this.clock);"),
    }],
    "comments": [
        {"id": 1, "author": "tomas-v",
         "body": ("Missing `await` here. The attempt is marked `succeeded` right away, and if the handler "
                  "rejects or times out the rejection is unhandled (which kills the process on Node 15+) "
                  "instead of going through the retry path."),
         "anchor": ("src/queue.ts", "withTimeout(handler(job), job.timeoutMs, this.clock);"),
         "substantive": True, "severity": "P0"},
        {"id": 2, "author": "ana-p", "reply_to": 1,
         "body": "Argh, yes. Fixed, and added a test with a handler that never resolves."},
        {"id": 3, "author": "rhea-m",
         "body": ("The timer is never cancelled when `work` wins, so with the system clock every job keeps a "
                  "pending timeout alive for `timeoutMs`. Fine for short timeouts, but worth a "
                  "clearTimeout/AbortSignal at some point."),
         "anchor": ("src/queue.ts", "clock.sleep(ms).then(() => reject(new JobTimeoutError(ms)));"),
         "substantive": True, "severity": "P2"},
        {"id": 4, "author": "sam-okafor",
         "body": "nit: JobTimeoutError should probably be exported from index.ts so callers can instanceof-check it.",
         "anchor": ("src/queue.ts", "export class JobTimeoutError extends Error {")},
    ],
    "related": ["src/clock.ts"],
    "findings": [
        {"id": "f1", "severity": "P0", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("src/queue.ts", "withTimeout(handler(job), job.timeoutMs, this.clock);"),
         "body": ("withTimeout(...) is not awaited, so runJob() marks the job succeeded as soon as the "
                  "handler starts; a rejection or timeout then surfaces as an unhandled promise rejection "
                  "rather than triggering a retry.")},
        {"id": "f2", "severity": "P1", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("src/queue.ts", "if (job.timeoutMs !== undefined) {"),
         "body": ("Jobs with timeoutMs can never be retried: the catch block that schedules the backoff only "
                  "sees errors from the awaited branch, so the new JobTimeoutError never reaches it.")},
        {"id": "f3", "severity": "P2", "identifies": [], "matches_comments": [3],
         "anchor": ("src/queue.ts", "clock.sleep(ms).then(() => reject(new JobTimeoutError(ms)));"),
         "body": ("withTimeout never cancels the sleep when the handler settles first; with systemClock each "
                  "job leaves a live timer for timeoutMs, which keeps the process alive and piles up under "
                  "load.")},
        {"id": "f4", "severity": "P2", "identifies": [], "matches_comments": [4],
         "anchor": ("src/queue.ts", "export class JobTimeoutError extends Error {"),
         "body": "nit: JobTimeoutError is not re-exported from src/index.ts, so library users cannot check for it."},
        {"id": "f5", "severity": "P1", "identifies": [], "matches_comments": [], "fabricated": True,
         "anchor": ("src/queue.ts", "timeoutMs: opts.timeoutMs,"),
         "body": ("timeoutMs is never copied from EnqueueOptions onto the job in enqueue(), so the timeout "
                  "branch in runJob() is dead code.")},
    ],
})

TASKS.append({
    "task_id": "tinyq-004",
    "repo": "tinyq",
    "pr_number": 126,
    "track": "post-merge",
    "difficulty": "Type3_Latent_Candidate",
    "pr_type": "refactor",
    "title": "Add full-jitter backoff strategy",
    "description": (
        "Adds a strategy option to BackoffOptions. The existing behaviour is \"equal\" (still the "
        "default); \"full\" picks a uniformly random delay between 0 and the exponential value, "
        "which spreads retries out better when many jobs fail at once. The exponential part is "
        "factored out into exponentialMs() and now uses an integer shift, so delays are always "
        "whole milliseconds."
    ),
    "edits": [
        replace("src/backoff.ts",
                "  jitter?: number;\n}\n",
                "  jitter?: number;\n"
                "  /** \"equal\" (default) spreads by +/- jitter; \"full\" picks uniformly in [0, delay]. */\n"
                "  strategy?: \"equal\" | \"full\";\n}\n"),
        replace("src/backoff.ts",
                "export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 100, maxMs: 30_000, jitter: 0 };\n",
                "export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 100, maxMs: 30_000, jitter: 0 };\n\n"
                "/** baseMs * 2^(attempt - 1), capped at maxMs. */\n"
                "export function exponentialMs(attempt: number, opts: BackoffOptions): number {\n"
                "  return Math.min(opts.maxMs, opts.baseMs * (1 << (attempt - 1)));\n"
                "}\n"),
        replace("src/backoff.ts",
                "  const exp = Math.min(opts.maxMs, opts.baseMs * Math.pow(2, attempt - 1));\n",
                "  const exp = exponentialMs(attempt, opts);\n"
                "  if (opts.strategy === \"full\") return Math.floor(random() * (exp + 1));\n"),
        append("test/backoff.test.ts", '''
test("full jitter picks a delay between 0 and the exponential value", () => {
  const full = { ...opts, strategy: "full" as const };
  assert.equal(backoffDelay(3, full, () => 0), 0);
  assert.equal(backoffDelay(3, full, () => 0.999), 400);
});
'''),
    ],
    "bugs": [{
        "description": (
            "exponentialMs uses `1 << (attempt - 1)`, a 32-bit signed shift: for attempt 32 the factor "
            "becomes -2147483648, so the delay is negative and Math.min no longer caps it (the retry "
            "runs immediately), and from attempt 33 the shift count wraps and delays restart near "
            "baseMs. Jobs with large maxAttempts lose their backoff; Math.pow/2 ** (or clamping the "
            "exponent) is needed."
        ),
        "anchor": ("src/backoff.ts", "return Math.min(opts.maxMs, opts.baseMs * (1 << (attempt - 1)));"),
    }],
    "comments": [
        {"id": 1, "author": "tomas-v",
         "body": "Should `strategy` be a queue option instead of living in BackoffOptions?",
         "anchor": ("src/backoff.ts", "strategy?: \"equal\" | \"full\";")},
        {"id": 2, "author": "rhea-m",
         "body": ("`1 << n` is a 32-bit signed shift: for attempt 32 it goes negative and from 33 it wraps "
                  "around, so `Math.min` stops capping anything. Jobs with a large maxAttempts would get "
                  "negative or tiny delays. `2 ** (attempt - 1)` avoids it."),
         "anchor": ("src/backoff.ts", "return Math.min(opts.maxMs, opts.baseMs * (1 << (attempt - 1)));"),
         "substantive": True, "severity": "P1"},
        {"id": 3, "author": "ana-p", "reply_to": 2,
         "body": "I assumed nobody goes past ~20 attempts, but the webhook jobs do. Will follow up."},
    ],
    "substantive_override": [],
    "related": ["src/index.ts"],
    "findings": [
        {"id": "f1", "severity": "P1", "identifies": ["b0"], "matches_comments": [2],
         "anchor": ("src/backoff.ts", "return Math.min(opts.maxMs, opts.baseMs * (1 << (attempt - 1)));"),
         "body": ("`1 << (attempt - 1)` overflows 32-bit integers: attempt 32 gives a negative factor, so "
                  "exponentialMs returns a negative delay that Math.min does not cap, and from attempt 33 "
                  "the shift wraps to small values. Use 2 ** (attempt - 1) or clamp the exponent.")},
        {"id": "f2", "severity": "P1", "identifies": ["b0"], "matches_comments": [2],
         "anchor": ("src/backoff.ts", "const exp = exponentialMs(attempt, opts);"),
         "body": ("For long-retrying jobs the delay no longer stays at maxMs: after 31 attempts runAt lands "
                  "in the past (immediate retry) and afterwards the backoff restarts from baseMs.")},
        {"id": "f3", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("src/backoff.ts", "if (opts.strategy === \"full\") return Math.floor(random() * (exp + 1));"),
         "body": "With strategy 'full' the jitter option is silently ignored; document that or reject the combination."},
        {"id": "f4", "severity": "P2", "identifies": [], "matches_comments": [],
         "anchor": ("src/backoff.ts", "export function exponentialMs("),
         "body": "nit: exponentialMs is exported from the module but not from src/index.ts; make it public or keep it private."},
        {"id": "f5", "severity": "P1", "identifies": [], "matches_comments": [], "fabricated": True,
         "anchor": ("src/backoff.ts", "if (opts.strategy === \"full\") return Math.floor(random() * (exp + 1));"),
         "body": ("Full jitter computes Math.floor(random() * exp), which can never return the maximum delay "
                  "and returns NaN when exp is 0.")},
    ],
})

TASKS.append({
    "task_id": "tinyq-005",
    "repo": "tinyq",
    "pr_number": 130,
    "track": "pre-merge",
    "difficulty": "Type3_Latent_Candidate",
    "pr_type": "feature",
    "title": "Run jobs concurrently in Worker",
    "description": (
        "Workers process one job at a time, which leaves most of the rate-limit budget unused for "
        "I/O-bound handlers. WorkerOptions.concurrency (default 1) starts that many independent "
        "loops; each loop peeks at the next due job, waits for a rate-limit token if needed, then "
        "runs it with JobQueue.runJob()."
    ),
    "edits": [
        replace("src/worker.ts",
                "  limiter?: TokenBucket;\n}\n",
                "  limiter?: TokenBucket;\n"
                "  /** Number of jobs run in parallel. Default 1. */\n"
                "  concurrency?: number;\n}\n"),
        replace("src/worker.ts",
                "  private readonly limiter?: TokenBucket;\n",
                "  private readonly limiter?: TokenBucket;\n"
                "  private readonly concurrency: number;\n"),
        replace("src/worker.ts",
                "    this.limiter = opts.limiter;\n",
                "    this.limiter = opts.limiter;\n"
                "    this.concurrency = opts.concurrency ?? 1;\n"),
        replace("src/worker.ts",
                '''  private async run(): Promise<void> {
    const clock = this.queue.clock;
    while (this.running) {
      if (this.queue.due().length === 0) {
        await clock.sleep(this.pollMs);
        continue;
      }
      if (this.limiter) {
        const wait = this.limiter.msUntilAvailable();
        if (wait > 0) {
          await clock.sleep(wait);
          continue;
        }
        this.limiter.tryAcquire();
      }
      await this.queue.runNext();
    }
  }
''',
                '''  private async run(): Promise<void> {
    await Promise.all(Array.from({ length: this.concurrency }, () => this.runLoop()));
  }

  private async runLoop(): Promise<void> {
    const clock = this.queue.clock;
    while (this.running) {
      const job = this.queue.peek();
      if (!job) {
        await clock.sleep(this.pollMs);
        continue;
      }
      if (this.limiter) {
        const wait = this.limiter.msUntilAvailable();
        if (wait > 0) await clock.sleep(wait);
        if (!this.limiter.tryAcquire()) continue;
      }
      await this.queue.runJob(job);
    }
  }
'''),
    ],
    "bugs": [{
        "description": (
            "Race between worker loops: each loop picks a job with peek() and then awaits the rate "
            "limiter (clock.sleep) before calling runJob, without claiming the job first, and runJob "
            "does not re-check that the job is still pending. With concurrency > 1 two loops can pick "
            "the same job during the wait and both run it, executing the handler twice and "
            "double-counting attempts (even re-running a job that already succeeded)."
        ),
        "anchor": ("src/worker.ts", "await this.queue.runJob(job);"),
    }],
    "comments": [
        {"id": 1, "author": "sam-okafor",
         "body": ("`job` was picked before the `await clock.sleep(wait)` above and nothing claims it, so "
                  "another loop can pick the same job during the wait. With concurrency > 1 and a limiter "
                  "the same job runs twice, and since `runJob` doesn't check the status, even an "
                  "already-succeeded job gets re-run. Re-peek after the wait, or add a `claim()` that "
                  "flips the status atomically."),
         "anchor": ("src/worker.ts", "await this.queue.runJob(job);"),
         "substantive": True, "severity": "P1"},
        {"id": 2, "author": "rhea-m",
         "body": ("Previously we `continue`d after sleeping, so `running` was re-checked. Now a loop that was "
                  "waiting for a token still runs a job after `stop()`."),
         "anchor": ("src/worker.ts", "if (wait > 0) await clock.sleep(wait);"),
         "substantive": True, "severity": "P2"},
        {"id": 3, "author": "tomas-v",
         "body": "nit: validate `concurrency >= 1`; `0` makes `start()` a silent no-op.",
         "anchor": ("src/worker.ts", "this.concurrency = opts.concurrency ?? 1;")},
        {"id": 4, "author": "ana-p", "reply_to": 1,
         "body": "Good point. I'll add JobQueue.claim() that hands out the job already marked running."},
    ],
    "related": ["src/queue.ts"],
    "findings": [
        {"id": "f1", "severity": "P1", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("src/worker.ts", "await this.queue.runJob(job);"),
         "body": ("Race between loops: the job is chosen with peek() before awaiting the rate limiter and is "
                  "never claimed, so two loops can wake up and both call runJob on it, running the handler "
                  "twice and double-counting attempts.")},
        {"id": "f2", "severity": "P1", "identifies": ["b0"], "matches_comments": [1],
         "anchor": ("src/queue.ts", "async runJob(job: Job): Promise<void> {"),
         "body": ("runJob never checks that the job is still pending, so the stale reference the worker "
                  "obtained from peek() before an await re-runs a job another loop already completed.")},
        {"id": "f3", "severity": "P2", "identifies": [], "matches_comments": [2],
         "anchor": ("src/worker.ts", "if (wait > 0) await clock.sleep(wait);"),
         "body": ("After waiting for a token the loop no longer re-checks this.running, so after stop() each "
                  "loop that was sleeping on the limiter still executes one more job.")},
        {"id": "f4", "severity": "P2", "identifies": [], "matches_comments": [3],
         "anchor": ("src/worker.ts", "this.concurrency = opts.concurrency ?? 1;"),
         "body": "nit: concurrency: 0 silently starts no loops; validate it in the constructor."},
        {"id": "f5", "severity": "P1", "identifies": [], "matches_comments": [], "fabricated": True,
         "anchor": ("src/worker.ts", "await Promise.all(Array.from("),
         "body": ("Promise.all rejects as soon as one loop throws, and runJob rethrows handler errors, so the "
                  "whole worker stops on the first failing job.")},
    ],
})

# --- one-line bug summaries for the README table

SUMMARIES = {
    "pyledger-001": "float rounding: `int(float(x) * 100)` truncates, \"19.99\" -> 1998 cents",
    "pyledger-002": "mutable default argument `tags=[]` shared by all transactions",
    "pyledger-003": "timezone: aware timestamps not converted to the ledger tz before `.date()`",
    "pyledger-004": "SQL injection in `search()` + connection never closed in `save()` (two bugs)",
    "pyledger-005": "missed case: EQUITY left out of CREDIT_NORMAL, equity balances flip sign",
    "tinyq-001": "off-by-one retry check `remaining >= 0` gives one extra attempt",
    "tinyq-002": "unit mixup: per-millisecond rate passed as refillPerSecond",
    "tinyq-003": "missing `await` on `withTimeout(...)`: failures unhandled, never retried",
    "tinyq-004": "integer overflow: `1 << (attempt - 1)` wraps/negative from attempt 32",
    "tinyq-005": "race: job peeked before an await and never claimed, can run twice",
}

# --- engine

SAMPLE = Path(__file__).resolve().parent.parent  # datasets/sample
REPOS_DIR = SAMPLE / "repos"

IDENTITY = {
    "GIT_AUTHOR_NAME": "Lightsout Sample",
    "GIT_AUTHOR_EMAIL": "sample@lightsout.dev",
    "GIT_COMMITTER_NAME": "Lightsout Sample",
    "GIT_COMMITTER_EMAIL": "sample@lightsout.dev",
}
BASE_DATE = "2026-01-01T00:00:00Z"
HEAD_DATE = "2026-01-02T00:00:00Z"

# Local build/test output, listed in the repos' .gitignore files.
IGNORED_PARTS = {"__pycache__", "node_modules", "dist", ".pytest_cache"}


class BuildError(Exception):
    pass


def fail(msg):
    raise BuildError(msg)


def git_env(date=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    # Isolate from the user's git configuration so hashes and diffs are reproducible.
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    env["LC_ALL"] = "C"
    env.update(IDENTITY)
    if date:
        env["GIT_AUTHOR_DATE"] = date
        env["GIT_COMMITTER_DATE"] = date
    return env


def run(cmd, cwd=None, env=None, check=True):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        fail(f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n{proc.stdout}\n{proc.stderr}")
    return proc


def git(d, *args, date=None, check=True):
    return run(["git", "-C", str(d), *args], env=git_env(date), check=check)


# --- trees

def read_tree(repo):
    root = REPOS_DIR / repo
    tree = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if ".git" in rel.parts:
            fail(f"{path}: base trees must not contain .git")
        if set(rel.parts) & IGNORED_PARTS or path.suffix == ".pyc":
            continue  # build output; the repos' .gitignore keeps it out of commits too
        if path.is_symlink():
            fail(f"{path}: symlinks are not allowed in base trees")
        if path.is_file():
            if os.stat(path).st_mode & 0o111:
                fail(f"{path}: executable bit set; base files must be 0644")
            tree[rel.as_posix()] = path.read_bytes()
    if not tree:
        fail(f"empty base tree {root}")
    return tree


def write_tree(tree, d):
    for rel, data in tree.items():
        target = Path(d) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        os.chmod(target, 0o644)


def materialise(tree, d):
    """Exactly the documented materialisation; returns the base commit SHA."""
    run(["git", "init", "-q", "-b", "main", str(d)], env=git_env())
    write_tree(tree, d)
    git(d, "add", "-A")
    git(d, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "base", date=BASE_DATE)
    return git(d, "rev-parse", "HEAD").stdout.strip()


def apply_and_commit(d, diff_path, title):
    git(d, "apply", str(diff_path))
    git(d, "add", "-A")
    git(d, "-c", "commit.gpgsign=false", "commit", "-q", "-m", title, date=HEAD_DATE)
    return git(d, "rev-parse", "HEAD").stdout.strip()


def apply_edits(tree, task):
    new = dict(tree)
    for op in task["edits"]:
        kind, path = op[0], op[1]
        if kind == "create":
            if path in new:
                fail(f"{task['task_id']}: create {path}: already exists")
            new[path] = op[2].encode()
        elif kind == "append":
            if path not in new:
                fail(f"{task['task_id']}: append {path}: no such file")
            new[path] = new[path] + op[2].encode()
        elif kind == "replace":
            text = new[path].decode()
            count = text.count(op[2])
            if count != 1:
                fail(f"{task['task_id']}: replace in {path}: old text found {count} times:\n{op[2]}")
            new[path] = text.replace(op[2], op[3]).encode()
        else:
            fail(f"unknown edit {kind}")
    return new


def make_diff(base_tree, new_tree, title):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "repo"
        materialise(base_tree, d)
        for rel in base_tree:
            if rel not in new_tree:
                (d / rel).unlink()
        write_tree({k: v for k, v in new_tree.items() if base_tree.get(k) != v}, d)
        git(d, "add", "-A")
        diff = git(d, "-c", "core.abbrev=7", "diff", "--cached", "--no-color", "--no-ext-diff",
                   "--no-renames", "--src-prefix=a/", "--dst-prefix=b/").stdout
    if not diff.strip():
        fail(f"{title}: empty diff")
    return diff


# --- diff parsing

HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_diff(diff):
    """{path: {"hunks": [{"header", "lines": [(new_lineno or None, raw)]}], "added": set, "context": set}}

    Also checks that every hunk's line counts match its header.
    """
    files = {}
    current = hunk = None
    old_left = new_left = new_no = 0
    lines = diff.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for raw in lines:
        if raw.startswith("diff --git "):
            if hunk is not None and (old_left or new_left):
                fail(f"truncated hunk before {raw!r}")
            m = re.match(r"^diff --git a/(.+) b/(.+)$", raw)
            current = {"hunks": [], "added": set(), "context": set()}
            files[m.group(2)] = current
            hunk = None
            continue
        m = HUNK_RE.match(raw)
        if m and current is not None:
            if hunk is not None and (old_left or new_left):
                fail(f"truncated hunk before {raw!r}")
            old_left = int(m.group(2) if m.group(2) is not None else 1)
            new_left = int(m.group(4) if m.group(4) is not None else 1)
            new_no = int(m.group(3))
            hunk = {"header": raw, "lines": []}
            current["hunks"].append(hunk)
            continue
        if hunk is None or raw.startswith("\\"):
            continue  # file header lines, "\ No newline at end of file"
        if not (old_left or new_left):
            fail(f"line after a complete hunk: {raw!r}")
        if raw.startswith("+"):
            hunk["lines"].append((new_no, raw))
            current["added"].add(new_no)
            new_no += 1
            new_left -= 1
        elif raw.startswith("-"):
            hunk["lines"].append((None, raw))
            old_left -= 1
        elif raw.startswith(" "):
            hunk["lines"].append((new_no, raw))
            current["context"].add(new_no)
            new_no += 1
            new_left -= 1
            old_left -= 1
        else:
            fail(f"unexpected diff line: {raw!r}")
        if old_left < 0 or new_left < 0:
            fail(f"hunk line counts are wrong near {raw!r}")
    if hunk is not None and (old_left or new_left):
        fail("truncated final hunk")
    return files


def diff_hunk_for(parsed, path, line, before=2):
    """GitHub-style diffHunk: the hunk header and the lines up to the commented one."""
    for h in parsed[path]["hunks"]:
        for idx, (no, raw) in enumerate(h["lines"]):
            if no == line and not raw.startswith("-"):
                body = [r for _, r in h["lines"][max(0, idx - before): idx + 1]]
                return "\n".join([h["header"]] + body)
    fail(f"{path}:{line} is not inside any hunk")


# --- anchors

def resolve(tree, anchor, where):
    path, needle = anchor[0], anchor[1]
    if path not in tree:
        fail(f"{where}: anchor file {path} not in the tree")
    text = tree[path].decode()
    count = text.count(needle)
    if count != 1:
        fail(f"{where}: anchor {needle!r} occurs {count} times in {path}")
    offset = text.index(needle)
    line = text.count("\n", 0, offset) + 1
    return path, line


def line_text(tree, path, line):
    return tree[path].decode().split("\n")[line - 1]


# --- rendering

FENCE_LANG = {".py": "python", ".ts": "typescript"}


def fence(path, text):
    lang = FENCE_LANG.get(Path(path).suffix, "")
    if not text.endswith("\n"):
        text += "\n"
    return f"```{lang}\n{text}```\n"


# The benchmark's full configuration names, as its context files carry them in `config_name`.
CONFIG_NAMES = {
    "config_A": "config_A_diff_only",
    "config_B": "config_B_with_file_content",
    "config_C": "config_C_full_context",
}


def is_test(path):
    return path.startswith(("tests/", "test/"))


def render_context(task, record, new_tree, config):
    out = [
        f"# Pull request #{record['pr_number']}: {record['title']}",
        f"Repository: {record['repo']}",
        "",
        "## Diff",
        "```diff",
        record["diff_patch"].rstrip("\n"),
        "```",
        "",
    ]
    if config in ("config_B", "config_C"):
        out.append("## Changed files, after this PR (tests omitted)")
        out.append("")
        for path in [p for p in task["_changed"] if not is_test(p)] or task["_changed"]:
            out.append(f"### {path}")
            out.append(fence(path, new_tree[path].decode()))
    if config == "config_C":
        out.append("## Related files (unchanged)")
        out.append("")
        for path in task["related"]:
            out.append(f"### {path}")
            out.append(fence(path, new_tree[path].decode()))
    return "\n".join(out).rstrip("\n") + "\n"


# --- tests of the base trees and heads

def python_for_pytest():
    candidates = [os.environ.get("LIGHTSOUT_SAMPLE_PYTHON"), sys.executable]
    for cand in candidates:
        if cand and run([cand, "-c", "import pytest"], check=False).returncode == 0:
            return cand
    return None


def node_major_minor():
    if not shutil.which("node"):
        return None
    out = run(["node", "-p", "process.versions.node"], check=False).stdout.strip()
    try:
        major, minor = out.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


def run_repo_tests(repo, tree, label, notes):
    """Run the repo's own tests on `tree` in a scratch copy. Returns True/False/None (skipped)."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / repo
        write_tree(tree, d)
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        if repo == "pyledger":
            proc = run([sys.executable, "-m", "compileall", "-q", "pyledger", "tests"], cwd=d, check=False)
            if proc.returncode != 0:
                fail(f"{label}: compileall failed\n{proc.stdout}{proc.stderr}")
            py = python_for_pytest()
            if not py:
                notes.add("pytest not available: pyledger checked with compileall only "
                          "(set LIGHTSOUT_SAMPLE_PYTHON to an interpreter with pytest)")
                return None
            proc = run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=d, env=env, check=False)
            if proc.returncode != 0:
                fail(f"{label}: pytest failed\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
            return True
        if repo == "tinyq":
            tests = sorted(str(p.relative_to(d)) for p in (d / "test").glob("*.test.ts"))
            version = node_major_minor()
            if version and version >= (22, 6):
                cmd = ["node", "--experimental-strip-types", "--no-warnings", "--test", *tests]
                proc = run(cmd, cwd=d, check=False)
            else:
                tsc = os.environ.get("LIGHTSOUT_SAMPLE_TSC")
                if not (version and tsc and Path(tsc).exists()):
                    notes.add("node >= 22.6 (or node + LIGHTSOUT_SAMPLE_TSC) not available: tinyq tests skipped")
                    return None
                types = Path(tsc).absolute().parent.parent / "@types"  # <prefix>/node_modules/.bin/tsc
                (d / "tsconfig.build.json").write_text(json.dumps({
                    "extends": "./tsconfig.json",
                    "compilerOptions": {
                        "noEmit": False, "outDir": "dist", "allowImportingTsExtensions": False,
                        "rewriteRelativeImportExtensions": True,
                        "typeRoots": [str(types)], "types": ["node"],
                    },
                }))
                proc = run([tsc, "-p", "tsconfig.build.json"], cwd=d, check=False)
                if proc.returncode != 0:
                    fail(f"{label}: tsc failed\n{proc.stdout}{proc.stderr}")
                notes.add("tinyq tests run by compiling with LIGHTSOUT_SAMPLE_TSC (node < 22.6)")
                cmd = ["node", "--test", *[str((Path("dist") / t).with_suffix(".js")) for t in tests]]
                proc = run(cmd, cwd=d, check=False)
            if proc.returncode != 0:
                fail(f"{label}: node tests failed\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
            return True
    fail(f"no test runner for {repo}")


# --- build

def build(args):
    notes = set()
    trees = {repo: read_tree(repo) for repo in REPOS}
    base_shas = {}
    for repo, tree in trees.items():
        with tempfile.TemporaryDirectory() as tmp:
            base_shas[repo] = materialise(tree, Path(tmp) / repo)

    ids = [t["task_id"] for t in TASKS]
    if len(set(ids)) != len(ids):
        fail("duplicate task ids")

    crbug, prbench, annotations, contexts, scripted = [], [], {}, {}, []
    for task in TASKS:
        tid = task["task_id"]
        repo = task["repo"]
        meta = REPOS[repo]
        base_tree = trees[repo]
        new_tree = apply_edits(base_tree, task)
        diff = make_diff(base_tree, new_tree, tid)
        parsed = parse_diff(diff)
        task["_changed"] = sorted(parsed)
        task["_new_tree"] = new_tree

        # Fresh materialisation, exactly as the Rust side does it.
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp) / repo
            sha = materialise(base_tree, d)
            if sha != base_shas[repo]:
                fail(f"{tid}: base commit is not reproducible")
            patch = Path(tmp) / "task.diff"
            patch.write_text(diff)
            git(d, "apply", "--check", str(patch))
            head = apply_and_commit(d, patch, task["title"])
            for rel, data in new_tree.items():
                if (d / rel).read_bytes() != data:
                    fail(f"{tid}: {rel} differs after git apply")

        bugs = []
        for i, bug in enumerate(task["bugs"]):
            path, line = resolve(new_tree, bug["anchor"], f"{tid} b{i}")
            if line not in parsed.get(path, {}).get("added", set()) | parsed.get(path, {}).get("context", set()):
                fail(f"{tid} b{i}: {path}:{line} is not an added or context line of the diff")
            bugs.append({
                "description": bug["description"],
                "file": path,
                "line": line,
                "source": "review-comment" if task["track"] == "pre-merge" else "fix-issue",
            })

        crbug.append({
            "task_id": tid,
            "repo": meta["name"],
            "image": meta["image"],
            "language": meta["language"],
            "base_commit": base_shas[repo],
            "reviewed_commit": head,
            "title": task["title"],
            "description": task["description"],
            "diff": diff,
            "track": task["track"],
            "bugs": bugs,
        })

        comments, by_id = [], {}
        for c in task["comments"]:
            if "reply_to" in c:
                parent = by_id[c["reply_to"]]
                path, line, hunk = parent["path"], parent["line"], parent["diffHunk"]
            elif c.get("anchor") is None:  # file-level comment, not attached to a line
                path, line, hunk = c["path"], None, parsed[c["path"]]["hunks"][0]["header"]
            else:
                path, line = resolve(new_tree, c["anchor"], f"{tid} comment {c['id']}")
                hunk = diff_hunk_for(parsed, path, line)
            rec = {"id": c["id"], "author": c["author"], "body": c["body"],
                   "path": path, "line": line, "diffHunk": hunk}
            by_id[c["id"]] = rec
            comments.append(rec)
        record = {
            "task_id": tid,
            "repo": meta["name"],
            "pr_number": task["pr_number"],
            "language": meta["language"],
            "difficulty": task["difficulty"],
            "pr_type": task["pr_type"],
            "title": task["title"],
            "description": task["description"],
            "diff_patch": diff,
            "base_commit": base_shas[repo],
            "head_commit": head,
            "human_review_comments": comments,
        }
        prbench.append(record)

        substantive = task.get("substantive_override")
        if substantive is None:
            substantive = [c["id"] for c in task["comments"] if c.get("substantive")]
        ann_comments = []
        for c in task["comments"]:
            rec = by_id[c["id"]]
            in_diff = rec["line"] is not None and (
                rec["line"] in parsed.get(rec["path"], {}).get("added", set())
                | parsed.get(rec["path"], {}).get("context", set()))
            # The benchmark's annotation form: string ids, the comment's text and location.
            ann_comments.append({
                "comment_id": str(c["id"]),
                "author": rec["author"],
                "body": rec["body"],
                "file": rec["path"],
                "line": rec["line"],
                "severity": c.get("severity") if c["id"] in substantive else None,
                "is_initiating_comment": "reply_to" not in c,
                "is_in_diff": bool(in_diff),
            })
        annotations[tid] = {"task_id": tid, "substantive_comment_ids": [str(i) for i in substantive],
                            "comments": ann_comments}

        for config in ("config_A", "config_B", "config_C"):
            contexts[(config, tid)] = {"task_id": tid, "config": config, "config_name": CONFIG_NAMES[config],
                                       "rendered": render_context(task, record, new_tree, config)}

        findings = []
        for f in task["findings"]:
            path, line = resolve(new_tree, f["anchor"], f"{tid} {f['id']}")
            findings.append({
                "id": f["id"], "body": f["body"], "file": path, "line": line,
                "severity": f["severity"], "identifies": f["identifies"],
                "matches_comments": f["matches_comments"], "fabricated": bool(f.get("fabricated")),
            })
        scripted.append({"task_id": tid, "title": task["title"], "findings": findings})

    outputs = {}

    def jsonl(rows):
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)

    def pretty(obj):
        return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"

    def one(obj):
        return json.dumps(obj, ensure_ascii=False)

    def annotation_json(ann):
        items = ",\n".join(f"    {one(c)}" for c in ann["comments"])
        return (f'{{\n  "task_id": {one(ann["task_id"])},\n'
                f'  "substantive_comment_ids": {one(ann["substantive_comment_ids"])},\n'
                f'  "comments": [\n{items}\n  ]\n}}\n')

    def scripted_json(tasks):
        blocks = []
        for t in tasks:
            items = ",\n".join(f"        {one(f)}" for f in t["findings"])
            blocks.append(f'    {{\n      "task_id": {one(t["task_id"])},\n      "title": {one(t["title"])},\n'
                          f'      "findings": [\n{items}\n      ]\n    }}')
        return '{\n  "version": 1,\n  "tasks": [\n' + ",\n".join(blocks) + "\n  ]\n}\n"

    outputs["crbugbench.jsonl"] = jsonl(crbug)
    outputs["swe-prbench/tasks.jsonl"] = jsonl(prbench)
    for tid, ann in annotations.items():
        outputs[f"swe-prbench/annotations/{tid}_human.json"] = annotation_json(ann)
    for (config, tid), ctx in contexts.items():
        outputs[f"swe-prbench/contexts/{config}/{tid}.json"] = pretty(ctx)
    outputs["scripted.json"] = scripted_json(scripted)
    if json.loads(outputs["scripted.json"]) != {"version": 1, "tasks": scripted}:
        fail("scripted.json round-trip mismatch")
    outputs["README.md"] = render_readme(crbug, prbench, base_shas, annotations)

    # Replace generated outputs (never the hand-written repos/ or tools/).
    for stale in ("swe-prbench",):
        shutil.rmtree(SAMPLE / stale, ignore_errors=True)
    for rel, text in outputs.items():
        target = SAMPLE / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
        os.chmod(target, 0o644)

    verify(trees, base_shas)

    if not args.no_tests:
        for repo, tree in trees.items():
            run_repo_tests(repo, tree, f"{repo} base", notes)
        for task in TASKS:
            run_repo_tests(task["repo"], task["_new_tree"], f"{task['task_id']} head", notes)

    size = sum(p.stat().st_size for p in SAMPLE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    # 440 KB: the benchmark's annotation form repeats each human comment's text and location.
    if size > 440 * 1024:
        fail(f"dataset is {size} bytes, over the 440 KB budget")
    print(f"ok: {len(TASKS)} tasks, {len(outputs)} generated files, dataset size {size} bytes")
    for repo, sha in base_shas.items():
        print(f"  {repo} base {sha}")
    for note in sorted(notes):
        print(f"  note: {note}")


# --- verification (reads back what was written)

def verify(trees, base_shas):
    def load_jsonl(rel):
        rows = []
        for n, line in enumerate((SAMPLE / rel).read_text(encoding="utf-8").splitlines(), 1):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                fail(f"{rel}:{n}: invalid JSON: {exc}")
        return rows

    crbug = load_jsonl("crbugbench.jsonl")
    prbench = load_jsonl("swe-prbench/tasks.jsonl")
    scripted = json.loads((SAMPLE / "scripted.json").read_text(encoding="utf-8"))

    crbug_keys = ["task_id", "repo", "image", "language", "base_commit", "reviewed_commit", "title",
                  "description", "diff", "track", "bugs"]
    pr_keys = ["task_id", "repo", "pr_number", "language", "difficulty", "pr_type", "title", "description",
               "diff_patch", "base_commit", "head_commit", "human_review_comments"]
    if [r["task_id"] for r in crbug] != [r["task_id"] for r in prbench]:
        fail("crbugbench and swe-prbench task ids differ")
    if [t["task_id"] for t in scripted["tasks"]] != [r["task_id"] for r in crbug]:
        fail("scripted.json task ids differ")
    per_repo = {}
    two_bug = 0
    for cb, pr, sc in zip(crbug, prbench, scripted["tasks"]):
        tid = cb["task_id"]
        if list(cb) != crbug_keys or list(pr) != pr_keys:
            fail(f"{tid}: unexpected keys")
        repo = cb["repo"].split("/")[1]
        per_repo[repo] = per_repo.get(repo, 0) + 1
        if cb["diff"] != pr["diff_patch"] or cb["base_commit"] != pr["base_commit"] \
                or cb["reviewed_commit"] != pr["head_commit"] or cb["title"] != pr["title"] \
                or cb["description"] != pr["description"] or sc["title"] != cb["title"]:
            fail(f"{tid}: crbugbench / swe-prbench / scripted disagree")
        if cb["base_commit"] != base_shas[repo]:
            fail(f"{tid}: base commit mismatch")
        if cb["track"] not in ("pre-merge", "post-merge"):
            fail(f"{tid}: bad track")
        if pr["difficulty"] not in ("Type1_Direct", "Type2_Contextual", "Type3_Latent_Candidate"):
            fail(f"{tid}: bad difficulty")
        n_bugs = len(cb["bugs"])
        if n_bugs == 2:
            two_bug += 1
        elif n_bugs != 1:
            fail(f"{tid}: {n_bugs} bugs")

        # Fresh materialisation from the written files.
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp) / repo
            if materialise(trees[repo], d) != cb["base_commit"]:
                fail(f"{tid}: base SHA differs")
            patch = Path(tmp) / "p.diff"
            patch.write_text(cb["diff"])
            git(d, "apply", "--check", str(patch))
            if apply_and_commit(d, patch, cb["title"]) != cb["reviewed_commit"]:
                fail(f"{tid}: head SHA differs")
            new_tree = {rel: (d / rel).read_bytes() for rel in
                        git(d, "ls-files", "-z").stdout.split("\0") if rel}
            modes = set(git(d, "ls-tree", "-r", "HEAD").stdout.split()[0::4])
            if modes != {"100644"}:
                fail(f"{tid}: unexpected file modes {modes}")

        parsed = parse_diff(cb["diff"])
        if not 1 <= len(parsed) <= 3:
            fail(f"{tid}: diff touches {len(parsed)} files")
        n_lines = len(cb["diff"].splitlines())
        if not 15 <= n_lines <= 80:
            fail(f"{tid}: diff has {n_lines} lines (want 15-80)")
        for i, bug in enumerate(cb["bugs"]):
            info = parsed.get(bug["file"])
            if not info or bug["line"] not in info["added"] | info["context"]:
                fail(f"{tid} b{i}: {bug['file']}:{bug['line']} not in the diff")
            task = next(t for t in TASKS if t["task_id"] == tid)
            if task["bugs"][i]["anchor"][1].split("\n")[0] not in line_text(new_tree, bug["file"], bug["line"]):
                fail(f"{tid} b{i}: line {bug['line']} is not the buggy line")
            expected = "review-comment" if cb["track"] == "pre-merge" else "fix-issue"
            if bug["source"] != expected:
                fail(f"{tid} b{i}: source should be {expected}")

        comment_ids = [c["id"] for c in pr["human_review_comments"]]
        if len(set(comment_ids)) != len(comment_ids) or not 2 <= len(comment_ids) <= 5:
            fail(f"{tid}: comment ids must be unique, 2-5 of them")
        for c in pr["human_review_comments"]:
            if c["line"] is not None and c["line"] > len(new_tree[c["path"]].decode().split("\n")):
                fail(f"{tid}: comment {c['id']} line out of range")
            if not c["diffHunk"].startswith("@@ "):
                fail(f"{tid}: comment {c['id']} diffHunk must start with a hunk header")

        ann_path = SAMPLE / "swe-prbench" / "annotations" / f"{tid}_human.json"
        if ann_path.exists():
            ann = json.loads(ann_path.read_text(encoding="utf-8"))
            ann_ids = [str(i) for i in comment_ids]
            if ann["task_id"] != tid or sorted(c["comment_id"] for c in ann["comments"]) != sorted(ann_ids):
                fail(f"{tid}: annotation ids do not match comments")
            if not set(ann["substantive_comment_ids"]) <= set(ann_ids):
                fail(f"{tid}: unknown substantive comment id")
            by_ann_id = {str(c["id"]): c for c in pr["human_review_comments"]}
            for c in ann["comments"]:
                if c["severity"] not in ("P0", "P1", "P2", None):
                    fail(f"{tid}: bad severity")
                human = by_ann_id[c["comment_id"]]
                if (c["author"], c["body"], c["file"], c["line"]) != (human["author"], human["body"],
                                                                      human["path"], human["line"]):
                    fail(f"{tid}: annotation comment {c['comment_id']} differs from the human review comment")

        for config in ("config_A", "config_B", "config_C"):
            ctx = json.loads((SAMPLE / "swe-prbench" / "contexts" / config / f"{tid}.json")
                             .read_text(encoding="utf-8"))
            if (ctx["task_id"] != tid or ctx["config"] != config or ctx["config_name"] != CONFIG_NAMES[config]
                    or cb["diff"].rstrip("\n") not in ctx["rendered"]):
                fail(f"{tid}: bad {config} context")

        bug_ids = {f"b{i}" for i in range(n_bugs)}
        fids = [f["id"] for f in sc["findings"]]
        if len(set(fids)) != len(fids) or not 4 <= len(fids) <= 7:
            fail(f"{tid}: findings ids must be unique, 4-7 of them")
        found = set()
        for f in sc["findings"]:
            if f["severity"] not in ("P0", "P1", "P2"):
                fail(f"{tid} {f['id']}: bad severity")
            if not set(f["identifies"]) <= bug_ids or not set(f["matches_comments"]) <= set(comment_ids):
                fail(f"{tid} {f['id']}: dangling identifies/matches_comments")
            if f["fabricated"] and f["identifies"]:
                fail(f"{tid} {f['id']}: a fabricated finding cannot identify a bug")
            if f["file"] not in new_tree or not 1 <= f["line"] <= len(new_tree[f["file"]].decode().split("\n")):
                fail(f"{tid} {f['id']}: location out of range")
            found |= set(f["identifies"])
        if found != bug_ids:
            fail(f"{tid}: not every bug is identified by some finding")
        if sum(f["fabricated"] for f in sc["findings"]) != 1:
            fail(f"{tid}: need exactly one fabricated finding")

    if two_bug < 1:
        fail("need at least one task with two bugs")
    if any(n < 5 for n in per_repo.values()) or len(per_repo) != 2:
        fail(f"need at least 5 tasks per repo: {per_repo}")
    tracks = [r["track"] for r in crbug]
    if abs(tracks.count("pre-merge") - tracks.count("post-merge")) > 2:
        fail("tracks are not mixed")
    if {r["difficulty"] for r in prbench} != {"Type1_Direct", "Type2_Contextual", "Type3_Latent_Candidate"}:
        fail("difficulties are not mixed")
    ann_files = {p.name for p in (SAMPLE / "swe-prbench" / "annotations").glob("*.json")}
    if len(ann_files) != len(crbug):
        fail("every task needs its annotation file (the reference harness refuses a run without one)")
    if not any(json.loads(p.read_text())["substantive_comment_ids"] == []
               for p in (SAMPLE / "swe-prbench" / "annotations").glob("*.json")):
        fail("at least one annotation must have an empty substantive list")


# --- README

def render_readme(crbug, prbench, base_shas, annotations):
    rows = []
    for cb, pr in zip(crbug, prbench):
        tid = cb["task_id"]
        locs = ", ".join(f"`{b['file']}:{b['line']}`" for b in cb["bugs"])
        rows.append(f"| `{tid}` | {cb['title']} | {cb['track']} | {pr['difficulty']} | {pr['pr_type']} "
                    f"| {SUMMARIES[tid]} | {locs} |")
    empty = [t for t, a in annotations.items() if not a["substantive_comment_ids"]]
    base_lines = "\n".join(f"| `{repo}` | `{sha}` |" for repo, sha in base_shas.items())
    return f"""# Lightsout sample dataset

A small, hand-written dataset for exercising Lightsout end to end without
network access: two tiny repositories, {len(crbug)} pull requests against them,
each of which deliberately introduces a realistic bug, and the same tasks
rendered in the two benchmark formats Lightsout reads, plus fixtures for the
scripted (fake) model server.

Everything except `repos/` and `tools/` is generated by `tools/build.py`;
do not edit generated files by hand. To change a task, edit
`tools/build.py` (task definitions are exact string edits against the base
tree; bug, comment and finding locations are anchors that the script resolves
to line numbers) and run, from the repository root:

```
python3 datasets/sample/tools/build.py            # regenerate + verify + run tests
python3 datasets/sample/tools/build.py --no-tests # regenerate + verify only
```

The output is deterministic. The script verifies that every diff applies
(`git apply --check`) to a fresh materialisation, that materialised base/head
SHAs equal the recorded ones, that each bug line is an added or context line of
the diff and is the buggy line, that ids are consistent, and that the repos'
tests pass at the base and at every head (pyledger: `compileall`, plus pytest if
importable or via `LIGHTSOUT_SAMPLE_PYTHON`; tinyq: `node
--experimental-strip-types --test` on Node >= 22.6, else compiled with
`LIGHTSOUT_SAMPLE_TSC=<tsc>`). The bugs are latent: tests pass at every head.

## Layout

```
datasets/sample/
  README.md                      this file (generated)
  repos/pyledger/                base tree: Python double-entry ledger library (pytest tests)
  repos/tinyq/                   base tree: TypeScript in-memory job queue (node:test tests)
  crbugbench.jsonl               one task per line (CR-BugBench style, with bug locations)
  swe-prbench/tasks.jsonl        the same tasks in SWE-PRBench format, with human review comments
  swe-prbench/annotations/       <task_id>_human.json: the human comments in the benchmark's form, which are substantive
  swe-prbench/contexts/config_A/ <task_id>.json: short header (PR, title, repo) + diff
  swe-prbench/contexts/config_B/ config_A + full content (after the PR) of the changed non-test files
  swe-prbench/contexts/config_C/ config_B + 1-2 related unchanged files (callers, fixtures)
  scripted.json                  candidate findings for the scripted model server
  tools/build.py                 generator and verifier (python3, stdlib only, needs git)
```

## Materialisation

A repository is materialised from `repos/<repo>/` like this (all files are
plain 0644 files, there is no `.gitattributes`, and the commit SHAs below
assume git's default content handling, i.e. no `core.autocrlf`):

```
git init -q -b main <dir>
cp -R repos/<repo>/. <dir>/
git -C <dir> add -A
env GIT_AUTHOR_NAME="Lightsout Sample" GIT_AUTHOR_EMAIL="sample@lightsout.dev" \\
    GIT_COMMITTER_NAME="Lightsout Sample" GIT_COMMITTER_EMAIL="sample@lightsout.dev" \\
    GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z" \\
    git -C <dir> -c commit.gpgsign=false commit -q -m "base"
# base_commit = git -C <dir> rev-parse HEAD

git -C <dir> apply <task diff>
git -C <dir> add -A
# same env, dates "2026-01-02T00:00:00Z":
git -C <dir> -c commit.gpgsign=false commit -q -m "<task title>"
# reviewed_commit (crbugbench) = head_commit (swe-prbench) = git -C <dir> rev-parse HEAD
```

| repo | base commit |
| --- | --- |
{base_lines}

## Files

* `crbugbench.jsonl`: one task per line; `bugs[].line` is a line of the new
  file; bug ids used elsewhere are `b0`, `b1` (index into `bugs`); `source`
  is `review-comment` (pre-merge) or `fix-issue` (post-merge).
* `swe-prbench/tasks.jsonl`: the same tasks; replies in
  `human_review_comments` repeat their parent's `path`/`line`/`diffHunk`.
* `swe-prbench/annotations/<task_id>_human.json` in the benchmark's form:
  each comment's `comment_id` is the string of its `id` in `tasks.jsonl`,
  `file`/`line` are its `path`/`line`, and `substantive_comment_ids` lists
  such strings. Each context file carries the benchmark's full `config_name`
  (e.g. `config_A_diff_only`) beside `config` and `rendered`.
* Annotations: every task has one (the reference harness refuses a run
  without); `{", ".join(empty)}` have an empty `substantive_comment_ids`, so
  their ground truth is the initiating comments.
* `scripted.json`: per task 5-6 findings: 1-2 identifying the bug, correct
  but unrelated ones, a nit and one `"fabricated": true` claim.
  `identifies` holds bug ids, `matches_comments` human comment ids.

## Tasks

| task | title | track | difficulty | type | injected bug | bug location |
| --- | --- | --- | --- | --- | --- | --- |
{chr(10).join(rows)}
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-tests", action="store_true", help="skip running the repos' test suites")
    args = parser.parse_args()
    try:
        build(args)
    except BuildError as exc:
        print(f"build.py: error: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
