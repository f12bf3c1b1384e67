"""Loading a local signing key: a hex private key (argument or environment) or an encrypted keystore."""

from __future__ import annotations

import getpass
import json
import os
import sys
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from ledger_client.chain.errors import KeyLoadError

KEY_ENV = "PROOFSWARM_PRIVATE_KEY"


def load_account(
    private_key: str | None = None,
    keystore: str | Path | None = None,
    password_file: str | Path | None = None,
    env_var: str = KEY_ENV,
    prompt: bool = True,
) -> LocalAccount:
    """Load an account from, in order: `private_key`, `keystore` (+ password file or prompt), `$env_var`."""
    if private_key:
        return _from_hex(private_key, "the given private key")
    if keystore:
        return _from_keystore(Path(keystore), password_file, prompt)
    if os.environ.get(env_var):
        return _from_hex(os.environ[env_var], f"${env_var}")
    raise KeyLoadError(f"no key given: pass --key, --keystore (with --password-file) or set ${env_var}")


def _from_hex(key: str, where: str) -> LocalAccount:
    try:
        return Account.from_key(key.strip())
    except (ValueError, TypeError):
        raise KeyLoadError(f"{where} is not a valid 32-byte hex private key") from None


def _from_keystore(path: Path, password_file: str | Path | None, prompt: bool) -> LocalAccount:
    try:
        encrypted = json.loads(path.read_text())
    except FileNotFoundError:
        raise KeyLoadError(f"keystore file {path} does not exist") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise KeyLoadError(f"keystore file {path} is not a readable JSON keystore ({exc.__class__.__name__})") from None
    if password_file:
        try:
            password = Path(password_file).read_text().rstrip("\n")
        except OSError:
            raise KeyLoadError(f"password file {password_file} cannot be read") from None
    elif prompt and sys.stdin.isatty():
        try:
            password = getpass.getpass(f"password for {path}: ")
        except EOFError:
            raise KeyLoadError(f"no password given for keystore {path}") from None
    else:
        raise KeyLoadError(f"keystore {path} needs --password-file (no terminal to ask for its password)")
    try:
        return Account.from_key(Account.decrypt(encrypted, password))
    except ValueError:
        raise KeyLoadError(f"wrong password for keystore {path}") from None
    except (KeyError, TypeError):
        raise KeyLoadError(f"keystore file {path} is not a valid encrypted keystore") from None


def write_keystore(account: LocalAccount, path: str | Path, password: str) -> Path:
    """Encrypt `account` into a keystore file (atomic write, mode 0600)."""
    path = Path(path)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(Account.encrypt(account.key, password)))
    tmp.chmod(0o600)
    tmp.replace(path)
    return path
