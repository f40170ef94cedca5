"""pyledger: a small double-entry ledger."""

from .accounts import Account, AccountType, Chart, UnknownAccount
from .ledger import Ledger, Posting, Transaction, UnbalancedTransaction
from .money import CurrencyMismatch, Money, format_amount, parse_amount

__all__ = [
    "Account",
    "AccountType",
    "Chart",
    "CurrencyMismatch",
    "Ledger",
    "Money",
    "Posting",
    "Transaction",
    "UnbalancedTransaction",
    "UnknownAccount",
    "format_amount",
    "parse_amount",
]

__version__ = "0.4.0"
