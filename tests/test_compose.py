"""compose/: the files validate against the Compose specification and follow the rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from connectors.registry import BUILTIN
from uda.config import load_profile
from uda.errors import ConfigError

COMPOSE = Path(__file__).resolve().parent.parent / "compose"


def test_compose_file_validates_against_the_compose_spec() -> None:
    checker = Path(sys.executable).with_name("check-jsonschema")
    result = subprocess.run(  # noqa: S603 - the project's own dev tool
        [str(checker), "--builtin-schema", "vendor.compose-spec", str(COMPOSE / "compose.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_services_are_pinned_healthy_persistent_and_local() -> None:
    spec = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    assert set(spec["services"]) == {"postgres", "arcadedb", "chroma"}
    for name, service in spec["services"].items():
        image = service["image"]
        assert ":" in image, f"{name}: image is not pinned"
        assert not image.endswith(":latest"), f"{name}: image is pinned to latest"
        assert "healthcheck" in service, f"{name}: no health check"
        assert any(str(v).split(":")[0] in spec["volumes"] for v in service["volumes"]), name
        for port in service["ports"]:
            assert str(port).startswith("127.0.0.1:"), f"{name}: {port} is not loopback"


def test_compose_profile_reads_passwords_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("UDA_PG_PASSWORD", raising=False)
    with pytest.raises(ConfigError, match="UDA_PG_PASSWORD"):
        load_profile(COMPOSE / "uda-server.toml")
    monkeypatch.setenv("UDA_PG_PASSWORD", "pg-secret")
    monkeypatch.setenv("UDA_ARCADEDB_PASSWORD", "arcade-secret")
    profile = load_profile(COMPOSE / "uda-server.toml")
    names = [spec.name for spec in profile.connectors]
    assert names == ["postgres", "arcadedb-graph"]
    assert all(name in BUILTIN for name in names)
    assert "pg-secret" in profile.connectors[0].options["dsn"]
    assert profile.connectors[1].options["password"] == "arcade-secret"  # noqa: S105


def test_the_replicated_override_validates_and_follows_the_rules() -> None:
    checker = Path(sys.executable).with_name("check-jsonschema")
    override = COMPOSE / "compose.replicated.yaml"
    result = subprocess.run(  # noqa: S603 - the project's own dev tool
        [str(checker), "--builtin-schema", "vendor.compose-spec", str(override)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    spec = yaml.safe_load(override.read_text())
    base = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    assert set(spec["services"]) == {"postgres", "standby1", "standby2"}
    for name in ("standby1", "standby2"):
        service = spec["services"][name]
        assert service["image"] == base["services"]["postgres"]["image"], name
        assert "healthcheck" in service, name
        assert all(str(p).startswith("127.0.0.1:") for p in service["ports"]), name
        assert f"application_name={name}" in service["entrypoint"][-1], name
    primary = " ".join(spec["services"]["postgres"]["command"])
    assert "synchronous_standby_names=ANY 1 (standby1, standby2)" in primary
    assert (COMPOSE / "postgres-init" / "10-replication.sh").stat().st_mode & 0o111


def test_the_replicated_profile_lists_every_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UDA_PG_PASSWORD", "pg-secret")
    monkeypatch.setenv("UDA_ARCADEDB_PASSWORD", "arcade-secret")
    profile = load_profile(COMPOSE / "uda-replicated.toml")
    postgres = profile.connectors[0].options
    assert postgres["dsn"].endswith("/uda?target_session_attrs=read-write")
    assert "127.0.0.1:5432,127.0.0.1:5433,127.0.0.1:5434" in postgres["dsn"]
    assert [d.rsplit("@", 1)[1] for d in postgres["standbys"]] == [
        "127.0.0.1:5433/uda",
        "127.0.0.1:5434/uda",
    ]
    assert all("pg-secret" in d for d in postgres["standbys"])
