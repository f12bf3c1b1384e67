"""Every attack on proofswarm, by name: the catalogue the benches, the tests, the demo and the docs use.

The definitions live in this room, each once:
  models.py       changed copies of a policy (quantised, perturbed, other weights)
  completions.py  changes to completions in either form (rollout samples, the proof suite's records)
  files.py        hostile rollout-file bytes, built to stop a validator rather than to pass its checks
  workers.py      dishonest workers of the protocol, built on the honest worker's libraries (a daemon each)
  samplers.py     attackers of a pool's checkpoint at the profile it runs (their own or forged proofs)
  toploc.py       the proof suite: attackers and honest variations, and the judge that runs the checks
  validators.py   dishonest validators of court pools (a daemon each)

Below the roles but for two: workers.py and samplers.py build on the worker (its `Policy` and `make_batch`;
the daemon), validators.py on the validator (`validator.court.Conduct`, its CLI) — an adversary is an honest role
with one change. This module imports nothing: reading a name costs nothing, and tests/unit/adversaries/test_adversaries.py holds
every table of the room to it.
"""

WORKER_ATTACKS = {
    "fabricated_rewards": "claims every completion solved the task",
    "cherry_picked_prompts": "answers prompts of its own choosing (another nonce's assignment)",
    "tampered_completion": "changes one token of one completion",
    "wrong_temperature": "samples at half the pool's temperature",
    "greedy_decoding": "decodes greedily instead of sampling",
    "other_weights": "generates with a randomly initialised model of the policy's architecture",
    "perturbed_weights": "generates with every weight perturbed by 1 %",
    "corrupted_proofs": "flips the bytes of every TOPLOC proof",
    "truncated_completion": "cuts a completion short and calls it finished",
    "withheld": "submits an honest file and never uploads it",
    "hostile_answers": "answers with code that must never run in a scorer, claiming reward 1.0",
}
"""adversaries.workers.ATTACKS: a dishonest rollout file for a submission (`python -m adversaries.workers`)."""

FILE_ATTACKS = {
    "huge_version_string": "a header `version` of 250,000 characters",
    "deep_header": "a header nested 99,000 levels deep",
    "long_integer": "a `policy_step` of 5,000 digits",
    "negative_token": "a token id of -1",
    "token_bomb": "a few KB that decompress to 25 million tokens",
}
"""adversaries.files.HOSTILE_FILES: an honest file's bytes turned into an attack on the reader."""

MODEL_CHANGES = {
    "int8 weights": "every matrix quantised to 8 bits, one scale per output channel",
    "int4 weights (groups of 32)": "every matrix quantised to 4 bits, one scale per 32 inputs",
    "layer 0 x 1.01": "every weight of the first decoder layer perturbed by 1 %",
}
"""adversaries.models.CHANGES: the changed checkpoints bench.attacks samples from."""

SAMPLER_ATTACKS = {
    "proofs copied from the next completion": "each completion carries the next one's proofs",
    "seeds of its own choosing": "samples with seeds it picked, not the derived ones",
    "int8 weights": "samples from the int8 checkpoint, with its own proofs",
    "int8 weights, forged": "the same, proofs and logprobs forged by a prefill of the real checkpoint",
    "int4 weights (groups of 32), forged": "samples from the int4 checkpoint, forged",
    "layer 0 x 1.01": "samples from the checkpoint with layer 0 perturbed by 1 %, with its own proofs",
    "layer 0 x 1.01, forged": "the same, forged",
    "other weights, forged": "samples from another model, forged",
    "T x 0.95, forged": "samples 5 % colder, forged",
    "T x 1.05, forged": "samples 5 % hotter, forged",
    "logit bias 1.9 eps on answer tokens, forged": "+1.9 ε on the logits of the answer's tokens, forged",
    "out-of-nucleus tokens (top_p 0.9), forged": "samples at top_p 1 in a pool of top_p 0.9, forged",
}
"""adversaries.samplers.attacks: with every worker attack but `withheld` (an upload, not a file), the file attacks
of bench.attacks. The last needs a pool whose tolerance admits top_p 0.9."""

TOPLOC_ATTACKS = {
    "weights from another seed": "another model of the same shape",
    "layer {layer} perturbed by 1%": "one decoder layer's weights perturbed by 1 %, one attack per layer",
    "lower precision: bf16 compute": "computes in bf16 instead of float32",
    "lower precision: fp16 compute": "computes in fp16 instead of float32",
    "lower precision: int8 weights": "int8 weights (per output channel)",
    "one prompt token altered": "answers a prompt with one token changed, claiming the assigned one",
    "one completion token altered": "changes the middle token of each completion",
    "completion truncated": "halves each completion, finish reason `length`",
    "completion truncated + EOS": "halves each completion and appends EOS",
    "greedy instead of sampling": "decodes greedily",
    "sampling at temperature 0.7": "samples colder than the pool",
    "proof copied from another completion": "carries the proofs of an unassigned prompt's completion",
    "proof bytes corrupted": "flips one bit of the first proof",
    "prompt not the assigned one": "answers unassigned prompts",
    "seed not the derived one": "samples with seeds it picked",
}
"""adversaries.toploc.attacks: the proof suite's dishonest submissions (bench.toploc, tests/integration/test_toploc_attacks.py)."""

VALIDATOR_CONDUCTS = {
    "attest-all": "attests every submission without checking it; votes valid",
    "challenge-all": "challenges every submission; votes invalid",
    "silent": "registers and never answers",
    "random-vote": "judges honestly, votes at random",
}
"""adversaries.validators.CONDUCTS (besides `honest`): how a dishonest court validator decides
(`python -m adversaries.validators`)."""
