"""Requests a second of an idle worker: a real `WorkerDaemon` on anvil with 2 s blocks, counted at its transport.

The worker has joined a pool, made its files for the pool's step (none asked: `submissions_per_step` 0) and holds the
step's policy, so it has nothing to send until the trainer publishes a new step: what it asks the chain then is its
whole cost to the node (issue 46: 5.9 requests a second idle, 7.8 at `--max-pending`, on main at 1085f3e). Every
JSON-RPC request its ledger sends is counted by method over `--seconds` of wall time after a warm-up.
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from eth_utils import function_abi_to_4byte_selector

from bench.report import add_record_option, print_rows
from deploy.anvil import dev_accounts, start_anvil
from deploy.contracts import deploy_contracts
from deploy.pools import PoolConfig, create_pool
from ledger_client.chain.contract import ABI_DIR
from ledger_client.chain.ledger import Ledger, connect
from worker.daemon import WorkerDaemon, WorkerOptions

TOKENS = 10**18
BLOCK_S = 2


@functools.cache
def _functions() -> dict[str, str]:
    """Each 4-byte selector of the bindings' ABIs → `Contract.function` (a selector several contracts share: their
    names joined by `|`)."""
    names: dict[str, set[str]] = {}
    for path in sorted(ABI_DIR.glob("*.json")):
        for item in json.loads(path.read_text())["abi"]:
            if item.get("type") == "function":
                selector = "0x" + function_abi_to_4byte_selector(item).hex()
                names.setdefault(selector, set()).add(f"{path.stem}.{item['name']}")
    return {selector: "|".join(sorted(n)) for selector, n in names.items()}


def function_of(request: dict) -> str:
    """The contract function an `eth_call` or `eth_estimateGas` request calls (its selector if no ABI has it)."""
    call = request["params"][0] if request.get("params") else {}
    selector = str(call.get("data") or call.get("input") or "")[:10]
    return _functions().get(selector, selector or "?")


def counted(w3, counts: Counter, log_ranges: list[int] | None = None, calls: Counter | None = None) -> None:
    """Count every request `w3` sends, by method (at the transport, under web3's middleware); with `log_ranges`, also
    append the blocks each `eth_getLogs` spans (an open end, `latest` or none, is the head, read uncounted); with
    `calls`, count each `eth_call` and `eth_estimateGas` by the contract function it calls (`method Contract.fn`)."""
    send = w3.provider._make_request

    def head() -> int:
        request = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "eth_blockNumber", "params": []}).encode()
        return int(json.loads(send("eth_blockNumber", request))["result"], 16)

    def block(tag: str | None) -> int:
        if tag is None or tag in ("latest", "pending", "safe", "finalized"):
            return head()
        return 0 if tag == "earliest" else int(tag, 16)

    def make_request(method, request_data):
        request = json.loads(request_data)
        for one in request if isinstance(request, list) else [request]:  # a batch counts each of its requests
            counts[one["method"]] += 1
            if calls is not None and one["method"] in ("eth_call", "eth_estimateGas"):
                calls[f"{one['method']} {function_of(one)}"] += 1
            if log_ranges is not None and one["method"] == "eth_getLogs":
                query = one["params"][0]
                log_ranges.append(1 if "blockHash" in query else
                                  block(query.get("toBlock")) - block(query.get("fromBlock", "earliest")) + 1)
        return send(method, request_data)

    w3.provider._make_request = make_request


def measure(seconds: float, warmup: float, work_dir: Path) -> dict:
    anvil = start_anvil(work_dir / "anvil.log")
    try:
        w3 = connect(anvil.rpc_url, 31337)
        accounts = dev_accounts(10)
        deployment = deploy_contracts(w3, accounts[0], treasury=accounts[9].address)
        admin = Ledger(w3, deployment, accounts[0])
        for i in (1, 4):
            admin.token.mint(accounts[i].address, 1_000_000 * TOKENS)
        cfg = PoolConfig(trainer=accounts[2].address, validators=[accounts[3].address], min_stake=100 * TOKENS,
                         reward_per_sample=TOKENS, slash_amount=50 * TOKENS, bounty_bps=2_000, challenge_window_s=60,
                         reward_lock_s=120, async_level=2, task="0x" + "22" * 32, base_checkpoint="0x" + "11" * 32,
                         max_samples_per_work=64, funding=10_000 * TOKENS)
        pool_id = create_pool(Ledger(w3, deployment, accounts[1]), cfg)
        worker = Ledger(w3, deployment, accounts[4])
        worker.ensure_allocation(pool_id, cfg.min_stake)
        worker.pool.join_pool(pool_id)
        w3.provider.make_request("evm_setIntervalMining", [BLOCK_S])  # 2 s blocks from here on

        counts: Counter = Counter()
        worker_w3 = connect(anvil.rpc_url, 31337)
        counted(worker_w3, counts)
        daemon = WorkerDaemon(Ledger(worker_w3, deployment, accounts[4]),
                              WorkerOptions(pool_id=pool_id, kubo_api="/ip4/127.0.0.1/tcp/1", work_dir=work_dir / "w",
                                            submissions_per_step=0, pace=False), producer=None, loader=None)
        daemon._prefetched = (0, b"", None)  # it holds step 0's policy: nothing to fetch
        stop = threading.Event()
        thread = threading.Thread(target=daemon.run, args=(stop,), daemon=True)
        thread.start()
        stop.wait(warmup)
        counts.clear()
        first_block, started = w3.eth.block_number, time.monotonic()
        stop.wait(seconds)
        took, blocks, seen = time.monotonic() - started, w3.eth.block_number - first_block, dict(counts)
        stop.set()
        thread.join(timeout=10)
    finally:
        anvil.stop()
    total = sum(seen.values())
    return {"block_s": BLOCK_S, "seconds": round(took, 1), "blocks": blocks, "requests": total,
            "rpc_per_worker_s": round(total / took, 3), "by_method": seen}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.worker_rpc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured wall time (default 60)")
    parser.add_argument("--warmup", type=float, default=6.0, help="seconds before counting (default 6)")
    add_record_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-worker-rpc-") as tmp:
        result = measure(args.seconds, args.warmup, Path(tmp))
    print(f"an idle worker on anvil with {BLOCK_S} s blocks, {result['seconds']} s ({result['blocks']} blocks)")
    rows = [("requests a second", f"{result['rpc_per_worker_s']:.3f}")] + \
        [(f"  {method}", str(n)) for method, n in sorted(result["by_method"].items())]
    print_rows(rows, result, args, "worker_rpc")


if __name__ == "__main__":
    main()
