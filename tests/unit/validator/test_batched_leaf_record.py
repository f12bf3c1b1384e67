"""A batched leaf waiting in the validator's retry book survives a restart whole (validator.outcome.Submission's record):
its WorkBatches binding, its epoch's beacon and its batch, without which its file would be checked against the
ComputePool's binding and its challenge could not find its proofs; a `submitWork` submission's record is unchanged."""

from __future__ import annotations

import json

from validator.outcome import Submission


def test_a_batched_leafs_record_round_trips_and_a_submissions_has_no_batch_fields():
    leaf = Submission(b"\x01" * 32, 1, "0x" + "ab" * 20, 3, 16, 5 << 32 | 7, b"\x02" * 32, submitted_at=100,
                      block_number=12, block_hash=b"\x03" * 32, contract="0x" + "cd" * 20, seed_hash=b"\x04" * 32,
                      batch_id=b"\x05" * 32)
    record = json.loads(json.dumps(leaf.to_record()))
    back = Submission.from_record(record)
    assert (back.contract, back.seed_hash, back.batch_id, back.nonce) == (leaf.contract, leaf.seed_hash, leaf.batch_id,
                                                                          5 << 32 | 7)
    plain = Submission(b"\x01" * 32, 1, "0x" + "ab" * 20, 3, 16, 9, b"\x02" * 32, seed_block=40)
    assert not {"contract", "seed_hash", "batch_id"} & set(plain.to_record())
    again = Submission.from_record(plain.to_record())
    assert again.batch_id is None and again.seed_hash is None and again.contract is None and again.seed_block == 40
