from __future__ import annotations

import io
import sys

from app.auth import verify_password
from app.cli import main


def test_refuses_a_public_host_without_logins(capsys):
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "--auth users.toml" in capsys.readouterr().err


def test_a_broken_users_file_stops_the_start(tmp_path, capsys):
    bad = tmp_path / "users.toml"
    bad.write_text('[users.a]\npassword = "plain"\n')
    assert main(["--host", "0.0.0.0", "--auth", str(bad)]) == 2
    assert "never the plain password" in capsys.readouterr().err


def test_hash_password_prints_a_verifiable_hash(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("correct horse\n"))
    assert main(["hash-password", "--stdin"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("scrypt$") and verify_password("correct horse", printed)


def test_a_busy_port_is_named_with_the_option_that_picks_another(monkeypatch, capsys):
    import socket

    import app.ui

    def no_runtime(*args, **kwargs):
        raise AssertionError("the runtime is not built when the port is taken")

    monkeypatch.setattr(app.ui, "build_runtime", no_runtime)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"Port {port} on 127.0.0.1 is already in use" in err and "--port" in err and "Traceback" not in err
