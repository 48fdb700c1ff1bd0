"""Sign-in throttling per user name and per address (the real scrypt check behind it), its counts
shared by app processes through the database, and password checks kept off the event loop, where
one account signing in over and over cannot make everyone else's sign-in wait behind it."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from app.auth import User, UserDirectory, hash_password
from app.login_guard import CLIENT_ADDRESS, LoginGuard, LoginThrottle
from memory_db import MemoryStore

REPO = Path(__file__).resolve().parents[2]


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


USERS = UserDirectory({name: User(name, hash_password(f"{name}-pass")) for name in ("alice", "bob", "carol")})


@pytest.fixture
def guard():
    return LoginGuard(USERS, per_user=LoginThrottle(free_failures=3), per_address=LoginThrottle(free_failures=5))


def signs_in(guard, user, password, address="192.0.2.1") -> bool:
    return guard.check(user, password, address)


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


def test_signing_in_to_ones_own_account_does_not_wipe_the_addresss_failures(guard):
    attacker = "203.0.113.66"
    for user in ("bob", "carol", "dave", "erin"):  # four of the address's five free failures
        assert not signs_in(guard, user, "Winter2025!", address=attacker)
    assert signs_in(guard, "alice", "alice-pass", address=attacker)  # the attacker's own account
    assert not signs_in(guard, "frank", "Winter2025!", address=attacker)  # the fifth: the address locks
    assert not signs_in(guard, "bob", "bob-pass", address=attacker)
    assert signs_in(guard, "bob", "bob-pass", address="203.0.113.67")


def test_a_success_clears_the_user_names_failures(guard):
    for attempt in range(2):
        assert not signs_in(guard, "carol", f"guess-{attempt}", address=f"198.51.100.{attempt}")
    assert signs_in(guard, "carol", "carol-pass")
    for attempt in range(2):  # two more: with the first two still counted, the third would lock
        assert not signs_in(guard, "carol", f"again-{attempt}", address=f"198.51.100.{attempt}")
    assert signs_in(guard, "carol", "carol-pass")


# -- several app processes on one database --------------------------------------------------------
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request, tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'memory.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")


GUESSES_IN_ANOTHER_PROCESS = """
import sys
from app.auth import User, UserDirectory, hash_password
from app.login_guard import LoginGuard
from memory_db import MemoryStore

store = MemoryStore(sys.argv[1])
users = UserDirectory({"carol": User("carol", hash_password("carol-pass"))})
guard = LoginGuard(users, counts=store.login_failures())
refused = [not guard.check("carol", f"guess-{attempt}", "198.51.100.7") for attempt in range(5)]
print(sum(refused))
store.close()
"""


def test_wrong_passwords_tried_against_another_app_process_lock_the_user_name_here(database_url):
    store = MemoryStore(database_url)
    try:
        here = LoginGuard(USERS, counts=store.login_failures())
        assert here.check("carol", "wrong", "192.0.2.1") is False  # one failure counted here first
        other = subprocess.run([sys.executable, "-c", GUESSES_IN_ANOTHER_PROCESS, database_url], cwd=REPO,
                               capture_output=True, text=True, timeout=120)
        assert other.returncode == 0, other.stderr
        assert other.stdout.split() == ["5"]
        assert not here.check("carol", "carol-pass", "192.0.2.2")  # 6 failures over two processes: locked
        assert here.check("alice", "alice-pass", "198.51.100.7")
    finally:
        store.close()


def test_the_shared_counts_lapse_and_are_forgotten(database_url):
    store = MemoryStore(database_url)
    try:
        clock = Clock()
        counts = store.login_failures()
        throttle = LoginThrottle(free_failures=2, base_lock_s=30, max_lock_s=120, clock=clock, counts=counts)
        throttle.record_failure("user:carol")
        throttle.record_failure("user:carol")
        assert throttle.locked_for("user:carol") == 30
        assert LoginThrottle(free_failures=2, clock=clock, counts=store.login_failures()).locked_for("user:carol") == 30
        clock.now += 121  # a quiet spell longer than max_lock_s: as if there had been no failures
        assert throttle.locked_for("user:carol") == 0
        throttle.record_failure("user:carol")
        assert throttle.locked_for("user:carol") == 0  # counting afresh: one failure of two free
        clock.now += 121
        assert counts.forget_expired(clock.now) == 1 and counts.read("user:carol", 0.0) is None
    finally:
        store.close()


# -- the check off the event loop -----------------------------------------------------------------
class WatchedUsers(UserDirectory):
    """The real directory; each check first waits until the test lets it go on."""

    def __init__(self, users: UserDirectory) -> None:
        super().__init__(users.users)
        self.running = 0
        self.most_at_once = 0
        self.started = threading.Semaphore(0)
        self.go_on = threading.Event()
        self._lock = threading.Lock()

    def check(self, username: str, password: str) -> bool:
        with self._lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.started.release()
        try:
            if not self.go_on.wait(timeout=30):
                return False
            return super().check(username, password)
        finally:
            with self._lock:
                self.running -= 1


def test_password_checks_run_one_at_a_time_off_the_event_loop():
    users = WatchedUsers(USERS)
    guard = LoginGuard(users, checks_at_once=1)

    async def flood_then_let_go() -> list[bool]:
        token = CLIENT_ADDRESS.set("192.0.2.50")
        try:
            checks = [asyncio.create_task(guard.authenticate(name, f"{name}-pass")) for name in ("alice", "bob", "carol")]
        finally:
            CLIENT_ADDRESS.reset(token)
        # The first check is now blocked in its worker thread; were it on the loop, this would never run.
        assert await asyncio.to_thread(users.started.acquire, timeout=30)
        assert users.running == 1  # the other two wait for their turn, holding no thread
        users.go_on.set()
        return await asyncio.wait_for(asyncio.gather(*checks), timeout=60)

    # A loop of its own in a thread of its own: the browser tests' Playwright keeps a loop running in
    # the main thread, where asyncio.run refuses to start another.
    with ThreadPoolExecutor(1) as runner:
        assert runner.submit(asyncio.run, flood_then_let_go()).result(timeout=120) == [True, True, True]
    assert users.most_at_once == 1


class CheckOrder(UserDirectory):
    """The real directory; records whose sign-in each check is, and holds the first until let go."""

    def __init__(self, users: UserDirectory) -> None:
        super().__init__(users.users)
        self.order: list[str] = []
        self.first_started = threading.Event()
        self.go_on = threading.Event()

    def check(self, username: str, password: str) -> bool:
        self.order.append(username)
        if len(self.order) == 1:
            self.first_started.set()
            if not self.go_on.wait(timeout=30):
                return False
        return super().check(username, password)


def test_one_account_signing_in_over_and_over_delays_another_account_by_one_check_at_most():
    users = CheckOrder(USERS)
    guard = LoginGuard(users, checks_at_once=1)

    async def alice_floods_then_bob_signs_in() -> list[bool]:
        alice = [asyncio.create_task(guard.authenticate("alice", "alice-pass")) for _ in range(10)]
        assert await asyncio.to_thread(users.first_started.wait, 30)
        await anyio.wait_all_tasks_blocked()  # alice's other nine are waiting for their turn
        bob = asyncio.create_task(guard.authenticate("bob", "bob-pass"))
        await anyio.wait_all_tasks_blocked()
        users.go_on.set()
        return await asyncio.wait_for(asyncio.gather(*alice, bob), timeout=60)

    with ThreadPoolExecutor(1) as runner:  # a loop of its own, as in the test above
        assert runner.submit(asyncio.run, alice_floods_then_bob_signs_in()).result(timeout=120) == [True] * 11
    assert users.order == ["alice", "bob"] + ["alice"] * 9  # bob waited for alice's one check, not her ten
