from __future__ import annotations

import pytest

from app.auth import AuthError, User, UserDirectory, hash_password, verify_password


def test_hashes_are_salted_and_verify():
    first, second = hash_password("s3cret"), hash_password("s3cret")
    assert first != second and "s3cret" not in first
    assert verify_password("s3cret", first) and verify_password("s3cret", second)
    assert not verify_password("S3cret", first)
    assert not verify_password("s3cret", "plain-text")


def test_users_file_loads_and_checks(tmp_path):
    path = tmp_path / "users.toml"
    path.write_text(
        f'[users.alice]\npassword = "{hash_password("a")}"\n\n[users.root]\npassword = "{hash_password("r")}"\nadmin = true\n'
    )
    users = UserDirectory.load(path)
    assert users.check("alice", "a") and not users.check("alice", "r") and not users.check("mallory", "a")
    assert users.is_admin("root") and not users.is_admin("alice") and not users.is_admin(None)


@pytest.mark.parametrize(
    "text, message",
    [
        ('[users.alice]\npassword = "hunter2"\n', "never the plain password"),
        ("[users]\n", "at least one"),
        ('[users."bad name"]\npassword = "scrypt$x"\n', "may only use"),
        ("not toml [", "not valid TOML"),
    ],
)
def test_bad_users_files_say_what_to_fix(tmp_path, text, message):
    path = tmp_path / "users.toml"
    path.write_text(text)
    with pytest.raises(AuthError, match=message):
        UserDirectory.load(path)
    with pytest.raises(AuthError, match="no such file"):
        UserDirectory.load(tmp_path / "missing.toml")


def test_an_unknown_user_takes_as_long_to_refuse_as_a_wrong_password():
    import statistics
    import time

    directory = UserDirectory({"alice": User("alice", hash_password("alice-pass"))})
    directory.check("nobody", "x")  # the stand-in hash is made on first use

    def median_seconds(user: str) -> float:
        times = []
        for _ in range(7):
            started = time.perf_counter()
            assert not directory.check(user, "wrong")
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    known, unknown = median_seconds("alice"), median_seconds("nobody")
    assert 0.5 < unknown / known < 2.0, (known, unknown)  # it was about 1/29 before
