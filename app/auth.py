"""Logins for shared demos: users.toml with salted scrypt password hashes.

users.toml:

    [users.alice]
    password = "scrypt$16384$8$1$<salt b64>$<hash b64>"   # from `python -m app hash-password`
    admin = true                                          # optional: sees every namespace

Each user's memories live in the namespace named after the user.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
USERNAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class AuthError(ValueError):
    """users.toml cannot be used; the message names the problem and the fix."""


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    if not password:
        raise AuthError("The password is empty; choose a password.")
    salt = salt or os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32)
    b64 = base64.b64encode
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${b64(salt).decode()}${b64(digest).decode()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        actual = hashlib.scrypt(
            password.encode(), salt=base64.b64decode(salt), n=int(n), r=int(r), p=int(p), dklen=len(expected)
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(actual, expected)


@functools.cache
def _stand_in_hash() -> str:
    """A hash no password is checked against for real, with the default cost."""
    return hash_password(base64.b64encode(os.urandom(16)).decode())


@dataclass(frozen=True)
class User:
    name: str
    password_hash: str
    admin: bool = False


class UserDirectory:
    def __init__(self, users: dict[str, User]) -> None:
        self.users = users

    @classmethod
    def load(cls, path: Path | str) -> UserDirectory:
        path = Path(path)
        if not path.is_file():
            raise AuthError(f"{path}: no such file; create it with [users.NAME] tables (see `python -m app hash-password`).")
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise AuthError(f"{path}: not valid TOML ({exc}).") from None
        tables = raw.get("users")
        if not isinstance(tables, dict) or not tables:
            raise AuthError(f"{path}: add at least one [users.NAME] table with a password hash.")
        users = {}
        for name, entry in tables.items():
            if not USERNAME.match(name):
                raise AuthError(f"{path}: user name {name!r} may only use letters, digits, '_', '.', '-' (at most 64).")
            if not isinstance(entry, dict) or not str(entry.get("password", "")).startswith("scrypt$"):
                raise AuthError(
                    f"{path}: users.{name}.password must be a hash from `python -m app hash-password`, never the plain password."
                )
            admin = entry.get("admin", False)
            if not isinstance(admin, bool):
                raise AuthError(f"{path}: users.{name}.admin must be true or false.")
            users[name] = User(name, entry["password"], admin)
        return cls(users)

    def check(self, username: str, password: str) -> bool:
        """Whether the password is the user's; an unknown user costs the same scrypt run as a known
        one, so the answer's timing does not tell which user names exist."""
        user = self.users.get(username)
        matches = verify_password(password, user.password_hash if user else _stand_in_hash())
        return user is not None and matches

    def is_admin(self, username: str | None) -> bool:
        user = self.users.get(username or "")
        return bool(user and user.admin)
