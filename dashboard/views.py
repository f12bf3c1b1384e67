"""What the explorer shows, as plain dicts: index queries plus a few live reads of the chain.

History (submissions, verdicts, checkpoints, slashes, claims) comes from the index; the values
the contracts compute (budget, reserved, a worker's bonded stake) are read live from the chain,
so the explorer never re-implements contract arithmetic. Amounts are decimal strings (uint256).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import fields
from typing import Any

from web3 import Web3

from dashboard.chain_source import ComputePool, Deployment, Reason, StakeManager, cid_to_digest, decode_pool
from dashboard.store import Store

STATUSES = ("pending", "accepted", "rejected", "paid", "expired")
_WORK_ID = re.compile(r"^0x[0-9a-fA-F]{64}$")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


class NotFound(LookupError):
    """An unknown pool, worker, work or object (HTTP 404)."""


class BadId(ValueError):
    """A malformed id in the request (HTTP 400)."""


def page(items: list, total: int, offset: int, limit: int) -> dict[str, Any]:
    return {"items": items, "total": total, "offset": offset, "limit": limit}


def reason_name(code: int) -> str:
    try:
        return Reason(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


def work_id_of(text: str) -> str:
    if not _WORK_ID.match(text):
        raise BadId(f"{text!r} is not a work id (0x and 64 hex digits)")
    return text.lower()


def address_of(text: str) -> str:
    if not _ADDRESS.match(text):
        raise BadId(f"{text!r} is not an address (0x and 40 hex digits)")
    return text.lower()


class LiveChain:
    """Cached live reads (one second): pool state and stake, None while the RPC is unreachable."""

    def __init__(self, w3: Web3, deployment: Deployment, ttl_s: float = 1.0):
        self.pool = ComputePool(w3, deployment.compute_pool)
        self.stake = StakeManager(w3, deployment.stake_manager)
        self.w3 = w3
        self.ttl_s = ttl_s
        self._cache: dict[tuple, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def _cached(self, key: tuple, read) -> Any:
        with self._lock:
            hit = self._cache.get(key)
            if hit and time.monotonic() - hit[0] < self.ttl_s:
                return hit[1]
        try:
            value = read()
        except Exception:  # outage: the page still shows the index
            return None
        with self._lock:
            self._cache[key] = (time.monotonic(), value)
        return value

    def head(self) -> int | None:
        return self._cached(("head",), lambda: self.w3.eth.block_number)

    def pool_state(self, pool_id: int) -> dict[str, Any] | None:
        def read() -> dict[str, Any]:
            state = decode_pool(pool_id, self.pool.get_pool(pool_id))
            amounts = ("budget", "reserved", "min_stake", "reward_per_sample", "slash_amount")
            view = {f.name: getattr(state, f.name) for f in fields(state) if f.name != "pool_id"}
            view |= {name: str(view[name]) for name in amounts} | {"active": state.active}
            view["status"] = state.status.name.lower()
            return {k: str(v) if isinstance(v, bytes) else v for k, v in view.items()}
        return self._cached(("pool", pool_id), read)

    def stake_of(self, worker: str) -> dict[str, Any] | None:
        def read() -> dict[str, Any]:
            address = Web3.to_checksum_address(worker)
            unbonding = self.stake.unbonding_of(address)
            return {"bonded": str(self.stake.bonded_of(address)),  # free bonded stake
                    "allocated": str(self.stake.locked_of(self.pool.address, address)),  # locked for the pools
                    "unbonding": str(unbonding.amount), "unbonding_ready_at": unbonding.ready_at}
        return self._cached(("stake", worker), read)


class Explorer:
    """The explorer's read model over one index and one chain."""

    def __init__(self, store: Store, live: LiveChain):
        self.store = store
        self.live = live

    # -------------------------------------------------------------- pools

    def _pool_row(self, pool_id: int) -> dict[str, Any]:
        rows = self.store.select("SELECT * FROM events WHERE name = 'PoolCreated' AND pool_id = ?", (pool_id,))
        if not rows:
            raise NotFound(f"unknown pool {pool_id}")
        return rows[0]

    def pools(self, offset: int, limit: int) -> dict[str, Any]:
        total = self.store.scalar("SELECT COUNT(*) FROM events WHERE name = 'PoolCreated'")
        rows = self.store.select("SELECT * FROM events WHERE name = 'PoolCreated' ORDER BY pool_id LIMIT ? OFFSET ?",
                                 (limit, offset))
        return page([self._pool_summary(r) for r in rows], total, offset, limit)

    def _pool_summary(self, row: dict[str, Any]) -> dict[str, Any]:
        pool_id = row["pool_id"]
        counts = {s: 0 for s in STATUSES} | {r["status"]: r["n"] for r in self.store.select(
            "SELECT status, COUNT(*) AS n FROM work_status WHERE pool_id = ? GROUP BY status", (pool_id,))}
        latest = self.store.scalar("SELECT MAX(json_extract(data, '$.step')) FROM events "
                                   "WHERE name = 'CheckpointPublished' AND pool_id = ?", (pool_id,))
        return {"pool_id": pool_id, "owner": row["data"]["owner"], "trainer": row["data"]["trainer"],
                "task_ref": row["data"]["task_ref"], "created_block": row["block_number"],
                "latest_checkpoint_step": latest, "submissions": counts,
                "workers": sum(m["member"] for m in self._members(pool_id).values()), "state": self.live.pool_state(pool_id)}

    def pool(self, pool_id: int) -> dict[str, Any]:
        summary = self._pool_summary(self._pool_row(pool_id))
        spec = self.store.object(summary["task_ref"])
        summary["run_spec"] = spec["body"] if spec else None
        summary["slashed_total"] = str(sum(int(r["data"]["amount"]) for r in self._slash_rows(pool_id)))
        summary["validators"] = [v["validator"] for v in self._validators(pool_id) if v["allowed"]]
        return summary

    def checkpoints(self, pool_id: int, offset: int, limit: int) -> dict[str, Any]:
        self._pool_row(pool_id)
        where = "FROM events WHERE name = 'CheckpointPublished' AND pool_id = ?"
        total = self.store.scalar(f"SELECT COUNT(*) {where}", (pool_id,))
        rows = self.store.select(f"SELECT * {where} ORDER BY json_extract(data, '$.step') LIMIT ? OFFSET ?",
                                 (pool_id, limit, offset))
        items = []
        for r in rows:
            manifest = self.store.object(r["data"]["manifest_digest"])
            items.append({"step": r["data"]["step"], "manifest_digest": r["data"]["manifest_digest"],
                          "block": r["block_number"], "tx_hash": r["tx_hash"],
                          "manifest": manifest["body"] if manifest else None,
                          "manifest_error": manifest["error"] if manifest else None})
        return page(items, total, offset, limit)

    def curve(self, pool_id: int, offset: int, limit: int) -> dict[str, Any]:
        """Per-step metrics the trainer put on IPFS, one point per checkpoint whose manifest names them."""
        checkpoints = self.checkpoints(pool_id, 0, 1_000_000)["items"]
        points = []
        for c in checkpoints:
            metrics_cid = (c["manifest"] or {}).get("metrics")
            if not metrics_cid:
                continue
            obj = self.store.object("0x" + cid_to_digest(metrics_cid).hex())
            if obj is None or obj["body"] is None:
                continue
            m = obj["body"]
            points.append({"step": c["step"], "reward": m.get("reward"), "batch_reward": m.get("batch_reward"),
                           "accuracy": m.get("accuracy"), "clipped_fraction": m.get("clipped_fraction"),
                           "staleness_mean": m.get("staleness_mean"), "staleness_max": m.get("staleness_max"),
                           "loss": m.get("loss"), "metrics_cid": metrics_cid})
        return page(points[offset:offset + limit], len(points), offset, limit)

    def _members(self, pool_id: int) -> dict[str, dict[str, Any]]:
        """Every worker that ever joined the pool; `member` says whether it still is."""
        members: dict[str, dict[str, Any]] = {}
        for r in self.store.select("SELECT * FROM events WHERE pool_id = ? AND name IN ('WorkerJoined', 'WorkerLeft', "
                                   "'WorkerEjected') ORDER BY block_number, log_index", (pool_id,)):
            entry = members.setdefault(r["worker"], {"worker": r["data"]["worker"], "joined_block": r["block_number"]})
            entry["member"] = r["name"] == "WorkerJoined"
            entry["ejected"] = r["name"] == "WorkerEjected"
        return members

    def workers(self, pool_id: int, offset: int, limit: int) -> dict[str, Any]:
        self._pool_row(pool_id)
        members = sorted(self._members(pool_id).items(), key=lambda kv: kv[1]["joined_block"])
        counts: dict[str, dict[str, int]] = {}
        for r in self.store.select("SELECT worker, status, COUNT(*) AS n FROM work_status WHERE pool_id = ? "
                                   "GROUP BY worker, status", (pool_id,)):
            counts.setdefault(r["worker"], {s: 0 for s in STATUSES})[r["status"]] = r["n"]
        slashed: dict[str, int] = {}
        for r in self._slash_rows(pool_id):
            slashed[r["worker"]] = slashed.get(r["worker"], 0) + int(r["data"]["amount"])
        items = [{**m, "submissions": counts.get(w, {s: 0 for s in STATUSES}), "slashed": str(slashed.get(w, 0))}
                 for w, m in members[offset:offset + limit]]
        return page(items, len(members), offset, limit)

    def _validators(self, pool_id: int) -> list[dict[str, Any]]:
        latest: dict[str, dict[str, Any]] = {}
        for r in self.store.select("SELECT * FROM events WHERE pool_id = ? AND name = 'ValidatorSet' "
                                   "ORDER BY block_number, log_index", (pool_id,)):
            latest[r["data"]["validator"].lower()] = {"validator": r["data"]["validator"],
                                                      "allowed": r["data"]["allowed"]}
        return list(latest.values())

    def validators(self, pool_id: int, offset: int, limit: int) -> dict[str, Any]:
        self._pool_row(pool_id)
        verdicts = {(r["v"], r["name"]): r["n"] for r in self.store.select(
            "SELECT lower(json_extract(data, '$.validator')) AS v, name, COUNT(*) AS n FROM events WHERE pool_id = ? "
            "AND name IN ('WorkAccepted', 'WorkChallenged') GROUP BY v, name", (pool_id,))}
        items = [{**v, "attested": verdicts.get((v["validator"].lower(), "WorkAccepted"), 0),
                  "challenged": verdicts.get((v["validator"].lower(), "WorkChallenged"), 0)}
                 for v in self._validators(pool_id)]
        return page(items[offset:offset + limit], len(items), offset, limit)

    # -------------------------------------------------------------- submissions and verdicts

    def _submission(self, r: dict[str, Any]) -> dict[str, Any]:
        verdict = self.store.select("SELECT * FROM events WHERE work_id = ? AND name IN ('WorkAccepted', "
                                    "'WorkChallenged') ORDER BY block_number DESC LIMIT 1", (r["work_id"],))
        out = {"work_id": r["work_id"], "pool_id": r["pool_id"], "worker": r["data"]["worker"],
               "step": r["data"]["step"], "n_samples": r["data"]["n_samples"], "status": r["status"],
               "block": r["block_number"], "tx_hash": r["tx_hash"], "reason": None, "evidence_digest": None,
               "validator": None}
        if verdict:
            v = verdict[0]["data"]
            out["validator"] = v["validator"]
            if verdict[0]["name"] == "WorkChallenged":
                out["reason"] = reason_name(v["reason_code"])
                out["evidence_digest"] = v["evidence_digest"]
                out["slashed"] = v["slashed"]
        return out

    def submissions(self, pool_id: int, status: str | None, offset: int, limit: int) -> dict[str, Any]:
        self._pool_row(pool_id)
        where, params = "WHERE pool_id = ?", [pool_id]
        if status:
            where, params = where + " AND status = ?", params + [status]
        total = self.store.scalar(f"SELECT COUNT(*) FROM work_status {where}", tuple(params))
        rows = self.store.select(f"SELECT * FROM work_status {where} ORDER BY block_number DESC, log_index DESC "
                                 "LIMIT ? OFFSET ?", (*params, limit, offset))
        return page([self._submission(r) for r in rows], total, offset, limit)

    def verdicts(self, pool_id: int, offset: int, limit: int) -> dict[str, Any]:
        self._pool_row(pool_id)
        where = "FROM events WHERE pool_id = ? AND name IN ('WorkAccepted', 'WorkChallenged')"
        total = self.store.scalar(f"SELECT COUNT(*) {where}", (pool_id,))
        rows = self.store.select(f"SELECT * {where} ORDER BY block_number DESC, log_index DESC LIMIT ? OFFSET ?",
                                 (pool_id, limit, offset))
        items = []
        for r in rows:
            d = r["data"]
            challenged = r["name"] == "WorkChallenged"
            items.append({"work_id": r["work_id"], "verdict": "challenged" if challenged else "accepted",
                          "validator": d["validator"], "block": r["block_number"], "tx_hash": r["tx_hash"],
                          "reason": reason_name(d["reason_code"]) if challenged else None,
                          "reason_code": d.get("reason_code"), "evidence_digest": d.get("evidence_digest"),
                          "slashed": d.get("slashed")})
        return page(items, total, offset, limit)

    def _slash_rows(self, pool_id: int) -> list[dict[str, Any]]:
        # Slashed comes from the StakeManager, which knows no pools: the challenge in the same
        # transaction names the pool.
        return self.store.select("SELECT * FROM events WHERE name = 'Slashed' AND tx_hash IN (SELECT tx_hash FROM "
                                 "events WHERE name = 'WorkChallenged' AND pool_id = ?) "
                                 "ORDER BY block_number DESC, log_index DESC", (pool_id,))

    def slashes(self, pool_id: int, offset: int, limit: int) -> dict[str, Any]:
        self._pool_row(pool_id)
        rows = self._slash_rows(pool_id)
        items = [{"worker": r["data"]["worker"], "challenger": r["data"]["challenger"], "amount": r["data"]["amount"],
                  "bounty": r["data"]["bounty"], "block": r["block_number"],
                  "tx_hash": r["tx_hash"]} for r in rows[offset:offset + limit]]
        return page(items, len(rows), offset, limit)

    def claims(self, pool_id: int, offset: int, limit: int) -> dict[str, Any]:
        self._pool_row(pool_id)
        rows = self.store.select(
            "SELECT * FROM events WHERE name = 'RewardsClaimed' AND tx_hash IN (SELECT c.tx_hash FROM claimed_works c "
            "JOIN events s ON s.work_id = c.work_id AND s.name = 'WorkSubmitted' WHERE s.pool_id = ?) "
            "ORDER BY block_number DESC, log_index DESC", (pool_id,))
        items = [{"worker": r["data"]["worker"], "amount": r["data"]["amount"], "works": len(r["data"]["work_ids"]),
                  "work_ids": r["data"]["work_ids"], "block": r["block_number"], "tx_hash": r["tx_hash"]}
                 for r in rows[offset:offset + limit]]
        return page(items, len(rows), offset, limit)

    # -------------------------------------------------------------- workers and works

    def worker(self, address: str) -> dict[str, Any]:
        worker = address_of(address)
        if not self.store.scalar("SELECT 1 FROM events WHERE worker = ? LIMIT 1", (worker,)):
            raise NotFound(f"unknown worker {address}")
        by_status = {s: 0 for s in STATUSES} | {r["status"]: r["n"] for r in self.store.select(
            "SELECT status, COUNT(*) AS n FROM work_status WHERE worker = ? GROUP BY status", (worker,))}
        owed = 0
        for r in self.store.select("SELECT pool_id, SUM(json_extract(data, '$.n_samples')) AS samples FROM work_status "
                                   "WHERE worker = ? AND status = 'accepted' GROUP BY pool_id", (worker,)):
            state = self.live.pool_state(r["pool_id"])
            if state is not None:
                owed += int(r["samples"]) * int(state["reward_per_sample"])
        claimed = sum(int(r["data"]["amount"]) for r in self.store.select(
            "SELECT data FROM events WHERE name = 'RewardsClaimed' AND worker = ?", (worker,)))
        slashed = sum(int(r["data"]["amount"]) for r in self.store.select(
            "SELECT data FROM events WHERE name = 'Slashed' AND worker = ?", (worker,)))
        pools = [r["pool_id"] for r in self.store.select(
            "SELECT DISTINCT pool_id FROM events WHERE worker = ? AND name = 'WorkerJoined' ORDER BY pool_id", (worker,))]
        return {"worker": Web3.to_checksum_address(worker), "pools": pools, "stake": self.live.stake_of(worker),
                "submissions": by_status, "owed": str(owed), "claimed": str(claimed), "slashed": str(slashed)}

    def worker_submissions(self, address: str, status: str | None, offset: int, limit: int) -> dict[str, Any]:
        self.worker(address)
        where, params = "WHERE worker = ?", [address_of(address)]
        if status:
            where, params = where + " AND status = ?", params + [status]
        total = self.store.scalar(f"SELECT COUNT(*) FROM work_status {where}", tuple(params))
        rows = self.store.select(f"SELECT * FROM work_status {where} ORDER BY block_number DESC, log_index DESC "
                                 "LIMIT ? OFFSET ?", (*params, limit, offset))
        return page([self._submission(r) for r in rows], total, offset, limit)

    def work(self, work_id: str) -> dict[str, Any]:
        wid = work_id_of(work_id)
        rows = self.store.select("SELECT * FROM work_status WHERE work_id = ?", (wid,))
        if not rows:
            raise NotFound(f"unknown work {work_id}")
        out = self._submission(rows[0])
        out["evidence"] = self.evidence(out["evidence_digest"]) if out["evidence_digest"] else None
        return out

    def evidence(self, digest: str) -> dict[str, Any]:
        """A challenge's evidence document as the validator put it on IPFS (fetched by the indexer)."""
        d = work_id_of(digest)  # same shape: 0x + 32 bytes
        obj = self.store.object(d)
        if obj is None or obj["kind"] != "evidence":
            raise NotFound(f"no challenge names evidence {digest}")
        return {"digest": d, "document": obj["body"], "available": obj["body"] is not None, "error": obj["error"]}
