"""A pool of decoding processes (trainer/decode_pool.py) refuses a corrupt rollout file with the words of the trainer's
own process, and a file that kills its decoding process is refused, not the trainer's death. Real `decode_rollouts`, in
real 'forkserver' processes; this module stays light to import (each fresh decoding process imports it for
`_decode_or_die`). The ledger source's use of the pool: test_decode_pool_intake.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from protocol.rollouts import (
    RolloutBatch,
    RolloutFileError,
    RolloutHeader,
    RolloutSample,
    RolloutSchemaError,
    decode_rollouts,
    encode_rollouts,
)
from protocol.runspec import SamplingSpec
from trainer.decode_pool import RolloutDecoder

KILLER = b"this file kills the process that decodes it"


def rollout_file(nonce: int) -> bytes:
    """A small valid rollout file, different for each nonce."""
    header = RolloutHeader(chain_id=31337, pool_contract="0x" + "34" * 20, pool_id=1, nonce=nonce, policy_step=0,
                           manifest_digest="0x" + "ab" * 32, worker="0x" + "12" * 20, task={"name": "rev"},
                           sampling=SamplingSpec(group_size=2, max_tokens=4), proof_chunk=2)
    samples = [RolloutSample(group=g, sample=s, prompt_index=nonce + g, prompt_ids=[1, 7, nonce], completion_ids=[5, s],
                             logprobs=[-0.5, -0.25 * s], reward=float(s), finish_reason="eos", seed=nonce * 4 + s,
                             proofs=[bytes([g, s]) * 129]) for g in range(2) for s in range(2)]
    return encode_rollouts(RolloutBatch(header=header, samples=samples))


CORRUPT = (b"PAR1 not a rollout file PAR1", rollout_file(1)[:-40], rollout_file(2)[:100])
"""Not Parquet, a cut footer, a cut body."""


def _decoding_pid(_data: bytes) -> int:
    return os.getpid()


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _decode_or_die(data: bytes) -> RolloutBatch:
    """`decode_rollouts`, except that one file kills the process, as a crash in the Parquet reader would."""
    if data == KILLER:
        os._exit(1)
    return decode_rollouts(data)


@pytest.mark.parametrize("data", CORRUPT, ids=["not-parquet", "cut-footer", "cut-body"])
def test_a_corrupt_file_is_refused_in_a_pool_with_the_words_of_the_in_process_refusal(data):
    with pytest.raises(RolloutFileError) as in_process:
        RolloutDecoder(0).submit(data).result()
    pool = RolloutDecoder(2)
    try:
        with pytest.raises(RolloutFileError) as pooled:
            pool.submit(data).result()
    finally:
        pool.close()
    assert type(pooled.value) is type(in_process.value) and str(pooled.value) == str(in_process.value)


def test_a_file_that_kills_its_decoding_process_is_refused_and_the_files_beside_it_are_decoded():
    pool = RolloutDecoder(2, decode=_decode_or_die)
    try:
        first, killer, *rest = [pool.submit(data) for data in (rollout_file(1), KILLER, rollout_file(2), rollout_file(3))]
        assert first.result() == decode_rollouts(rollout_file(1))
        with pytest.raises(RolloutSchemaError, match="the decoding process died reading this file"):
            killer.result()
        assert [d.result() for d in rest] == [decode_rollouts(rollout_file(2)), decode_rollouts(rollout_file(3))]
        assert pool.submit(rollout_file(4)).result() == decode_rollouts(rollout_file(4))  # the pool lives on
        assert pool.restarts >= 1
    finally:
        pool.close()


TRAINER_KILLED = """
import os, signal, sys
from tests.unit.trainer.test_decode_pool import _decoding_pid
from trainer.decode_pool import RolloutDecoder
if __name__ == "__main__":
    pool = RolloutDecoder(2, decode=_decoding_pid)
    print(*{pool.submit(bytes(i)).result() for i in range(8)}, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_decoding_processes_end_when_the_trainer_is_killed(tmp_path):
    script = tmp_path / "killed.py"  # not trainer.py: it would hide the trainer package
    script.write_text(TRAINER_KILLED)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[3], env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])})
    assert done.returncode == -signal.SIGKILL, done.stderr
    pids = [int(pid) for pid in done.stdout.split()]
    assert pids and os.getpid() not in pids
    deadline = time.monotonic() + 60  # a bound on a hang: they end within a moment of the kill
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_running(pid) for pid in pids)
