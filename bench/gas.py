"""Gas used by the hot contract calls, on a fresh anvil: `python -m bench.gas`.

Each call is measured in the steady state a running pool is in ("warm storage": the pool,
the worker's registry entry and token balances already exist), i.e. the second occurrence of
the call. `execution` is the receipt's gasUsed minus the intrinsic cost (21000 + calldata),
which is what the budgets below refer to; `total` is the receipt's gasUsed.

Budgets (issue #2): submitWork ≤ 60,000, attest ≤ 40,000, claim ≤ 60,000; (issue 13) the court's first
verdict `court.attest` ≤ 40,000. The `court.*` rows are a pool judged by the ValidatorCourt: register,
attest (by the assigned validator), dispute, drawCommittee, commitVote, revealVote, resolve and finalize;
`submitWork (court pool)` includes the court's submission hook, which opens the case so that a verdict
only updates it. These rows are the legacy path: a transaction per file (submitWork, a verdict, a claim).

The batched path (decision 0009 §3, contracts/src/WorkBatches.sol; the daemons use it in a batched pool) is measured on the same
anvil with real transactions: 8 workers × one signed run of 32 leaves in a batch of B = 256 leaves, one claim per
worker per run, no dispute; `batches.challenge` is one disputed leaf. Per accepted file (totals, intrinsic included):
batch / 256 + claim / 32 + (openEpoch + V × ForcedErrors.revealLink) / E, at E = EPOCH_FILES files an epoch.
The court route of batches is not built (court pools are refused): the V figures are the permissioned batched path
plus V validators' reveals, what decision 0009 §3 designs a court pool's undisputed path to cost.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from deploy.anvil import dev_accounts, start_anvil
from eth_utils import keccak

from deploy.contracts import deploy_contracts
from ledger_client.chain import batches
from ledger_client.chain.bindings import CourtParams, ForcedErrors, PoolParams, WorkBatches
from ledger_client.chain.ledger import Ledger, connect
from validator.court import vote_commitment

BUDGETS = {"submitWork": 60_000, "attest": 40_000, "claim": 60_000, "court.attest": 40_000}


BATCH = 256
"""B: leaves a batch."""
RUN = 32
"""Files a worker claims at once (one claim per worker per epoch)."""
EPOCH_FILES = 32_000
"""E: files an epoch, assumed — 1,000 workers × 32 files (an epoch of 16 minutes at one file per 30 s each)."""
VALIDATORS = (3, 10, 30)


def _intrinsic(w3, tx_hash) -> int:
    data = bytes(w3.eth.get_transaction(tx_hash)["input"])
    return 21_000 + sum(4 if b == 0 else 16 for b in data)


def measure() -> dict[str, dict[str, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        anvil = start_anvil(Path(tmp) / "anvil.log", accounts=10 + BATCH // RUN)
        try:
            return _measure(connect(anvil.rpc_url))
        finally:
            anvil.stop()


def _measure(w3) -> dict[str, dict[str, int]]:
    acc = dev_accounts(10 + BATCH // RUN)
    deployment = deploy_contracts(w3, acc[0])
    admin = Ledger(w3, deployment, acc[0])
    for i in (1, 4, 5):
        admin.token.mint(acc[i].address, 10**24)
    owner, trainer, validator = (Ledger(w3, deployment, acc[i]) for i in (1, 2, 3))
    w1, w2 = Ledger(w3, deployment, acc[4]), Ledger(w3, deployment, acc[5])
    params = PoolParams(trainer=acc[2].address, validators=[acc[3].address], min_stake=100 * 10**18,
                        reward_per_sample=10**18, slash_amount=10 * 10**18, bounty_bps=2_000, challenge_window=60,
                        reward_lock=120, max_staleness=2, task_ref=b"\x22" * 32, base_checkpoint=b"\x11" * 32,
                        max_samples_per_work=64, spot_check_bps=10_000)
    owner.pool.create_pool(params)
    pool_id = owner.pool.pool_count()
    owner.token.approve(owner.pool.address, 10**23)
    owner.pool.fund_pool(pool_id, 10**23)
    out: dict[str, dict[str, int]] = {}

    def record(name: str, receipt) -> None:
        total = receipt["gasUsed"]
        out[name] = {"total": total, "execution": total - _intrinsic(w3, receipt["transactionHash"])}

    for w in (w1, w2):
        w.token.approve(w.stake.address, 10**24)
        w.stake.bond(50 * 10**18)
    record("stake", w1.stake.bond(60 * 10**18))  # second bond of the same worker
    w2.stake.bond(60 * 10**18)
    w1.pool.allocate(pool_id, 50 * 10**18)
    record("allocate", w1.pool.allocate(pool_id, 60 * 10**18))  # second allocation to the same pool
    w2.pool.allocate(pool_id, 110 * 10**18)
    trainer.pool.publish_checkpoint(pool_id, 1, b"\x01" * 32)
    record("publishCheckpoint", trainer.pool.publish_checkpoint(pool_id, 2, b"\x02" * 32))
    # joining pins the first nonce to the latest step (2), each submission pins the next nonce to it
    w1.pool.join_pool(pool_id)
    record("joinPool", w2.pool.join_pool(pool_id))
    digests = [bytes([i]) * 32 for i in range(10, 16)]
    w1.pool.submit_work(pool_id, 2, 0, digests[0], 16)
    record("submitWork", w1.pool.submit_work(pool_id, 2, 1, digests[1], 16))
    w2.pool.submit_work(pool_id, 2, 0, digests[2], 16)
    ids = [w1.pool.work_id_of(pool_id, w1.address, 0), w1.pool.work_id_of(pool_id, w1.address, 1),
           w1.pool.work_id_of(pool_id, w2.address, 0)]
    validator.pool.attest(ids[0])
    record("attest", validator.pool.attest(ids[1]))
    record("challenge", validator.pool.challenge(ids[2], 1, b"\x09" * 32))
    w3.provider.make_request("evm_increaseTime", [params.reward_lock + 1])
    w3.provider.make_request("evm_mine", [])
    w1.pool.claim([ids[0]])
    record("claim", w1.pool.claim([ids[1]]))
    _measure_court(w3, deployment, acc, params, record)
    _measure_reveal(w3, deployment, acc, record)
    _measure_batches(w3, deployment, acc, params, record)
    return out


def _measure_court(w3, deployment, acc, params: PoolParams, record) -> None:
    """The court's calls on a second pool judged by it (validators: accounts 6-9; worker: account 4)."""
    admin, owner = Ledger(w3, deployment, acc[0]), Ledger(w3, deployment, acc[1])
    court = owner.court
    pool = params._replace(validators=[court.address], challenge_window=200, reward_lock=300)
    owner.pool.create_pool(pool)
    pool_id = owner.pool.pool_count()
    owner.token.approve(owner.pool.address, 10**22)
    owner.pool.fund_pool(pool_id, 10**22)
    owner.pool.freeze_validators(pool_id, court.address)
    rules = CourtParams(validator_bond=100 * 10**18, verdict_fee=10**17, dispute_bond=10 * 10**18,
                        non_voter_penalty=5 * 10**18, silence_penalty=10**18, assigned_window=10, verdict_window=30,
                        dispute_window=20, commit_period=20, reveal_period=20, committee_size=3,
                        wrong_verdict_slash=40 * 10**18, activation_delay=10)
    court.configure_pool(pool_id, rules)
    owner.token.approve(court.address, 10**21)
    court.fund_fees(pool_id, 10**21)
    vals = {}
    for i in (6, 7, 8, 9):
        admin.token.mint(acc[i].address, 10**24)
        v = vals[acc[i].address] = Ledger(w3, deployment, acc[i])
        v.token.approve(v.stake.address, 10**24)
        v.stake.bond(500 * 10**18)
        receipt = v.court.register(pool_id)
    record("court.register", receipt)
    w3.provider.make_request("evm_increaseTime", [rules.activation_delay + 1])  # the registrations count from now on
    w3.provider.make_request("evm_mine", [])
    worker = Ledger(w3, deployment, acc[4])
    worker.stake.bond(200 * 10**18)
    worker.pool.allocate(pool_id, 200 * 10**18)
    worker.pool.join_pool(pool_id)
    nonce = worker.pool.get_member(pool_id, worker.address).next_nonce
    worker.pool.submit_work(pool_id, 0, nonce, b"\x21" * 32, 16)
    record("submitWork (court pool)", worker.pool.submit_work(pool_id, 0, nonce + 1, b"\x22" * 32, 16))
    works = [worker.pool.work_id_of(pool_id, worker.address, nonce + k) for k in (0, 1)]
    for _ in range(2):  # the assignment draws from the hash of the block after the submission
        w3.provider.make_request("evm_mine", [])
    judges = [vals[court.assigned_validator(w)] for w in works]
    judges[0].court.attest(works[0])
    record("court.attest", judges[1].court.attest(works[1]))
    disputer = next(v for a, v in vals.items() if a != judges[1].address)
    record("court.dispute", disputer.court.dispute(works[1], b"\x0e" * 32))
    for _ in range(2):
        w3.provider.make_request("evm_mine", [])
    record("court.drawCommittee", disputer.court.draw_committee(works[1]))
    salt = b"\x5a" * 32
    members = [vals[a] for a in court.committee_of(works[1])]
    for m in members:
        receipt = m.court.commit_vote(works[1], vote_commitment(works[1], m.address, True, salt))
    record("court.commitVote", receipt)
    w3.provider.make_request("evm_increaseTime", [rules.commit_period + 1])
    w3.provider.make_request("evm_mine", [])
    for m in members:
        receipt = m.court.reveal_vote(works[1], True, salt)
    record("court.revealVote", receipt)
    w3.provider.make_request("evm_increaseTime", [rules.reveal_period + 1])
    w3.provider.make_request("evm_mine", [])
    record("court.resolve", disputer.court.resolve(works[1]))
    record("court.finalize", judges[0].court.finalize(works[0]))


def _advance(w3, seconds: int) -> None:
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])


def _keccak_n(h: bytes, n: int) -> bytes:
    for _ in range(n):
        h = keccak(h)
    return h


def _measure_reveal(w3, deployment, acc, record) -> None:
    """`ForcedErrors.revealLink` in the court pool `_measure_court` made: each validator (accounts 6-9) commits a
    chain, then reveals epoch 1's link; the second reveal is recorded (each writes its epoch's new slot)."""
    owner = Ledger(w3, deployment, acc[1])
    pool_id = owner.pool.pool_count()
    fe = ForcedErrors(w3, deployment.forced_errors, owner.sender)
    fe.configure(pool_id, (100, 5_000, 60, 60, 100 * 10**18, 50 * 10**18, 80 * 10**18, 5 * 10**18))
    secrets = {i: bytes([i]) * 32 for i in (6, 7, 8, 9)}
    for i, s in secrets.items():
        fe.with_sender(Ledger(w3, deployment, acc[i]).sender).commit_chain(pool_id, 0, _keccak_n(s, 4), 4)
    start = fe.reveal_window_of(pool_id, 1)[0]
    _advance(w3, max(1, start - w3.eth.get_block("latest")["timestamp"]))
    for i, s in secrets.items():
        receipt = fe.with_sender(Ledger(w3, deployment, acc[i]).sender).reveal_link(pool_id, 0, 1, _keccak_n(s, 3))
        if i == 7:
            record("forcedErrors.revealLink", receipt)


def _measure_batches(w3, deployment, acc, params: PoolParams, record) -> None:
    """The batched path in a permissioned pool (validator: account 3; workers: accounts 10..17)."""
    admin, owner, validator = (Ledger(w3, deployment, acc[i]) for i in (0, 1, 3))
    pool = params._replace(max_samples_per_work=16)
    owner.pool.create_pool(pool)
    pool_id = owner.pool.pool_count()
    address = deployment.work_batches
    wb = WorkBatches(w3, address, owner.sender)
    bond = pool.slash_amount * 64 * 3  # R1.25 at maxLeaves 64, a 60 s window in a 1 h epoch
    wb.configure(pool_id, (3600, 64, bond))
    owner.token.approve(address, 10**23)
    wb.fund(pool_id, 10**23)
    workers = []
    for a in acc[10:10 + BATCH // RUN]:
        admin.token.mint(a.address, 10**24)
        w = Ledger(w3, deployment, a)
        w.token.approve(w.stake.address, 10**24)
        w.stake.bond(pool.min_stake + bond)
        w.pool.allocate(pool_id, pool.min_stake)
        w.pool.join_pool(pool_id)
        wb.with_sender(w.sender).lock_bond(pool_id)
        workers.append(w)
    _advance(w3, 3600)  # a bond covers leaves from the epoch after its lock
    record("batches.openEpoch", wb.open_epoch(pool_id))
    domain = batches.domain_separator(w3.eth.chain_id, address)
    epoch = wb.epoch_of(pool_id, w3.eth.get_block("latest")["timestamp"])

    def batch(first: int, tag: int):
        runs = [batches.sign_run(w.account, domain, pool_id, epoch, first,
                                 [batches.LeafBody(bytes([tag, k, c]) * 8 + b"\0" * 8, 2, 16) for c in range(RUN)])
                for k, w in enumerate(workers)]
        nodes, ref = batches.batch(runs, bytes([tag]) * 32)
        return runs, nodes, ref

    first, second = batch(0, 1), batch(RUN, 2)
    one = first[0][0]
    if wb.run_digest(pool_id, epoch, 0, RUN, one.leaves_root) != one.digest:
        raise SystemExit("bench.gas: the contract's run digest differs from ledger_client.chain.batches'")
    relay = wb.with_sender(validator.sender)  # any account posts; the validator's is at hand
    relay.post_batch(first[2])
    record("batches.postBatch (256 leaves)", relay.post_batch(second[2]))
    # a disputed file: the validator challenges the last worker's last leaf of the second batch in its window
    runs, nodes, ref = second
    last, counter = len(nodes) - 1, 2 * RUN - 1
    record("batches.challenge (one leaf)", relay.challenge(ref, last, batches.range_proof(nodes, last, 1),
                                                            runs[last].worker, counter, runs[last].leaf(counter), 1,
                                                            b"\x09" * 32))
    _advance(w3, pool.challenge_window + 1)
    claimer = wb.with_sender(workers[0].sender)
    for runs, nodes, ref in (first, second):
        receipt = claimer.claim(ref, 0, batches.range_proof(nodes, 0, 1), runs[0].signed(),
                                *runs[0].claim_args(runs[0].first_counter, RUN))
    record(f"batches.claim ({RUN} leaves)", receipt)  # the second: its cursor slot is rewritten, not new


def per_file(figures: dict[str, dict[str, int]]) -> dict:
    """Gas, transactions and storage slots per accepted file on the batched path (totals with intrinsic)."""
    total = {name: g["total"] for name, g in figures.items()}
    base = total["batches.postBatch (256 leaves)"] / BATCH + total[f"batches.claim ({RUN} leaves)"] / RUN \
        + total["batches.openEpoch"] / EPOCH_FILES
    reveal = total["forcedErrors.revealLink"]
    out = {"gas_per_file_permissioned": round(base)}
    for v in VALIDATORS:
        out[f"gas_per_file_v{v}"] = round(base + v * reveal / EPOCH_FILES)
    v = max(VALIDATORS)
    # a batch, a claim per worker per RUN files, an epoch's beacon and V reveals; a batch's record, the beacon and
    # each reveal's link are the slots left (a claim rewrites its worker's cursor; a void is written only on disputes)
    out["tx_per_file"] = round(1 / BATCH + 1 / RUN + (1 + v) / EPOCH_FILES, 4)
    out["slots_left_per_file"] = round(1 / BATCH + (1 + v) / EPOCH_FILES, 4)
    out["gas_disputed_file"] = total["batches.challenge (one leaf)"]
    out["legacy_gas_per_file_permissioned"] = total["submitWork"] + total["attest"] + total["claim"]
    out["epoch_files_assumed"] = EPOCH_FILES
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gas", description=__doc__.splitlines()[0])
    add_record_option(parser)
    args = parser.parse_args()
    figures = measure()
    table = Table(title="proofswarm gas (steady state, anvil; the rows without batches. are the legacy path)")
    for col in ("function", "execution gas", "total gasUsed", "budget", "ok"):
        table.add_column(col, justify="right" if col != "function" else "left")
    for name, g in figures.items():
        budget = BUDGETS.get(name)
        ok = "" if budget is None else ("yes" if g["execution"] <= budget else "NO")
        table.add_row(name, f"{g['execution']:,}", f"{g['total']:,}", f"{budget:,}" if budget else "-", ok)
    Console().print(table)
    batched = per_file(figures)
    Console().print(f"batched path per accepted file (B = {BATCH}, a claim per {RUN} files, E = {EPOCH_FILES:,} files "
                    f"an epoch): " + ", ".join(f"{k} {v:,}" for k, v in batched.items()))
    emit({name: g["execution"] for name, g in figures.items()} | {"total": {name: g["total"] for name, g in figures.items()}}
         | batched, args, "gas")


if __name__ == "__main__":
    exit_on_signals()
    main()
