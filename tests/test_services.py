"""`uda services up | status | down` and the server profile, end to end on real servers."""

from __future__ import annotations

import json
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.registry import BUILTIN
from uda.cli.commands import EXIT_DIFFERENCES, EXIT_OK, main
from uda.embedding import Embedder
from uda.services import manage
from uda.services.base import ServiceInfo


@pytest.fixture(scope="module")
def services_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("services")
    yield root
    main(["services", "down", "--root", str(root), "--purge"])


def test_services_up_search_status_down(
    services_root: Path,
    tmp_path: Path,
    embedder: Embedder,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = services_root
    assert main(["services", "up", "--root", str(root)]) == EXIT_OK
    first = capsys.readouterr().out
    assert "postgres: running on 127.0.0.1:" in first
    assert "arcadedb: running on 127.0.0.1:" in first
    profile = root / "server.toml"
    assert stat.S_IMODE(profile.stat().st_mode) == 0o600  # it holds credentials
    # Idempotent: the same servers, the same ports.
    assert main(["services", "up", "--root", str(root)]) == EXIT_OK
    assert capsys.readouterr().out.splitlines()[:2] == first.splitlines()[:2]

    docs = tmp_path / "handbook"
    (docs / "docs" / "adr").mkdir(parents=True)
    (docs / "README.md").write_text(
        "---\nsensitivity: public\n---\n# Handbook\n\nDeploys happen on Tuesdays. See ADR-1.\n"
    )
    (docs / "docs" / "adr" / "0001-deploy-day.md").write_text(
        "# 1. Deploy on Tuesdays\n\nDate: 2025-02-01\n\n## Status\n\nAccepted\n\n"
        "## Decision\n\nWe deploy on Tuesdays so fixes land before the weekend.\n"
    )
    server = ["--profile", str(profile)]
    assert main([*server, "ingest", str(docs)]) == EXIT_OK
    assert "3 elements written" in capsys.readouterr().out
    assert main([*server, "search", "when do we deploy?", "--format", "json"]) == EXIT_OK
    results = json.loads(capsys.readouterr().out)["results"]
    assert {r["element_id"] for r in results} == {
        "handbook:README.md",
        "handbook:docs/adr/0001-deploy-day.md",
    }
    readme = next(r for r in results if r["element_type"] == "Document")
    assert any(n["relation"] == "governedBy" for n in readme["context_nodes"])  # ArcadeDB
    assert (
        main([*server, "search", "when do we deploy?", "--clearance", "public", "--format", "json"])
        == EXIT_OK
    )
    public = json.loads(capsys.readouterr().out)["results"]
    assert [r["element_id"] for r in public] == ["handbook:README.md"]
    assert public[0]["context_nodes"] == [
        n for n in public[0]["context_nodes"] if n["relation"] != "governedBy"
    ]
    assert main([*server, "check"]) == EXIT_OK
    capsys.readouterr()

    assert main(["services", "status", "--root", str(root)]) == EXIT_OK
    assert main(["services", "down", "--root", str(root)]) == EXIT_OK
    assert main(["services", "status", "--root", str(root)]) == EXIT_DIFFERENCES
    assert "stopped" in capsys.readouterr().out
    # Data survives a restart.
    assert main(["services", "up", "--root", str(root)]) == EXIT_OK
    assert main([*server, "stats"]) == EXIT_OK
    assert "  elements: 3" in capsys.readouterr().out
    # --purge: stopped, data and profile gone (a relocated PostgreSQL data folder included).
    relocated = json.loads((root / "postgres" / "service.json").read_text()).get("base_dir")
    assert main(["services", "down", "--root", str(root), "--purge"]) == EXIT_OK
    assert "stopped and deleted: postgres, arcadedb" in capsys.readouterr().out
    assert not profile.exists()
    assert not (root / "postgres").exists()
    assert not (root / "arcadedb").exists()
    assert relocated is None or not Path(relocated).exists()


# -- the registry and the profile, without servers ---------------------------------------
def _infos() -> dict[str, ServiceInfo]:
    # Values that need escaping (TOML) and quoting (the DSN), and one info with no login.
    return {
        "chroma": ServiceInfo(name="chroma", host="127.0.0.1", port=8003, pid=3),
        "arcadedb": ServiceInfo(
            name="arcadedb",
            host="127.0.0.1",
            port=2480,
            pid=2,
            password='a"b\\c',  # noqa: S106
        ),
        "postgres": ServiceInfo(
            name="postgres",
            host="127.0.0.1",
            port=5433,
            pid=1,
            user="uda",
            password="p@ss/w:rd",  # noqa: S106
            database="uda",
        ),
    }


def test_the_profile_lists_each_running_service_as_its_connector_in_a_fixed_order() -> None:
    assert manage.profile_text(_infos()) == (
        "# Written by `uda services up`; holds credentials: keep it private.\n"
        "[uda]\n"
        'profile = "server"\n'
        "\n"
        "[[connectors]]\n"
        'name = "postgres"\n'
        'dsn = "postgresql://uda:p%40ss%2Fw%3Ard@127.0.0.1:5433/uda"\n'
        "\n"
        "[[connectors]]\n"
        'name = "arcadedb-graph"\n'
        'url = "http://127.0.0.1:2480"\n'
        'database = "uda"\n'
        'user = "root"\n'
        'password = "a\\"b\\\\c"\n'
        "\n"
        "[[connectors]]\n"
        'name = "chroma"\n'
        'host = "127.0.0.1"\n'
        "port = 8003\n"
    )
    profile = tomllib.loads(manage.profile_text(_infos()))
    assert [c["name"] for c in profile["connectors"]] == ["postgres", "arcadedb-graph", "chroma"]
    assert profile["connectors"][1]["password"] == 'a"b\\c'  # noqa: S105
    only_chroma = {"chroma": _infos()["chroma"]}
    assert [c["name"] for c in tomllib.loads(manage.profile_text(only_chroma))["connectors"]] == [
        "chroma"
    ]


def test_every_service_declares_how_it_is_managed(tmp_path: Path) -> None:
    names = [cls.name for cls in manage.SERVICES]
    assert names == ["postgres", "arcadedb", "chroma"]  # the order `down` reports them in
    assert manage.DEFAULT == ("postgres", "arcadedb")
    for name in names:
        managed = manage.service(name, tmp_path)
        assert managed.name == name
        assert managed.home == tmp_path / name
    for cls in manage.SERVICES:
        assert isinstance(cls.started_by_default, bool), cls
        assert cls.connector in BUILTIN, cls  # a connector the server profile can load
        options = cls.connector_options(_infos()[cls.name])
        assert options, cls
        assert "name" not in options, cls  # the connector's name is `connector`
    with pytest.raises(KeyError):
        manage.service("mysql", tmp_path)
