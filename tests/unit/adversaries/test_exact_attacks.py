"""The adversarial worker attacks exact pools too (`python -m examples.demo --run-spec examples/run-exact.toml`): its
samplers are the integer one with the attacker's model, and its files carry no proofs, as the pool's do."""

from __future__ import annotations

import pytest

from adversaries.workers import ATTACKS, FALLBACK, attack_file
from inference.tiny import build_char_tokenizer, build_tiny_llama, char_vocab
from protocol.rollouts import decode_rollouts
from protocol.runspec import load_run_spec
from protocol.submission import SubmissionBinding
from tests.support.paths import ROOT
from worker.policy import Policy
from worker.produce import make_batch

SPEC = load_run_spec(ROOT / "examples" / "run-exact.toml")
BINDING = SubmissionBinding(chain_id=1, pool_contract="0x" + "00" * 20, pool_id=1, worker="0x" + "ab" * 20, step=0,
                            nonce=3)


@pytest.mark.parametrize("name", [name for name in ATTACKS if name != "withheld"])
def test_each_attack_makes_an_exact_pools_file_that_is_not_the_honest_one(name: str) -> None:
    assert SPEC.inference == "exact"
    policy = Policy(0, b"\x11" * 32, build_tiny_llama(len(char_vocab()), seed=3, hidden=16, layers=1, heads=2),
                    build_char_tokenizer())
    honest = make_batch(policy, SPEC, BINDING)
    used, data, samples = attack_file(name, policy, SPEC, BINDING)
    attack = decode_rollouts(data)
    assert attack.header.proof_chunk == honest.header.proof_chunk == 0 and not any(s.proofs for s in attack.samples)
    assert samples == len(honest.samples) and attack != honest
    # the fallback where the attack would leave the checked file as it was: no proofs to corrupt, or the integer
    # policy absorbing the change (a 1 % perturbation of a tiny model, a greedy draw that is the seeded one)
    assert used in (name, FALLBACK)
