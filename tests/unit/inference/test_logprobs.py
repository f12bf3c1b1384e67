"""Chunked log-probabilities and entropies (inference/logprobs.py) against the plain full log-softmax:
same values, same gradients, and no float32 [positions, V] tensor kept for backward."""

import pytest
import torch
import torch.nn.functional as F

from inference.logprobs import token_entropy, token_logprobs, token_logprobs_and_entropy


def _reference_logprobs(logits, targets, temperature):
    logp = F.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def _reference_entropy(logits, temperature):
    logp = F.log_softmax(logits.float() / temperature, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def _inputs(dtype=torch.float32, shape=(3, 7), vocab=50, seed=0):
    gen = torch.Generator().manual_seed(seed)
    logits = (4 * torch.randn(*shape, vocab, generator=gen)).to(dtype)
    targets = torch.randint(0, vocab, shape, generator=gen)
    upstream = torch.randn(*shape, generator=gen)
    return logits, targets, upstream


@pytest.mark.parametrize("chunk_rows", [1, 4, None])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_values_and_gradients_equal_the_full_log_softmax(chunk_rows, temperature):
    logits, targets, upstream = _inputs()
    ours = logits.clone().requires_grad_()
    ref = logits.clone().requires_grad_()
    logp = token_logprobs(ours, targets, temperature, chunk_rows=chunk_rows)
    expected = _reference_logprobs(ref, targets, temperature)
    assert logp.shape == targets.shape and logp.dtype == torch.float32
    torch.testing.assert_close(logp, expected, rtol=1e-6, atol=1e-6)
    (logp * upstream).sum().backward()
    (expected * upstream).sum().backward()
    torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("chunk_rows", [1, 5, None])
@pytest.mark.parametrize("temperature", [1.0, 1.3])
def test_entropy_values_and_gradients_equal_the_full_log_softmax(chunk_rows, temperature):
    logits, _, upstream = _inputs(seed=1)
    ours = logits.clone().requires_grad_()
    ref = logits.clone().requires_grad_()
    entropy = token_entropy(ours, temperature, chunk_rows=chunk_rows)
    expected = _reference_entropy(ref, temperature)
    torch.testing.assert_close(entropy, expected, rtol=1e-5, atol=1e-6)
    (entropy * upstream).sum().backward()
    (expected * upstream).sum().backward()
    torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("entropy_weight", [0.0, 0.3])
def test_one_pass_logprobs_and_entropy_have_both_gradients(entropy_weight):
    logits, targets, upstream = _inputs(seed=2)
    ours = logits.clone().requires_grad_()
    ref = logits.clone().requires_grad_()
    logp, entropy = token_logprobs_and_entropy(ours, targets, 0.8, chunk_rows=3)
    if entropy_weight == 0.0:
        entropy = entropy.detach()  # as the loss does without an entropy bonus
    ref_logp, ref_entropy = _reference_logprobs(ref, targets, 0.8), _reference_entropy(ref, 0.8)
    torch.testing.assert_close(logp, ref_logp, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(entropy, ref_entropy.detach(), rtol=1e-5, atol=1e-6)
    ((logp + entropy_weight * entropy) * upstream).sum().backward()
    ((ref_logp + entropy_weight * ref_entropy) * upstream).sum().backward()
    torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-4, atol=1e-6)


def test_bf16_logits_are_computed_in_float32_and_get_a_bf16_gradient():
    logits, targets, upstream = _inputs(dtype=torch.bfloat16)
    ours = logits.clone().requires_grad_()
    ref = logits.clone().requires_grad_()
    logp = token_logprobs(ours, targets, 0.9, chunk_rows=2)
    expected = _reference_logprobs(ref, targets, 0.9)
    assert logp.dtype == torch.float32
    torch.testing.assert_close(logp, expected, rtol=1e-6, atol=1e-6)
    (logp * upstream).sum().backward()
    (expected * upstream).sum().backward()
    assert ours.grad.dtype == torch.bfloat16
    torch.testing.assert_close(ours.grad, ref.grad)


def test_gradcheck_in_double_precision():
    logits, targets, _ = _inputs(dtype=torch.float64, shape=(2, 3), vocab=6)
    logits.requires_grad_()
    assert torch.autograd.gradcheck(lambda x: token_logprobs(x, targets, 0.8, chunk_rows=2), (logits,))
    assert torch.autograd.gradcheck(lambda x: token_entropy(x, 0.8, chunk_rows=4), (logits,))
    assert torch.autograd.gradcheck(lambda x: token_logprobs_and_entropy(x, targets, 1.0, chunk_rows=5), (logits,))


def test_the_loss_formula_reads_the_same_functions():
    from trainer import loss

    assert loss.token_logprobs is token_logprobs and loss.token_logprobs_and_entropy is token_logprobs_and_entropy


def _saved_bytes(fn, logits):
    """Bytes autograd keeps for backward, not counting storage shared with `logits` itself."""
    seen: list[int] = []

    def pack(t):
        if t.untyped_storage().data_ptr() != logits.untyped_storage().data_ptr():
            seen.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(logits)
    return sum(seen)


def test_nothing_of_size_positions_by_vocabulary_is_kept_for_backward():
    positions, vocab = 64, 2048
    logits = torch.randn(4, positions // 4, vocab, requires_grad=True)
    targets = torch.randint(0, vocab, (4, positions // 4))
    full = positions * vocab * 4
    assert _saved_bytes(lambda x: _reference_logprobs(x, targets, 0.7), logits) >= full  # the old way
    assert _saved_bytes(lambda x: token_logprobs(x, targets, 0.7, chunk_rows=8), logits) <= 64 * positions
    assert _saved_bytes(lambda x: token_entropy(x, 0.7, chunk_rows=8), logits) <= 64 * positions
    assert _saved_bytes(lambda x: token_logprobs_and_entropy(x, targets, 0.7), logits) <= 64 * positions


def test_a_non_positive_temperature_is_refused():
    logits, targets, _ = _inputs()
    with pytest.raises(ValueError, match="temperature"):
        token_logprobs(logits, targets, 0.0)
    with pytest.raises(ValueError, match="temperature"):
        token_entropy(logits, -1.0)
