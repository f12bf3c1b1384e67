"""The sampler's margin test end to end (issue 26): on a real anvil + Kubo, a worker that adds a bias just under
the per-token bound to half the vocabulary passes every token's replay, and the validator daemon still
challenges it SAMPLING, with the margin statistics as its evidence on IPFS; an honest worker's file is accepted.
Then the trainer publishes a policy whose manifest carries looser tolerances (a recalibration for a noisier
population): the validator judges that policy's files by them, and a restarted trainer re-publishes the step with
the same manifest."""

from __future__ import annotations

import json
import math
import select
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from cli.errors import EXIT_USAGE
import inference.torch_backend as torch_backend
from ledger_client.chain.queries import get_work, pool_state
from ledger_client.ipfs.content import get_object, publish_run_spec
from protocol.digest import hex_text
from protocol.runspec import load_policy_verification
from validator.cli import main as validator_main
from ledger_client.ipfs.checkpoints import fetch_manifest
from protocol.manifest import PolicyVerification
from protocol.pool import WorkStatus
from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec
from protocol.verdicts import Evidence, Reason
from tests.support.protocol_pool import ProtocolPool
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.main import main as trainer_main
from trainer.publish import IpfsPublisher, base_checkpoint_digest
from worker.produce import produce_rollout_file

TOLERANCE = 0.2
"""A pool whose per-token bound leaves room (2ε = 0.4) for float32 workers: the margin
tails of the float32 profile (the run spec's defaults) are its null. The file is ~340 tokens long: at
8 tokens a completion (~120 a file) the biased sampler's file passed about one time in 40 (its seed comes
from a block hash, so from the wall clock); at ~340 the weakest of 80 biased files had a bound of 1e-29."""
SPEC = RunSpec(
    task={"name": "sort", "seed": 0, "params": {"min_digits": 3, "max_digits": 3}, "length_targets": [4, 8]},
    sampling=SamplingSpec(group_size=4, temperature=1.0, max_tokens=24), prompts_per_submission=4,
    pool_seed="0x" + "3a" * 32,
    verification=VerificationSpec(toploc_min_exp_matches=125, toploc_max_mant_err_mean=0.03,
                                  toploc_max_mant_err_median=0.0, toploc_mean_excludes_max=True,
                                  logit_tolerance=TOLERANCE),
)


def biased(policy, spec, binding):
    """The honest producer with 1.9ε added to every other token's logit before the seeded draw: each token it
    emits stays within the per-token bound 2ε/T of the validator's best."""
    honest_rule = torch_backend.sample_tokens

    def tilted(logits, *args, **kwargs):
        bias = torch.zeros(logits.shape[-1], dtype=logits.dtype, device=logits.device)
        bias[::2] = 1.9 * TOLERANCE
        return honest_rule(logits + bias, *args, **kwargs)

    torch_backend.sample_tokens = tilted
    try:
        return produce_rollout_file(policy, spec, binding)
    finally:
        torch_backend.sample_tokens = honest_rule


@pytest.fixture(scope="module")
def pool(tmp_path_factory, kubo_node):
    p = ProtocolPool(tmp_path_factory.mktemp("margins"), kubo_node)
    model, tokenizer = init_policy(SPEC, ModelSpec(hidden=32, layers=1, heads=2), warm_steps=0, warm_lr=0.0)
    p.create(SPEC, publish_run_spec(p.kubo, SPEC), base_checkpoint_digest(p.kubo, model.state_dict(), model.config,
                                                                          tokenizer))
    p.model, p.tokenizer = model, tokenizer
    yield p
    p.close()


def test_a_biased_sampler_inside_the_per_token_bound_is_challenged_on_its_margins(pool: ProtocolPool) -> None:
    stop = threading.Event()
    honest, cheat = pool.worker(4), pool.worker(5, producer=biased)
    assert honest.step_once(stop) and cheat.step_once(stop)
    validator = pool.validator()
    try:
        assert validator.run_once() == 2
    finally:
        validator.close()
    ledger = pool.ledger(0)
    (honest_work,) = [bytes.fromhex(e["work_id"]) for e in honest.journal.entries("submitted")]
    assert get_work(ledger, honest_work).status == WorkStatus.ACCEPTED
    challenged = {bytes(log["args"]["workId"]): log["args"] for log in
                  ledger.pool.contract.events.WorkChallenged.get_logs(from_block=0)}
    (cheat_work,) = [bytes.fromhex(e["work_id"]) for e in cheat.journal.entries("submitted")]
    assert Reason(challenged[cheat_work]["reasonCode"]) == Reason.SAMPLING
    # a margin challenge comes only after every token replayed within the per-token bound
    stats = Evidence.model_validate_json(get_object(pool.kubo, bytes(challenged[cheat_work]["evidenceDigest"]))).statistics
    test = stats["margin_test"]
    assert not test["passed"] and test["score"] > 0
    assert min(test["log_p_value"], test["worst_completion_log_p_value"]) < math.log(test["false_positive_rate"] / 2)


LOOSER = PolicyVerification(**{**SPEC.verification.model_dump(include=set(PolicyVerification.model_fields)),
                               "logit_tolerance": 20 * TOLERANCE, "margin_tail": [0.9] * 6, "margin_tokens": 1})
"""What a recalibration on a much noisier population could state: a bound 20x the run spec's, and tails under
which the biased sampler's margins (at most 1.9ε / 20ε each) are ordinary."""


def publisher(pool: ProtocolPool, name: str, verification: PolicyVerification) -> IpfsPublisher:
    return IpfsPublisher(pool.ledger(2), pool.kubo, pool.pool_id, pool.model.config, pool.tokenizer, async_level=1,
                         state_dir=pool.tmp / name, policy_verification=lambda: verification)


def test_a_policy_that_carries_looser_tolerances_is_judged_by_them(pool: ProtocolPool) -> None:
    digest = publisher(pool, "trainer", LOOSER)(1, pool.model.state_dict())
    _, manifest = fetch_manifest(pool.kubo, bytes.fromhex(digest[2:]))
    assert manifest.verification == LOOSER
    # a restarted trainer whose file now says otherwise re-publishes step 1 with the manifest the chain has
    tighter = LOOSER.model_copy(update={"logit_tolerance": TOLERANCE})
    assert publisher(pool, "trainer-restarted", tighter)(1, pool.model.state_dict()) == digest

    stop = threading.Event()
    cheat = pool.worker(6, producer=biased)
    assert cheat.step_once(stop)
    (entry,) = cheat.journal.entries("submitted")
    assert entry["step"] == 1
    validator = pool.validator("validator-step1")
    try:
        assert validator.run_once() == 1
    finally:
        validator.close()
    # the file the run spec's rules challenge (the test above) is ordinary under the policy's looser ones
    assert get_work(pool.ledger(0), bytes.fromhex(entry["work_id"])).status == WorkStatus.ACCEPTED


def test_trainer_start_refuses_a_policy_verification_file_at_other_levels(pool: ProtocolPool, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Read once the pool's run spec is known and before any download: one line, exit 2, nothing written."""
    bad = tmp_path / "thresholds.toml"
    fields = LOOSER.model_dump() | {"margin_levels": [0.0, 0.5], "margin_tail": [1e-3, 1e-4]}
    bad.write_text("[verification]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items()))
    run_dir = tmp_path / "run"
    argv = ["start", "--pool", str(pool.pool_id), "--rpc-url", pool.anvil.rpc_url, "--deployments",
            str(pool.deployments), "--key", hex_text(pool.accounts[2].key), "--kubo-api", pool.kubo_api,
            "--devnet-dir", str(tmp_path / "no-devnet"), "--set", f"run_dir={run_dir}", "--policy-verification", str(bad)]
    assert trainer_main(argv) == EXIT_USAGE
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "states margin tails at levels [0.0, 0.5]" in lines[0], lines
    assert not run_dir.exists()


def test_validator_calibrate_pool_measures_the_newest_policy_for_the_trainer(pool: ProtocolPool, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`validator calibrate --pool N --out F`: the pool's newest policy under its own run spec, written as the table
    `trainer start --policy-verification F` reads; a bad use is refused in one line."""
    out = tmp_path / "thresholds.toml"
    chain = ["--rpc-url", pool.anvil.rpc_url, "--deployments", str(pool.deployments), "--kubo-api", pool.kubo_api,
             "--devnet-dir", str(tmp_path / "no-devnet")]
    assert validator_main(["calibrate", "--pool", str(pool.pool_id), *chain]) == EXIT_USAGE
    assert "--pool needs --out" in capsys.readouterr().err
    assert validator_main(["calibrate", "--pool", str(pool.pool_id), "--out", str(out), "--dtypes", "bfloat16",
                           "--batch-sizes", "2", "--prompts", "4", "--seeds-per-position", "4", *chain]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["step"] == pool_state(pool.ledger(0), pool.pool_id).latest_step and printed["out"] == str(out)
    assert out.read_text().startswith(f"# pool {pool.pool_id}, policy step {printed['step']}\n")
    measured = load_policy_verification(out, SPEC)
    assert measured.logit_tolerance == printed["logit_tolerance"] > 0  # bf16 against the float32 reference
    assert measured.margin_tokens > 0
    assert not list(tmp_path.glob(".thresholds.toml.*"))  # written atomically: no temporary file left


def test_validator_calibrate_pool_every_k_recalibrates_when_k_more_policies_are_out(pool: ProtocolPool,
                                                                                     tmp_path: Path) -> None:
    """`--every 1` keeps running: one table for the newest policy at start, another once the trainer publishes the
    next one (the file rewritten in place, atomically)."""
    out = tmp_path / "thresholds.toml"
    command = [sys.executable, "-m", "validator.cli", "calibrate", "--pool", str(pool.pool_id), "--out", str(out),
               "--every", "1", "--dtypes", "bfloat16", "--batch-sizes", "2", "--prompts", "2", "--seeds-per-position",
               "2", "--rpc-url", pool.anvil.rpc_url, "--deployments", str(pool.deployments), "--kubo-api",
               pool.kubo_api, "--devnet-dir", str(tmp_path / "no-devnet")]
    daemon = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        first = json.loads(_line(daemon, 120))
        step = pool_state(pool.ledger(0), pool.pool_id).latest_step
        assert first["step"] == step
        publisher(pool, "trainer-next", LOOSER)(step + 1, pool.model.state_dict())
        second = json.loads(_line(daemon, 120))
        assert second["step"] == step + 1
        assert out.read_text().startswith(f"# pool {pool.pool_id}, policy step {step + 1}\n")
    finally:
        daemon.kill()
        daemon.wait()


def _line(process: subprocess.Popen, timeout_s: float) -> str:
    """The process's next stdout line, or a failure after `timeout_s`."""
    ready, _, _ = select.select([process.stdout], [], [], timeout_s)
    assert ready, f"no output in {timeout_s} s"
    return process.stdout.readline()
