"""The `memwarden` command: up (embedded stack), worker and api (production), token, mcp (stdio), import, audit."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from memwarden.config import Settings
from memwarden.identity import Role, mint_token
from worker import event_loop


def _settings(args: argparse.Namespace, **extra: object) -> Settings:
    overrides: dict[str, object] = dict(extra)
    if getattr(args, "data_dir", None):
        overrides["data_dir"] = Path(args.data_dir)
    return Settings(**overrides)  # type: ignore[arg-type]


def cmd_up(args: argparse.Namespace) -> int:
    from stack.devserver import DevServerError
    from stack.embedded import StackError, up

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = _settings(
        args,
        api_port=args.port,
        api_host=args.host,
        temporal_address=f"127.0.0.1:{args.temporal_port}",
        temporal_ui_port=args.ui_port,
    )
    try:
        event_loop.run(up(settings, temporal_port=args.temporal_port, ui_port=args.ui_port, headless=args.headless))
    except (StackError, DevServerError) as exc:
        print(f"memwarden up: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from worker.main import run_worker

    event_loop.run(run_worker(_settings(args)))
    return 0


def cmd_api(args: argparse.Namespace) -> int:
    import uvicorn

    from api.app import create_app
    from memwarden import telemetry

    class GracefulServer(uvicorn.Server):
        """uvicorn that exits 0 after a SIGTERM/SIGINT drain, like the worker (uvicorn re-raises the signal)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    settings = _settings(args, api_port=args.port, api_host=args.host)
    telemetry.setup(settings)
    config = uvicorn.Config(
        create_app(settings),
        host=settings.api_host,
        port=settings.api_port,
        log_level="warning",
        access_log=False,
        proxy_headers=True,
        forwarded_allow_ips=settings.trusted_proxies,  # X-Forwarded-* from anyone else is ignored
    )
    server = GracefulServer(config)
    server.run()
    return 0 if server.started else 1


def cmd_token(args: argparse.Namespace) -> int:
    settings = _settings(args)
    try:
        token = mint_token(
            settings.auth_secret_value,
            tenant=args.tenant,
            sub=args.sub,
            role=Role(args.role),
            agent=args.agent,
            on_behalf_of=args.on_behalf_of,
            stores=args.store or [],
            moderates=args.moderates or [],
            ttl_seconds=args.ttl or settings.token_ttl_seconds,
            issuer=settings.auth_issuer,
            audience=settings.auth_audience,
            max_ttl_seconds=settings.token_max_ttl_seconds,
        )
    except ValueError as exc:
        print(f"memwarden token: {exc}", file=sys.stderr)
        return 2
    print(token)
    return 0


MCP_EXTRA_MISSING = "memwarden mcp: the mcp extra is not installed: pip install 'memwarden[mcp]'"


def env_or_file_token(token_file: str | None) -> str | None:
    """A client command's bearer token: --token-file, else MEMWARDEN_TOKEN; never argv (ps shows it)."""
    if token_file:
        return Path(token_file).read_text(encoding="utf-8").strip() or None
    return os.environ.get("MEMWARDEN_TOKEN", "").strip() or None


def bearer_token(command: str, token_file: str | None) -> str | None:
    """`env_or_file_token`, or None after saying on stderr why there is none (the caller exits 2)."""
    try:
        token = env_or_file_token(token_file)
    except OSError as exc:
        print(f"memwarden {command}: cannot read --token-file ({exc.strerror})", file=sys.stderr)
        return None
    if token is None:
        print(f"memwarden {command}: no token: set MEMWARDEN_TOKEN or pass --token-file", file=sys.stderr)
    return token


def add_token_file(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--token-file", help="a file holding the bearer token (default: MEMWARDEN_TOKEN)")


def cmd_mcp(args: argparse.Namespace) -> int:
    """memwarden's MCP server over stdio for a desktop agent: its tools call the API at --url as one principal."""
    try:
        import anyio

        from memwarden.integrations.mcp import stdio_server
    except ImportError:
        print(MCP_EXTRA_MISSING, file=sys.stderr)
        return 2
    token = bearer_token("mcp", args.token_file)
    if token is None:
        return 2
    anyio.run(stdio_server(args.url, token).run_stdio_async)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from stack.audit_cli import audit_pseudonym, audit_pubkey, audit_show, audit_verify

    settings = _settings(args)
    if args.audit_command == "pseudonym":
        return audit_pseudonym(settings, args.tenant, args.value)
    if args.audit_command == "verify":
        return asyncio.run(audit_verify(settings, as_json=args.json))
    if args.audit_command == "show":
        return asyncio.run(audit_show(settings, args.memory_id, tenant=args.tenant, as_json=args.json))
    return audit_pubkey(settings)


def cmd_import(args: argparse.Namespace) -> int:
    from stack.import_cli import run_import

    if args.argv_token is not None:
        print(
            "memwarden import: --token is refused (a token on the command line is visible in ps): "
            "set MEMWARDEN_TOKEN or pass --token-file",
            file=sys.stderr,
        )
        return 2
    token = bearer_token("import", args.token_file)
    if token is None:
        return 2
    return run_import(Path(args.file), args.url, token)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="memwarden", description="A governed memory service for AI agents.")
    sub = root.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="the whole service on the embedded default")
    up.add_argument("--data-dir", default=os.environ.get("MEMWARDEN_DATA_DIR", ".memwarden"))
    up.add_argument("--port", type=int, default=8080)
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--temporal-port", type=int, default=7233)
    up.add_argument("--ui-port", type=int, default=8233)
    up.add_argument("--headless", action="store_true", help="no Temporal Web UI")
    up.set_defaults(func=cmd_up)

    worker = sub.add_parser("worker", help="the worker process (configured by environment)")
    worker.add_argument("--data-dir", default=None)
    worker.set_defaults(func=cmd_worker)

    api = sub.add_parser("api", help="the API process (configured by environment)")
    api.add_argument("--data-dir", default=None)
    api.add_argument("--port", type=int, default=int(os.environ.get("MEMWARDEN_API_PORT", "8080")))
    api.add_argument("--host", default=os.environ.get("MEMWARDEN_API_HOST", "0.0.0.0"))
    api.set_defaults(func=cmd_api)

    token = sub.add_parser("token", help="mint a bearer token signed with the server's secret")
    token.add_argument("--tenant", required=True)
    token.add_argument("--sub", required=True)
    token.add_argument("--role", required=True, choices=[r.value for r in Role])
    token.add_argument("--agent")
    token.add_argument("--on-behalf-of", dest="on_behalf_of")
    token.add_argument("--store", action="append")
    token.add_argument("--moderates", action="append", help="a shared store whose pending writes it settles")
    token.add_argument("--ttl", type=int)
    token.add_argument("--data-dir", default=os.environ.get("MEMWARDEN_DATA_DIR"))
    token.set_defaults(func=cmd_token)

    imp = sub.add_parser(
        "import",
        help="bulk-import an NDJSON file of candidates or conversations through the write gate",
        allow_abbrev=False,  # as for mcp: nothing is read as --token-file but --token-file itself
    )
    imp.add_argument(
        "file",
        help="one per line: a candidate (the body of POST /v1/memories) or a conversation (of /v1/conversations)",
    )
    imp.add_argument(
        "--url", default=os.environ.get("MEMWARDEN_URL", "http://127.0.0.1:8080"), help="the API (MEMWARDEN_URL)"
    )
    add_token_file(imp)
    # Accepted only to be refused with a reason: a token in argv is visible to every user of the machine.
    imp.add_argument("--token", dest="argv_token", help=argparse.SUPPRESS)
    imp.set_defaults(func=cmd_import)

    mcp = sub.add_parser(
        "mcp",
        help="memwarden's MCP server over stdio (desktop agents), as one token's principal",
        allow_abbrev=False,  # `--token x` must be refused, not read as --token-file: a token never goes in argv
    )
    mcp.add_argument(
        "--url", default=os.environ.get("MEMWARDEN_URL", "http://127.0.0.1:8080"), help="the API (MEMWARDEN_URL)"
    )
    add_token_file(mcp)
    mcp.set_defaults(func=cmd_mcp)

    audit = sub.add_parser("audit", help="verify the audit chain, or show one memory's history")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    verify = audit_sub.add_parser("verify", help="walk the chain and its signed checkpoints; exit 1 if broken")
    show = audit_sub.add_parser("show", help="a memory's state over time, with the workflow ids behind it")
    show.add_argument("memory_id")
    show.add_argument("--tenant", help="the memory's tenant (default: every tenant holding that id)")
    pubkey = audit_sub.add_parser("pubkey", help="print the public key that verifies audit checkpoints")
    pseudonym = audit_sub.add_parser(
        "pseudonym", help="how a person's id appears in the audit log and receipts (needs the service's secret)"
    )
    pseudonym.add_argument("--tenant", required=True)
    pseudonym.add_argument("value", help="an actor (user:alice) or an owner id (alice)")
    for p in (verify, show, pubkey, pseudonym):
        p.add_argument("--data-dir", default=os.environ.get("MEMWARDEN_DATA_DIR"))
    for p in (verify, show):
        p.add_argument("--json", action="store_true", help="machine-readable output")
    audit.set_defaults(func=cmd_audit)
    return root


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ValueError as exc:
        print(f"memwarden: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
