"""bench.stated_rates end to end on a tiny configuration (one policy age, a few files), its JSON keys and the invariants
between them; its honest books go through the validator's own per-worker e-process, and its bounds are Clopper–Pearson's."""

import json
import math
import random

from bench.stated_rates import book_entry, clopper_pearson, honest_books, main
from proofs.margins import MarginNull
from validator.worker_margins import WorkerMargins

PROFILE_KEYS = {"honest_files", "honest_false_positives", "honest_workers", "honest_workers_challenged",
                "stated_file_rate", "stated_worker_rate", "upper95_file_rate"}


def test_a_tiny_run_reports_every_profile_and_attack_with_consistent_figures(capsys):
    code = main(["--ages", "25", "--files", "3", "--batch-sizes", "16", "--workers", "2", "--worker-files", "3",
                 "--calibration-prompts", "8", "--steering-files", "1", "--budget", "1", "--bias-files", "1",
                 "--bias-prompts", "1", "--attack-files", "1", "--reroll-trials", "1"])
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    profiles = result["profiles"]
    assert {(r["policy_warm_steps"], r["worker_dtype"], r["prompts_per_file"]) for r in profiles} == {
        (25, d, p) for d in ("bfloat16", "float32") for p in (1, 4)}
    for r in profiles:
        assert PROFILE_KEYS <= set(r)
        assert r["honest_files"] == 3 and 0 <= r["honest_false_positives"] <= r["honest_files"]
        assert r["honest_false_positives"] / r["honest_files"] <= r["upper95_file_rate"] <= 1
        assert 0 <= r["honest_workers_challenged"] <= r["honest_workers"] <= 2
        assert r["honest_workers"] == (2 if r["honest_false_positives"] < r["honest_files"] else 0)
        assert r["stated_file_rate"] == result["pools"]["25"]["stated"]["false_positive_rate"]
        assert r["stated_worker_rate"] == result["pools"]["25"]["stated"]["worker_false_positive_rate"]
        assert r["file_rate_holds"] == (r["lower95_file_rate"] <= r["stated_file_rate"])
    attacks = result["attacks"]
    assert set(attacks) == {"steering", "bias_at_floor", "own_proofs", "seed_reroll"}
    steering = attacks["steering"]
    assert steering["court_pool"]["k"] <= steering["permissioned_one_address"]["k"] <= steering["court_pool"]["n"] == 1
    bias = attacks["bias_at_floor"]
    assert bias["n"] == 1 and (bias["floor_checked_tokens"] or 1) > 0
    assert {(r["attack"], r["max_tokens"]) for r in attacks["own_proofs"]} == {
        (f"{m}, own proofs", t) for m in ("int8 weights", "layer 0 x 1.01") for t in (8, 16)}
    assert attacks["seed_reroll"]["checks"]["n"] == 1


def test_honest_books_cross_where_the_validators_books_cross(tmp_path):
    null = MarginNull(tail=(2e-2, 2e-2, 1e-2, 5e-3, 1e-3, 1e-3))
    files = [([64, 64], s) for s in (0.0, 0.5, 1.0, 4.0)]
    entries = [book_entry(null, p, s) for p, s in files]
    result = honest_books(null, entries, workers=12, files=30, rate_=1e-3, rng=random.Random(5))
    rng, challenged = random.Random(5), 0
    for w in range(12):
        book = WorkerMargins(tmp_path / f"book-{w}.json")
        for f in range(30):
            prompts, score = files[rng.randrange(len(files))]
            if book.judge("0x" + "ab" * 20, f"0x{f:064x}", prompts, score, null, 1e-3) is not None:
                challenged += 1
                break
    assert 0 < result["honest_workers_challenged"] == challenged < 12


def test_clopper_pearson_bounds():
    assert math.isclose(clopper_pearson(0, 5000)[1], 1 - 0.05 ** (1 / 5000), rel_tol=1e-6)
    assert clopper_pearson(0, 5000)[0] == 0
    assert math.isclose(clopper_pearson(10, 10)[0], 0.05 ** (1 / 10), rel_tol=1e-6)
    low, high = clopper_pearson(3, 100)
    assert 0.008 < low < 0.03 < high < 0.08
