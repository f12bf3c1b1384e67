"""An independent reference of exact mode (docs/protocol.md, "Exact mode"), written from the specification
alone in numpy int64 and Python integers: one sequence at a time, a full prefill, no cache. Nothing of
inference.exact is imported; the sampling words come from tests/support/sampling_reference.py."""

from __future__ import annotations

import hashlib
import math

import numpy as np

from tests.support import sampling_reference

EXP2 = [round(math.log(2) ** j / math.factorial(j) * 2**30) for j in range(8)]
LOG2E = round(math.log2(math.e) * 2**30)
LN2 = round(math.log(2) * 2**30)
LOG2_LN2 = round(math.log2(math.log(2)) * 2**24)
MATRICES = ("q", "k", "v", "o", "gate", "up", "down")


def round_div(a, b):  # type: ignore[no-untyped-def]
    """round(a / b), halves up (b > 0)."""
    return (a + b // 2) // b


def exp_q30(d: np.ndarray) -> np.ndarray:
    y = round_div(np.maximum(d, -64 * 65536) * LOG2E, 2**30)
    k = np.floor_divide(y, 65536)
    f = y - k * 65536
    p = np.full_like(y, EXP2[7])
    for j in range(6, -1, -1):
        p = EXP2[j] + (p * f) // 65536
    return round_div(p, np.left_shift(np.ones_like(p), np.minimum(-k, 62)))


def silu_q16(x: np.ndarray) -> np.ndarray:
    e = exp_q30(-np.abs(x))
    sig = np.where(x >= 0, round_div(np.full_like(e, 2**60), 2**30 + e), round_div(e * 2**30, 2**30 + e))
    return round_div(x * sig, 2**30)


def log2_q24(n: int) -> int:
    k = n.bit_length() - 1
    m = n >> (k - 30) if k >= 30 else n << (30 - k)
    frac = 0
    for _ in range(24):
        m = m * m >> 30
        bit = m >> 31
        m >>= bit
        frac = 2 * frac + bit
    return k * 2**24 + frac


def gumbel_q16(x: int) -> int:
    n = 2 * x + 1
    if x < 2**31:
        h = 2**30 // 24
        for k in range(23, 0, -1):
            h = 2**30 // k + (h * n >> 33)
        log2_e = log2_q24(n * h) - 63 * 2**24
    else:
        d = 33 * 2**24 - log2_q24(2**33 - n)
        log2_e = log2_q24(d) - 24 * 2**24 + LOG2_LN2
    return round_div(-log2_e * LN2, 2**38)


def quantise_matrix(w: np.ndarray, bias: np.ndarray | None) -> dict[str, np.ndarray]:
    w = w.astype(np.float64)
    rows = w.shape[0]
    q = np.zeros(w.shape, dtype=np.int8)
    multiplier = np.zeros(rows, dtype=np.int64)
    shift = np.full(rows, 15, dtype=np.int64)
    for r in range(rows):
        peak = float(np.abs(w[r]).max())
        assert peak < 32
        if peak >= 2.0**-32:
            q[r] = np.round(w[r] * 127 / peak)
            mantissa, exponent = math.frexp(peak / 127)
            multiplier[r] = round(mantissa * 2**15)
            shift[r] = 15 - exponent
    b = np.round(bias.astype(np.float64) * 65536).astype(np.int64) if bias is not None else np.zeros(rows, np.int64)
    return {"weight": q, "multiplier": multiplier, "shift": shift, "bias": b}


def q16(x: np.ndarray) -> np.ndarray:
    return np.round(x.astype(np.float64) * 65536).astype(np.int64)


def quantise(state: dict[str, np.ndarray], config: dict) -> dict[str, np.ndarray]:
    """The integer checkpoint from a Hugging Face float state dict (numpy) and its config dict."""
    heads, kv_heads, layers = config["num_attention_heads"], config["num_key_value_heads"], config["num_hidden_layers"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    out: dict[str, np.ndarray] = {"embed": q16(state["model.embed_tokens.weight"]), "norm": q16(state["model.norm.weight"])}
    head = state.get("lm_head.weight", state["model.embed_tokens.weight"])
    out.update({f"lm_head.{k}": v for k, v in quantise_matrix(head, None).items()})
    for i in range(layers):
        p = f"model.layers.{i}."
        out[f"layers.{i}.input_norm"] = q16(state[p + "input_layernorm.weight"])
        out[f"layers.{i}.post_norm"] = q16(state[p + "post_attention_layernorm.weight"])
        for name in MATRICES:
            module = p + (f"self_attn.{name}_proj" if name in "qkvo" else f"mlp.{name}_proj")
            matrix = quantise_matrix(state[module + ".weight"], state.get(module + ".bias"))
            out.update({f"layers.{i}.{name}.{k}": v for k, v in matrix.items()})
    theta = config.get("rope_theta") or config["rope_parameters"]["rope_theta"]
    out["rope.frequency"] = np.array([round(theta ** (-(2 * i) / head_dim) / (2 * math.pi) * 2**32)
                                      for i in range(head_dim // 2)], dtype=np.int64)
    out["scalars"] = np.array([max(1, round(config["rms_norm_eps"] * 2**32)), round(65536 / math.sqrt(head_dim)),
                               heads, kv_heads, head_dim, layers], dtype=np.int64)
    return out


def digest(checkpoint: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(checkpoint):
        array = np.ascontiguousarray(checkpoint[name])
        h.update(name.encode() + b"\0" + str(array.dtype).encode() + b"\0")
        h.update(b"".join(int(s).to_bytes(4, "little") for s in array.shape))
        h.update(array.astype(array.dtype.newbyteorder("<")).tobytes())
    return h.hexdigest()


def linear(ck: dict[str, np.ndarray], name: str, x: np.ndarray) -> np.ndarray:
    """x [T, in] Q16 -> [T, out] Q16."""
    out = np.zeros((x.shape[0], ck[name + ".weight"].shape[0]), dtype=np.int64)
    w = ck[name + ".weight"].astype(np.int64)
    for t in range(x.shape[0]):
        amax = int(np.abs(x[t]).max())
        assert amax < 2**31
        e = max(0, amax.bit_length() - 15)
        a = -(-amax // 2**e)
        q = round_div(127 * x[t], max(a * 2**e, 1))
        acc = w @ q
        assert np.abs(acc).max(initial=0) < 2**31
        out[t] = round_div(acc * a * ck[name + ".multiplier"], 127 * 2 ** (ck[name + ".shift"] - e))
    return out + ck[name + ".bias"]


def rms_norm(h: np.ndarray, weight: np.ndarray, eps: int) -> np.ndarray:
    assert np.abs(h).max() < 2**24
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        r = math.isqrt(int(sum(int(v) * int(v) for v in h[t])) // h.shape[1] + eps)
        out[t] = round_div(round_div(h[t] * 65536, r) * weight, 65536)
    return out


def cos_sin(turns: int) -> tuple[int, int]:
    k, f = turns >> 20, turns & (2**20 - 1)
    values = []
    for fn in (math.cos, math.sin):
        lo, hi = (round(fn(2 * math.pi * j / 4096) * 2**30) for j in (k, k + 1))
        values.append(lo + round_div((hi - lo) * f, 2**20))
    return values[0], values[1]


def rope(x: np.ndarray, frequency: np.ndarray, position: int) -> np.ndarray:
    """x [heads, hd] at one position."""
    if not 0 <= position < 2**32:
        raise ValueError("a RoPE position lies in [0, 2^32)")
    half = x.shape[-1] // 2
    out = np.zeros_like(x)
    for i in range(half):
        c, s = cos_sin(position * int(frequency[i]) % 2**32)
        out[:, i] = round_div(x[:, i] * c - x[:, i + half] * s, 2**30)
        out[:, i + half] = round_div(x[:, i + half] * c + x[:, i] * s, 2**30)
    return out


def forward(ck: dict[str, np.ndarray], ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Q16 final hidden states and logits of every position of one sequence (positions 0..len-1)."""
    eps, inv_sqrt, heads, kv_heads, hd, layers = (int(v) for v in ck["scalars"])
    n = len(ids)
    h = ck["embed"][ids]
    for i in range(layers):
        x = rms_norm(h, ck[f"layers.{i}.input_norm"], eps)
        q = linear(ck, f"layers.{i}.q", x).reshape(n, heads, hd)
        k = linear(ck, f"layers.{i}.k", x).reshape(n, kv_heads, hd)
        v = linear(ck, f"layers.{i}.v", x).reshape(n, kv_heads, hd)
        q = np.stack([round_div(rope(q[t], ck["rope.frequency"], t) * inv_sqrt, 65536) for t in range(n)])
        k = np.stack([rope(k[t], ck["rope.frequency"], t) for t in range(n)])
        attended = np.zeros((n, heads, hd), dtype=np.int64)
        for head in range(heads):
            kv = head // (heads // kv_heads)
            for t in range(n):
                scores = round_div(k[: t + 1, kv] @ q[t, head], 65536)
                weights = exp_q30(scores - scores.max())
                probs = round_div(weights * 2**15, int(weights.sum()))
                attended[t, head] = round_div(probs @ v[: t + 1, kv], 2**15)
        h = h + linear(ck, f"layers.{i}.o", attended.reshape(n, heads * hd))
        x = rms_norm(h, ck[f"layers.{i}.post_norm"], eps)
        gate, up = linear(ck, f"layers.{i}.gate", x), linear(ck, f"layers.{i}.up", x)
        h = h + linear(ck, f"layers.{i}.down", round_div(silu_q16(gate) * up, 65536))
    hidden = rms_norm(h, ck["norm"], eps)
    return hidden, linear(ck, "lm_head", hidden)


def sample(logits: np.ndarray, seed: int, position: int, temperature: float) -> int:
    """The exact-mode draw from Q16 logits [V]: lowest id among the best scores."""
    if temperature == 0:
        return int(np.argmax(logits))
    scale = round(temperature * 65536)
    words = sampling_reference.words_np(np.full(len(logits), seed, dtype=np.uint64),
                                        np.full(len(logits), position, dtype=np.uint64),
                                        np.arange(len(logits), dtype=np.uint64))
    noise = np.array([gumbel_q16(int(w)) for w in words], dtype=np.int64)
    return int(np.argmax(round_div(logits * 65536, scale) + noise))


def generate(ck: dict[str, np.ndarray], prompt: list[int], seed: int, temperature: float, max_tokens: int,
             eos: set[int]) -> tuple[list[int], np.ndarray]:
    """Tokens and the Q16 logits each was drawn from, by re-running the full prefix at every step."""
    tokens: list[int] = []
    rows = []
    for position in range(max_tokens):
        logits = forward(ck, prompt + tokens)[1][-1]
        rows.append(logits)
        tokens.append(sample(logits, seed, position, temperature))
        if tokens[-1] in eos:
            break
    return tokens, np.stack(rows)
