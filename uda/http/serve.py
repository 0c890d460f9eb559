"""`uda serve`: the HTTP service on one profile, with uvicorn.

Refuses to start without authentication (a keys file or a token secret) unless told to serve
anonymous callers `public` data only (`--insecure-public`): deny by default. The web stack is
imported only when the command runs, so the rest of the CLI works without the `http` extra.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from uda.errors import ConfigError, UDAError, UserError

EPILOG = """\
examples:
  uda serve --keys keys.toml                        API keys (hashed) from a TOML file
  UDA_TOKEN_SECRET=... uda serve --token-secret-env UDA_TOKEN_SECRET
  uda --path /data/uda serve --host 0.0.0.0 --port 8080 --keys keys.toml
  uda serve --insecure-public                       anonymous callers, public data only

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
        "--log-level",
        choices=["critical", "error", "warning", "info", "debug"],
        default="info",
    )
    return serve


def _authenticator(args: argparse.Namespace) -> Any:
    from uda.http.auth import Authenticator, load_api_keys

    keys = load_api_keys(args.keys) if args.keys is not None else ()
    secret: str | None = None
    if args.token_secret_env is not None:
        secret = os.environ.get(args.token_secret_env)
        if not secret:
            raise ConfigError(
                f"--token-secret-env {args.token_secret_env}: that environment variable is not set",
                field="--token-secret-env",
                value=args.token_secret_env,
            )
    auth = Authenticator(
        api_keys=keys,
        token_secret=secret,
        token_audience=args.token_audience,
        allow_anonymous=args.insecure_public,
    )
    if not auth.configured and not args.insecure_public:
        raise ConfigError(
            "no authentication configured: give --keys FILE and/or --token-secret-env NAME "
            "(or --insecure-public to serve public data to anyone)",
            field="--keys",
        )
    return auth


def run_serve(args: argparse.Namespace) -> int:
    """Run the service until interrupted; returns the exit code.

    Raises:
        UserError: bad options, keys file or profile (the CLI prints it and exits 2).
    """
    if args.max_body_bytes < 1 or not 0 <= args.port <= 65535:
        raise ConfigError("--port must be 0-65535 and --max-body-bytes positive", field="--port")
    try:
        import uvicorn

        from uda.http.app import create_app
    except ImportError as exc:
        raise ConfigError(
            f"`uda serve` needs the http extra ({exc.name} is missing): "
            "pip install 'uda-query[http]'",
            field="serve",
        ) from None
    import uda

    auth = _authenticator(args)
    if args.profile is not None:
        client = uda.aconnect(Path(args.profile), path=args.path)
    else:
        client = uda.aconnect(path=args.path or os.environ.get("UDA_PATH") or ".uda")
    app = create_app(client, auth, max_body_bytes=args.max_body_bytes, owns_client=True)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        server_header=False,  # the software and its version are nobody's business
    )
    return 0


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
