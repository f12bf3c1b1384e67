"""The two bases of the ledger client's exceptions: `LedgerError` and `ContractRevert`.

They live apart from errors.py so that the generated contract_errors.py (one `ContractRevert` subclass per custom
error) can subclass `ContractRevert` while errors.py imports those classes. Import all of them from errors.
"""

from __future__ import annotations

from typing import Any

from protocol.digest import hex_text


class LedgerError(Exception):
    """Base of every error raised by ledger_client; its message is one line for a user."""


class ContractRevert(LedgerError):
    """A call reverted with a custom error; `.error` is its name and `.args_dict` its arguments."""

    error: str = ""

    def __init__(self, args_dict: dict[str, Any] | None = None, function: str = ""):
        self.args_dict = args_dict or {}
        self.function = function
        shown = ", ".join(f"{k}={_show(v)}" for k, v in self.args_dict.items())
        where = f"{function}: " if function else ""
        super().__init__(f"{where}reverted with {self.error}({shown})")


def _show(v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        return hex_text(v)
    return str(v)
