"""`explorer start` — index a deployment and serve the pool explorer (web page, JSON API, /metrics)."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

from cli.console import signals_held, stop_on_signals
from cli.devnet import DEVNET_DIR_HELP, default_devnet_dir, load_devnet_info
from cli.errors import one_line_errors
from cli.options import PORT, POSITIVE, SECONDS, Parser, resolve_chain_args


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="explorer", description="The proofswarm pool explorer.",
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog="""examples:
  explorer start --port 8000      # then open http://127.0.0.1:8000/pool/1 (JSON API under /api, OpenAPI at /docs)""")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("start", help="index the chain and serve the explorer until stopped")
    s.add_argument("--rpc-url", help="Ethereum JSON-RPC URL (default: the local devnet)")
    s.add_argument("--deployments", type=Path, help="deployments file keyed by chain id (default: the devnet's)")
    s.add_argument("--chain-id", type=POSITIVE, help="refuse to start unless the RPC serves this chain id")
    s.add_argument("--devnet-dir", type=Path, default=default_devnet_dir(), help=DEVNET_DIR_HELP)
    s.add_argument("--kubo-api", help="Kubo RPC API for run specs, manifests, metrics, evidence (default: the devnet's)")
    s.add_argument("--db", type=Path, help="SQLite index file (default .explorer/index-<chain id>.sqlite)")
    s.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    s.add_argument("--port", type=PORT, default=8900, help="port to serve on (default 8900)")
    s.add_argument("--summary", type=Path, default=Path("runs/demo/summary.json"),
                   help="a demo summary to serve at /summary (default runs/demo/summary.json)")
    s.add_argument("--poll", type=SECONDS, default=0.5, help="seconds between chain polls (default 0.5)")
    return p


@one_line_errors
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # before web3 loads: --help and bad input answer at once
    with signals_held():  # Ctrl-C while they import: one line (cli.console)
        from dashboard.chain_source import connect, load_deployment
        from dashboard.service import ExplorerService  # FastAPI/uvicorn: only when starting

    rpc_url, deployments = resolve_chain_args(args)
    w3 = connect(rpc_url, args.chain_id)
    deployment = load_deployment(deployments, w3.eth.chain_id)
    kubo_api = args.kubo_api or (load_devnet_info(args.devnet_dir) or {}).get("kubo_api")
    db = args.db or Path(".explorer") / f"index-{deployment.chain_id}.sqlite"
    service = ExplorerService(db, rpc_url, deployment, kubo_api, host=args.host, port=args.port,
                              summary_path=args.summary, poll_s=args.poll)
    stop = threading.Event()
    exit_code = stop_on_signals(stop)  # Ctrl-C: 130, SIGTERM (a service manager's stop): 0, as the other daemons
    print(f"explorer: {service.start()}  (index {db}{'' if kubo_api else ', no Kubo: IPFS objects not shown'})",
          flush=True)
    try:
        while not stop.wait(1.0):  # a wait with a timeout: a signal's handler runs within a second of it
            pass
    finally:
        service.stop()
    return exit_code()


if __name__ == "__main__":
    raise SystemExit(main())
