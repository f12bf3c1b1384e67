"""bench.gas.per_file: the batched path's figures per accepted file, from the measured calls (the calls themselves are
measured on anvil by `python -m bench.gas`)."""

from __future__ import annotations

from bench import gas


def _figures() -> dict[str, dict[str, int]]:
    totals = {"batches.postBatch (256 leaves)": 51_200, "batches.claim (32 leaves)": 320_000,
              "batches.openEpoch": 64_000, "forcedErrors.revealLink": 64_000, "batches.challenge (one leaf)": 140_000,
              "submitWork": 80_000, "attest": 35_000, "claim": 65_000}
    return {name: {"total": t, "execution": t - 21_000} for name, t in totals.items()}


def test_a_file_pays_its_share_of_a_batch_a_claim_an_epoch_and_v_reveals() -> None:
    out = gas.per_file(_figures())
    base = 51_200 / 256 + 320_000 / 32 + 64_000 / gas.EPOCH_FILES  # 200 + 10,000 + 2
    assert out["gas_per_file_permissioned"] == round(base)
    assert out["gas_per_file_v30"] == round(base + 30 * 64_000 / gas.EPOCH_FILES)  # + 60
    assert out["gas_per_file_v3"] < out["gas_per_file_v10"] < out["gas_per_file_v30"]
    assert out["tx_per_file"] == round(1 / 256 + 1 / 32 + 31 / gas.EPOCH_FILES, 4)
    assert out["slots_left_per_file"] == round(1 / 256 + 31 / gas.EPOCH_FILES, 4)
    assert out["gas_disputed_file"] == 140_000
    assert out["legacy_gas_per_file_permissioned"] == 180_000
