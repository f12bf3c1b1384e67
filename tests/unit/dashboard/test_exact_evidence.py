"""The explorer reads an exact pool's challenge (docs/protocol.md R5.8): the worker's token against the exact
replay's draw at the first deviating position, with both tokens' Q16 scores and logits."""

from __future__ import annotations

from dashboard.evidence import explain
from protocol.verdicts import Reason

DEVIATION = {"completion": 3, "position": 5, "expected": 17, "got": 42, "expected_logit": 91_234, "got_logit": 90_001,
             "expected_score": 250_000, "got_score": 249_100}


def test_an_exact_deviation_reads_as_the_worker_s_token_against_the_draw():
    doc = {"reason": "SAMPLING", "reason_code": int(Reason.SAMPLING), "message": "completion 3, token 5",
           "failing_samples": [3], "statistics": {"exact_deviation": DEVIATION}, "work_id": "0x" + "ab" * 32}
    explained = explain(doc)
    rows = [(m.measured, m.threshold, m.passes, m.completion) for m in explained.measurements]
    assert rows == [(42, 17, False, 3), (249_100, 250_000, None, 3), (90_001, 91_234, None, 3)]
    assert "position 5" in explained.measurements[0].what
    assert explained.failing_summary.by_check[0].failing == 1
    assert [(c.completion, c.positions) for c in explained.failing_completions] == [(3, [5])]
