"""`uda serve`: the HTTP service on one profile, with uvicorn.

Refuses to start without authentication (a keys file or a token secret) unless told to serve
anonymous callers `public` data only (`--insecure-public`): deny by default. The web stack is
imported only when the command runs, so the rest of the CLI works without the `http` extra.

Workers (`--workers`): one Python process answers one request's Python code at a time, so a
service of one process uses one core. With N workers, uvicorn runs N processes on one socket
(the kernel spreads connections over them) and restarts one that dies; each has its own
client, pools and model. Only a profile whose every store is `shared_across_processes` (the
server profile: PostgreSQL, ArcadeDB and Chroma servers, SQLite files) can be served so: an
in-process store (networkx, Chroma's PersistentClient, an embedded ArcadeDB) would be a stale,
diverging copy in each worker. `auto` (the default) is then the number of usable cores, and 1
otherwise (docs/adr/0030-service-workers.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uda.config import Profile, load_profile
from uda.embedding.base import SPINNING_ENV
from uda.errors import ConfigError, UDAError, UserError

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger(__name__)

WORKER_SETTINGS_ENV = "UDA_SERVE_WORKER_SETTINGS"
"""How `uda serve --workers N` hands its options to the worker processes uvicorn starts."""

EPILOG = """\
examples:
  uda serve --keys keys.toml                        API keys (hashed) from a TOML file
  UDA_TOKEN_SECRET=... uda serve --token-secret-env UDA_TOKEN_SECRET
  uda --path /data/uda serve --host 0.0.0.0 --port 8080 --keys keys.toml
  uda serve --insecure-public                       anonymous callers, public data only
  uda --profile server.toml serve --keys keys.toml --workers 4
                                                    4 processes (server profile only)

keys file:
  [[keys]]
  name = "analyst"
  sha256 = "<hex SHA-256 of the key>"   # uda.http.hash_api_key(key); never the key itself
  clearance = ["internal", "project:core"]
  can_write = false
"""


def add_serve_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the `serve` command to the `uda` command's subparsers."""
    serve: argparse.ArgumentParser = commands.add_parser(
        "serve",
        help="serve search over HTTP (JSON and Arrow), with authenticated clearance",
        description="Serve /v1/search, /v1/ingest, /v1/elements, /v1/ontology, /v1/explain, "
        "/healthz, /readyz and /metrics on one profile. Each caller's clearance comes from "
        "their API key or bearer token; a request can only narrow it.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    serve.add_argument(
        "--keys", type=Path, default=None, metavar="FILE", help="a TOML file of hashed API keys"
    )
    serve.add_argument(
        "--token-secret-env",
        default=None,
        metavar="NAME",
        help="accept HS256 bearer tokens signed with the secret in environment variable NAME",
    )
    serve.add_argument("--token-audience", default=None, help="the `aud` claim tokens must carry")
    serve.add_argument(
        "--insecure-public",
        action="store_true",
        help="also serve callers without credentials, with public clearance only",
    )
    serve.add_argument(
        "--max-body-bytes", type=int, default=1 << 20, help="larger request bodies get 413"
    )
    serve.add_argument(
        "--workers",
        default="auto",
        metavar="N",
        help="processes answering requests (default: auto = the usable cores when every store "
        "of the profile is a server or a SQLite file, else 1; in-process stores such as the "
        "embedded profile's Chroma and networkx allow 1 only)",
    )
    serve.add_argument(
        "--log-level",
        choices=["critical", "error", "warning", "info", "debug"],
        default="info",
    )
    return serve


@dataclass(frozen=True)
class ServeSettings:
    """What every worker needs to build the same service: plain values, passed as JSON."""

    profile: str | None
    path: str | None
    keys: str | None
    token_secret_env: str | None
    token_audience: str | None
    insecure_public: bool
    max_body_bytes: int

    @classmethod
    def of(cls, args: argparse.Namespace) -> ServeSettings:
        """The settings of `uda serve`'s parsed options."""

        def text(value: Any) -> str | None:
            return None if value is None else str(value)

        return cls(
            profile=text(args.profile),
            path=text(args.path or (None if args.profile else os.environ.get("UDA_PATH"))),
            keys=text(args.keys),
            token_secret_env=args.token_secret_env,
            token_audience=args.token_audience,
            insecure_public=bool(args.insecure_public),
            max_body_bytes=int(args.max_body_bytes),
        )

    def load_profile(self) -> Profile:
        """The profile served (the embedded one under `path`, or `./.uda`, by default)."""
        if self.profile is not None:
            return load_profile(Path(self.profile), path=self.path)
        return load_profile(path=self.path or ".uda")

    def authenticator(self) -> Any:
        """Who may call, from the keys file and the token secret's variable."""
        from uda.http.auth import Authenticator, load_api_keys

        keys = load_api_keys(Path(self.keys)) if self.keys is not None else ()
        secret: str | None = None
        if self.token_secret_env is not None:
            secret = os.environ.get(self.token_secret_env)
            if not secret:
                raise ConfigError(
                    f"--token-secret-env {self.token_secret_env}: that environment variable "
                    "is not set",
                    field="--token-secret-env",
                    value=self.token_secret_env,
                )
        auth = Authenticator(
            api_keys=keys,
            token_secret=secret,
            token_audience=self.token_audience,
            allow_anonymous=self.insecure_public,
        )
        if not auth.configured and not self.insecure_public:
            raise ConfigError(
                "no authentication configured: give --keys FILE and/or --token-secret-env NAME "
                "(or --insecure-public to serve public data to anyone)",
                field="--keys",
            )
        return auth

    def app(self) -> FastAPI:
        """The service over a client of its own (opened by the app's lifespan)."""
        import uda
        from uda.http.app import create_app

        client = uda.AsyncClient(self.load_profile())
        return create_app(
            client,
            self.authenticator(),
            max_body_bytes=self.max_body_bytes,
            owns_client=True,
            freeze_start_up_heap=True,
        )


def in_process_stores(profile: Profile) -> list[str]:
    """The profile's stores that live in one process's memory (no connection is made)."""
    from connectors.registry import connector_class

    stores = [connector_class(s.name)(**dict(s.options)) for s in profile.connectors]
    return [store.name for store in stores if not store.shared_across_processes]


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, else every core)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def worker_count(asked: str, profile: Profile) -> int:
    """How many processes serve `profile`: `asked` (`auto` or a number), checked.

    Raises:
        ConfigError: naming `--workers`: not `auto` or a number from 1 to 64, or more than
            one for a profile with an in-process store.
    """
    local = in_process_stores(profile)
    if asked == "auto":
        if local and usable_cores() > 1:
            log.info(
                "serving with 1 worker: %s keep their data in this process's memory (a "
                "server profile can use every core)",
                ", ".join(local),
            )
        return 1 if local else usable_cores()
    count = int(asked) if asked.isdigit() else 0
    if not 1 <= count <= 64:
        raise ConfigError(
            f"--workers {asked}: give auto or a number of processes from 1 to 64",
            field="--workers",
            value=asked,
        )
    if count > 1 and local:
        raise ConfigError(
            f"--workers {count}: this profile's {', '.join(local)} keep their data in one "
            "process's memory, so only one process can serve it. Serve the server profile "
            "(`uda services up`, then `uda --profile .uda/services/server.toml serve ...`) "
            "to use more workers, or give --workers 1",
            field="--workers",
            value=asked,
        )
    return count


def run_serve(args: argparse.Namespace) -> int:
    """Run the service until interrupted; returns the exit code.

    Raises:
        UserError: bad options, keys file or profile (the CLI prints it and exits 2).
    """
    if args.max_body_bytes < 1 or not 0 <= args.port <= 65535:
        raise ConfigError("--port must be 0-65535 and --max-body-bytes positive", field="--port")
    try:
        import fastapi  # noqa: F401  # pyright: ignore[reportUnusedImport] - installed?
        import uvicorn
    except ImportError as exc:
        raise ConfigError(
            f"`uda serve` needs the http extra ({exc.name} is missing): "
            "pip install 'uda-query[http]'",
            field="serve",
        ) from None

    settings = ServeSettings.of(args)
    settings.authenticator()  # bad keys or an unset secret fail here, once, with exit 2
    profile = settings.load_profile()
    workers = worker_count(str(args.workers), profile)
    # Requests run side by side: a model's idle threads must not spin on the cores they need.
    os.environ.setdefault(SPINNING_ENV, "0")
    common: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_level": args.log_level,
        "server_header": False,  # the software and its version are nobody's business
    }
    if workers == 1:
        uvicorn.run(settings.app(), **common)
        return 0
    _check_before_forking(profile)
    os.environ[WORKER_SETTINGS_ENV] = json.dumps(asdict(settings))
    # The cores are shared out: N workers each running a model on every core would fight.
    os.environ.setdefault("UDA_EMBED_THREADS", str(max(1, usable_cores() // workers)))
    uvicorn.run("uda.http.serve:worker_app", factory=True, workers=workers, **common)
    return 0


def _check_before_forking(profile: Profile) -> None:
    """Open the client once, before the workers start.

    A wrong model or a missing system of record is then one clear error (exit 2 or 3), not N
    workers failing and being restarted over and over.
    """
    import asyncio

    import uda

    async def check() -> None:
        async with uda.AsyncClient(profile):
            pass

    asyncio.run(check())


def worker_app() -> FastAPI:
    """The app of one worker of `uda serve --workers N` (uvicorn calls it in each process)."""
    raw = os.environ.get(WORKER_SETTINGS_ENV)
    if raw is None:
        raise ConfigError(
            f"{WORKER_SETTINGS_ENV} is not set: worker_app is started by `uda serve --workers`",
            field=WORKER_SETTINGS_ENV,
        )
    return ServeSettings(**json.loads(raw)).app()


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m uda.http.serve [--path P | --profile F] serve ...` (what `uda serve` runs)."""
    parser = argparse.ArgumentParser(prog="uda")
    parser.add_argument("--path", type=Path, default=None)
    parser.add_argument("--profile", type=Path, default=None)
    add_serve_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return run_serve(args)
    except UserError as exc:
        print(f"uda: error: {exc}", file=sys.stderr)
        return 2
    except UDAError as exc:
        print(f"uda: error: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
