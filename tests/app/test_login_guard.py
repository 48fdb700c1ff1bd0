"""Sign-in throttling per user name and per address (the real scrypt check behind it)."""

from __future__ import annotations

import pytest

from app.auth import User, UserDirectory, hash_password
from app.login_guard import CLIENT_ADDRESS, LoginGuard, LoginThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_is_locked_after_its_free_failures_for_doubling_times():
    clock = Clock()
    throttle = LoginThrottle(free_failures=3, base_lock_s=30, max_lock_s=120, clock=clock)
    for _ in range(2):
        throttle.record_failure("user:carol")
    assert throttle.locked_for("user:carol") == 0
    throttle.record_failure("user:carol")
    assert throttle.locked_for("user:carol") == 30
    throttle.record_failure("user:carol")
    throttle.record_failure("user:carol")
    assert throttle.locked_for("user:carol") == 120  # 30 -> 60 -> 120, capped there
    clock.now += 121
    assert throttle.locked_for("user:carol") == 0 and throttle.locked_for("user:alice") == 0
    throttle.clear("user:carol")
    throttle.record_failure("user:carol")
    assert throttle.locked_for("user:carol") == 0


@pytest.fixture
def guard():
    users = UserDirectory({name: User(name, hash_password(f"{name}-pass")) for name in ("alice", "bob", "carol")})
    return LoginGuard(users, per_user=LoginThrottle(free_failures=3), per_address=LoginThrottle(free_failures=5))


def signs_in(guard, user, password, address="192.0.2.1") -> bool:
    token = CLIENT_ADDRESS.set(address)
    try:
        return guard(user, password)
    finally:
        CLIENT_ADDRESS.reset(token)


def test_forty_wrong_passwords_then_the_right_one_is_refused(guard):
    for attempt in range(40):
        assert not signs_in(guard, "carol", f"guess-{attempt}", address=f"198.51.100.{attempt}")
    assert not signs_in(guard, "carol", "carol-pass")  # the user name is locked from every address
    assert signs_in(guard, "alice", "alice-pass")


def test_an_address_spraying_user_names_is_locked_for_all_of_them(guard):
    for user in ("alice", "bob", "carol", "dave", "erin"):
        assert not signs_in(guard, user, "Summer2025!", address="203.0.113.9")
    assert not signs_in(guard, "bob", "bob-pass", address="203.0.113.9")
    assert signs_in(guard, "bob", "bob-pass", address="203.0.113.10")
