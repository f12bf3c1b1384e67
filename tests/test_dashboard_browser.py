"""The explorer in a real browser: a short real run (anvil + Kubo + tiny policy, an honest and an
adversarial worker, the validator, checkpoints with metrics published by the trainer's publisher),
then headless Chromium shows the pool, the challenged submission with its reason and evidence, and
the learning curve's points. Screenshots go to runs/explorer/."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dashboard.service import ExplorerService, free_port
from examples.adversaries.workers import cycling, selective_upload
from tests.test_protocol import SPEC, Protocol
from tests.webdriver import CHROMEDRIVER, CHROMIUM, Browser
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.publish import IpfsPublisher

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "runs" / "explorer"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (CHROMEDRIVER.exists() and CHROMIUM.exists()),
                       reason="needs Debian's chromium + chromium-driver (scripts/install_chromium.sh)"),
]


def test_a_person_sees_the_pool_the_challenge_with_its_evidence_and_the_curve(tmp_path, kubo_node):
    run = Protocol(tmp_path, kubo_node)
    service = browser = None
    try:
        stop = threading.Event()
        honest = run.worker(4)
        assert honest.step_once(stop)
        adversary = run.worker(5, producer=cycling(["fabricated_rewards"]), upload=selective_upload)
        assert adversary.step_once(stop)
        validator = run.validator()
        try:
            assert validator.run_once() == 2
        finally:
            validator.close()
        # The trainer's own publisher puts each policy and its metrics line on IPFS and on-chain.
        model, tokenizer = init_policy(SPEC, ModelSpec(hidden=32, layers=1, heads=2), warm_steps=1, warm_lr=1e-3)
        lines = {1: {"step": 1, "reward": 0.25, "accuracy": 0.1, "clipped_fraction": 0.02, "staleness_mean": 0.0},
                 2: {"step": 2, "reward": 0.5, "accuracy": 0.3, "clipped_fraction": 0.05, "staleness_mean": 1.0}}
        publisher = IpfsPublisher(run.ledger(2), run.kubo, run.pool_id, model.config, tokenizer, 2, tmp_path / "trainer",
                                  metrics_of=lines.get)
        for step in (1, 2):
            publisher(step, model.state_dict())

        service = ExplorerService(tmp_path / "index.sqlite", run.anvil.rpc_url, run.deployment, run.kubo_api,
                                  port=free_port())
        url = service.start()
        browser = Browser(free_port(), tmp_path / "chromedriver.log")
        browser.get(f"{url}/#/pool/{run.pool_id}")
        browser.wait_for(lambda: "REWARD" in " ".join(browser.texts("#submissions td")), what="the challenge")
        assert browser.texts("#pool-title") == [f"Pool {run.pool_id}"]
        rows = browser.texts("#submissions tbody tr")
        assert len(rows) == 2
        assert any("accepted" in r for r in rows) and any("rejected" in r and "REWARD" in r for r in rows)
        points = browser.wait_for(lambda: browser.script(
            "return [...document.querySelectorAll('#curve circle.point[data-series=reward]')]"
            ".map(c => [Number(c.dataset.step), Number(c.dataset.value)])"), what="the curve")
        assert points == [[1, 0.25], [2, 0.5]]
        workers = browser.texts("#workers tbody tr")
        assert len(workers) == 2
        browser.screenshot(SHOTS / "pool.png")

        challenged = browser.script("return [...document.querySelectorAll('#submissions tbody tr')]"
                                    ".find(r => r.textContent.includes('REWARD')).querySelector('a').href")
        browser.get(challenged)
        browser.wait_for(lambda: browser.texts("#evidence"), what="the evidence")
        assert browser.texts("#reason") == ["REWARD"]
        evidence = browser.texts("#evidence")[0]
        assert "REWARD" in evidence and "reward" in evidence.lower()
        browser.screenshot(SHOTS / "evidence.png")
    finally:
        if browser is not None:
            browser.close()
        if service is not None:
            service.stop()
        run.close()
