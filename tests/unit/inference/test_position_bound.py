"""Exact mode's positions lie below 2^32 (docs/protocol.md R5.6, issue 45): RoPE turns are (p · F_i) mod 2^32, so a
position past 2^32 − 1 would wrap onto a smaller one. The integer policy and the reference written from the spec both
refuse it rather than compute a wrapped rotation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from inference import exact
from inference.tiny import BOS_ID, build_char_tokenizer, build_tiny_llama
from tests.support import exact_reference

POLICY = exact.quantise_policy(build_tiny_llama(len(build_char_tokenizer()), 0, hidden=32, layers=1))


@pytest.mark.parametrize("position", [2**32, 2**40, -1])
def test_the_integer_policy_and_the_reference_refuse_a_position_outside_one_word(position: int) -> None:
    with pytest.raises(exact.ExactOverflowError, match=r"positions must lie in \[0, 2\^32\)"):
        POLICY.forward(torch.tensor([[BOS_ID]]), torch.tensor([[position]]), torch.ones(1, 1, dtype=torch.int64),
                       exact.KVCache())
    frequency = POLICY.rope_frequency.numpy()
    with pytest.raises(ValueError, match=r"a RoPE position lies in \[0, 2\^32\)"):
        exact_reference.rope(np.ones((1, 2 * len(frequency)), dtype=np.int64), frequency, position)


def test_the_last_position_of_the_word_is_computed() -> None:
    hidden = POLICY.forward(torch.tensor([[BOS_ID]]), torch.tensor([[2**32 - 1]]), torch.ones(1, 1, dtype=torch.int64),
                            exact.KVCache())
    assert hidden.shape[:2] == (1, 1)
    frequency = POLICY.rope_frequency.numpy()
    assert exact_reference.rope(np.ones((1, 2 * len(frequency)), dtype=np.int64), frequency, 2**32 - 1).shape == \
        (1, 2 * len(frequency))
