"""`uda embed-server`: the packaged model (or another local one) as an HTTP embeddings service.

The web stack is imported only when the command runs, so the rest of the CLI works without
the `http` extra.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from uda.errors import ConfigError

DEFAULT_PORT = 8081
PACKAGED_MODEL_NAME = "all-MiniLM-L6-v2"

EPILOG = f"""\
examples:
  uda embed-server                                  the packaged MiniLM on 127.0.0.1:{DEFAULT_PORT}
  EMBED_KEY=... uda embed-server --api-key-env EMBED_KEY --host 0.0.0.0
  uda embed-server --model-path ./my-model --model-name my-model

then, in each UDA profile that should use it:
  [uda]
  embedder = "openai-compatible"

  [embedder]
  url = "http://127.0.0.1:{DEFAULT_PORT}/v1"
  model = "{PACKAGED_MODEL_NAME}"
  api_key_env = "EMBED_KEY"        # only if the server was given a key
  fingerprint = "<printed at start>"   # keeps stores embedded locally valid

any OpenAI-style client works too:
  curl -s http://127.0.0.1:{DEFAULT_PORT}/v1/embeddings -H 'content-type: application/json' \\
    -d '{{"model": "{PACKAGED_MODEL_NAME}", "input": ["payment retries"]}}'
"""


def add_embed_server_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the `embed-server` command to the `uda` command's subparsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "embed-server",
        help="serve the embedding model over HTTP (OpenAI's embeddings API), for many clients",
        description="Serve one embedding model at POST /v1/embeddings in OpenAI's wire format "
        "(also GET /v1/models, /healthz, /metrics), so that several UDA processes share one "
        'loaded model through `[uda] embedder = "openai-compatible"`. The vectors are the '
        'local ONNX runtime\'s: equal to what `embedder = "onnx"` computes in process.',
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (default: 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--api-key-env",
        default=None,
        metavar="NAME",
        help="require `Authorization: Bearer <key>`, the key read from environment variable "
        "NAME (the key itself never goes on the command line)",
    )
    parser.add_argument(
        "--model-path",
        type=Path,
        default=None,
        metavar="DIR",
        help="a local sentence-transformers folder (default: the packaged all-MiniLM-L6-v2)",
    )
    parser.add_argument(
        "--model-name",
        default=None,
        metavar="NAME",
        help="the `model` clients send (default: all-MiniLM-L6-v2, or the folder's name)",
    )
    parser.add_argument(
        "--log-level",
        choices=["critical", "error", "warning", "info", "debug"],
        default="info",
    )
    return parser


def run_embed_server(args: argparse.Namespace) -> int:
    """Serve until interrupted; returns the exit code.

    Raises:
        ConfigError: a bad option, an unset key variable, or the http extra missing.
    """
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port}: give 0-65535", field="--port", value=args.port)
    api_key: str | None = None
    if args.api_key_env is not None:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise ConfigError(
                f"--api-key-env {args.api_key_env}: that environment variable is not set",
                field="--api-key-env",
                value=args.api_key_env,
            )
    model_path = str(args.model_path) if args.model_path is not None else None
    if model_path is not None and not Path(model_path, "tokenizer.json").is_file():
        raise ConfigError(
            f"--model-path {model_path}: not a sentence-transformers folder (no tokenizer.json)",
            field="--model-path",
            value=model_path,
        )
    try:
        import uvicorn

        from uda.embedding.server import create_embedding_app
    except ImportError as exc:
        raise ConfigError(
            f"`uda embed-server` needs the http extra ({exc.name} is missing): "
            "pip install 'uda-query[http]'",
            field="embed-server",
        ) from None
    from uda.embedding.onnx import OnnxEmbedder

    embedder = OnnxEmbedder(model_path)
    name = args.model_name or (
        Path(model_path).name if model_path is not None else PACKAGED_MODEL_NAME
    )
    app = create_embedding_app(
        embedder,
        model_name=name,
        api_key=api_key,
        count_tokens=_token_counter(embedder.model_path),
    )
    _announce(args, name, embedder.fingerprint, keyed=api_key is not None)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, server_header=False)
    return 0


def _token_counter(model_path: str) -> Callable[[Sequence[str]], int]:
    """The model's own token count of some texts (for `usage`), before any truncation."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(model_path, "tokenizer.json")))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count(texts: Sequence[str]) -> int:
        return sum(len(encoding.ids) for encoding in tokenizer.encode_batch(list(texts)))

    return count


def _announce(args: argparse.Namespace, name: str, fingerprint: str, *, keyed: bool) -> None:
    """What a client's profile needs, printed before the model loads."""
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"uda embed-server: serving {name} at http://{host}:{args.port}/v1 "
        f'(fingerprint {fingerprint}); in a profile: [uda] embedder = "openai-compatible", '
        f'[embedder] url = "http://{host}:{args.port}/v1", model = "{name}", '
        f'fingerprint = "{fingerprint}"' + (', api_key_env = "<NAME>"' if keyed else ""),
        file=sys.stderr,
        flush=True,
    )
    if not keyed and not _loopback(args.host):
        print(
            f"uda embed-server: warning: {args.host} is reachable from other machines and no "
            "--api-key-env was given: anyone who reaches it can use it",
            file=sys.stderr,
            flush=True,
        )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["add_embed_server_parser", "run_embed_server"]
