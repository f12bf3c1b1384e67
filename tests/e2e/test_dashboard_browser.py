"""The explorer in a real browser. A short real run (anvil + Kubo + tiny policy, an honest and an adversarial
worker, the validator, checkpoints with metrics published by the trainer's publisher): headless Chromium shows
the pool, the challenged submission with its reason and evidence, and the learning curve on the pool's and the
trainer's page. A real court run (tests/support/court_scenario.py): the pool with its owner's figures, the court, a
worker following its slash to the evidence, attest-all's page following its overturned verdict to the votes
and the stake it lost, an accepted work's checks. Screenshots go to runs/explorer/."""

from __future__ import annotations

import threading

import pytest

from adversaries.workers import cycling, selective_upload
from dashboard.service import ExplorerService, free_port
from tests.support.court_scenario import CourtRun
from tests.e2e.test_protocol import SPEC, Protocol
from tests.support.paths import ROOT
from tests.support.webdriver import CHROMEDRIVER, CHROMIUM, Browser
from trainer.bootstrap import init_policy
from trainer.config import ModelSpec
from trainer.publish import IpfsPublisher

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
        lines = {1: {"step": 1, "reward": 0.25, "accuracy": 0.1, "clipped_fraction": 0.02, "staleness_mean": 0.0,
                     "staleness_histogram": {"0": 4}, "files_consumed": 2, "rejected_files": 0},
                 2: {"step": 2, "reward": 0.5, "accuracy": 0.3, "clipped_fraction": 0.05, "staleness_mean": 1.0,
                     "staleness_histogram": {"1": 4}, "files_consumed": 1, "rejected_files": 0},
                 # no file taken in since step 2: the step trains on groups buffered from earlier files, as the
                 # trainer writes it (reward None, "reward None" in its log), and their staleness grows
                 3: {"step": 3, "reward": None, "batch_reward": 0.375, "accuracy": 0.3, "clipped_fraction": 0.05,
                     "staleness_mean": 2.0, "staleness_histogram": {"2": 4}, "files_consumed": 0, "rejected_files": 0}}
        publisher = IpfsPublisher(run.ledger(2), run.kubo, run.pool_id, model.config, tokenizer, 2, tmp_path / "trainer",
                                  metrics_of=lines.get)
        for step in (1, 2, 3):
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
        browser.screenshot(SHOTS / "evidence-reward.png")

        browser.get(f"{url}/#/pool/{run.pool_id}/trainer")
        staleness = browser.wait_for(lambda: browser.script(
            "const v = [...document.querySelectorAll('#curve circle.point[data-series=staleness_mean]')]"
            ".map(c => Number(c.dataset.value)); return v.length === 3 && v"), what="the trainer's three steps")
        assert staleness == [0.0, 1.0, 2.0]
        steps = browser.wait_for(lambda: browser.script(
            "return [...document.querySelectorAll('#steps tbody tr')].map(r => [...r.cells].map(c => c.innerText.trim()))"),
            what="the steps")
        heads = browser.texts("#steps th")
        cell = lambda row, head: row[heads.index(head)]  # noqa: E731
        assert [cell(r, "step") for r in steps] == ["1", "2", "3"]
        assert [cell(r, "reward") for r in steps[:2]] == ["0.250", "0.500"]
        # a step with no reward says why (no file since the previous step), what it trained on and its mean reward
        assert cell(steps[2], "reward").startswith("none: no file taken in since the previous step")
        assert "4 groups buffered from earlier files" in cell(steps[2], "reward") and "0.375" in cell(steps[2], "reward")
        assert [(cell(r, "files taken in"), cell(r, "groups trained on")) for r in steps] == [
            ("2", "4"), ("1", "4"), ("0", "4")]
        browser.screenshot(SHOTS / "trainer.png")
    finally:
        if browser is not None:
            browser.close()
        if service is not None:
            service.stop()
        run.close()


@pytest.fixture(scope="module")
def court_explorer(tmp_path_factory, kubo_node):
    """One real court run (tests/support/court_scenario.py) with an explorer over it and a headless browser."""
    run = CourtRun.build(tmp_path_factory.mktemp("browser-court"), kubo_node.api_multiaddr)
    service = browser = None
    try:
        service = ExplorerService(tmp_path_factory.mktemp("browser-index") / "index.sqlite", run.anvil.rpc_url,
                                  run.deployment, run.kubo_api, port=free_port(), poll_s=0.2)
        url = service.start()
        browser = Browser(free_port(), tmp_path_factory.mktemp("chromedriver") / "chromedriver.log")
        yield run, url, browser
    finally:
        if browser is not None:
            browser.close()
        if service is not None:
            service.stop()
        run.close()


LOADED = 90.0
"""Seconds a court page may take to show (make test runs four modules at once on two cores)."""


def _click(browser: Browser, css: str, text: str = "") -> None:
    """Click the first element matching `css` whose text contains `text` (as a person would)."""
    browser.wait_for(lambda: browser.script(
        "const e = [...document.querySelectorAll(arguments[0])].find(e => e.innerText.includes(arguments[1]));"
        "if (e) e.click(); return !!e;", css, text), what=f"a link {css} {text!r}", timeout=LOADED)


def test_a_person_follows_an_adversary_s_file_to_its_evidence_and_a_verdict_to_its_votes(court_explorer):
    run, url, browser = court_explorer
    text = lambda css: " ".join(browser.texts(css))  # noqa: E731

    browser.get(f"{url}/")
    browser.wait_for(lambda: browser.texts("#pools tbody tr"), what="the pools", timeout=LOADED)
    browser.get(f"{url}/pool/{run.pool_id}")  # the URL the demo prints: redirected to the page
    browser.wait_for(lambda: len(browser.texts("#court-validators tbody tr")) == 5, what="the bonded validators", timeout=LOADED)
    assert browser.texts("#pool-title") == [f"Pool {run.pool_id}"]
    assert "adversary rate" in text("#owner") and "50.0 %" in text("#owner") and "finality latency" in text("#owner")
    browser.screenshot(SHOTS / "court-pool.png")

    browser.get(f"{url}/#/pool/{run.pool_id}/court")
    browser.wait_for(lambda: len(browser.texts("#cases tbody tr")) == 5, what="the cases", timeout=LOADED)
    assert "wrong-verdict slash" in text("#rules") and "void" in text("#cases")
    browser.screenshot(SHOTS / "court.png")

    # the worker: why was I slashed? one click from its page to the evidence
    browser.get(f"{url}/#/worker/{run.worker}")
    browser.wait_for(lambda: "TOPLOC" in text("#slashes") and "DISPUTE" in text("#slashes"), what="the slashes", timeout=LOADED)
    browser.screenshot(SHOTS / "worker.png")
    _click(browser, "#slashes a.why", "TOPLOC")
    browser.wait_for(lambda: browser.texts("#measurements tbody tr"), what="the measured values", timeout=LOADED)
    assert browser.texts("#reason") == ["TOPLOC"]
    assert "exponent matches" in text("#measurements") and "mantissa error" in text("#measurements")
    assert "the validator did not pick them" in text("#spot-check")
    assert "TOPLOC" in text("#explanation .check")
    # a chunk that matched no exponent reads as such, not as the proof's sentinel 2^64
    assert "none: no exponent matched" in text("#measurements") and "18446744073709551616" not in text("#measurements")
    # the failing completions at a glance: counts, the worst few, the rest one click away
    summary = " ".join(text("#failing-summary").split())
    assert "4 completions of 8 (4 checked in full)" in summary and "failing proof chunks 6" in summary
    assert "exponent matches: 1" in summary and "mantissa error, mean: 1" in summary
    worst = browser.texts("#failing-worst tbody tr")
    assert len(worst) == 3 and all("0, 1" in r for r in worst[:2])
    assert text("#failing-rest summary") == "the other 1 failing completion"
    rest_open = "return document.querySelector('#failing-rest').open"
    assert browser.script(rest_open) is False
    _click(browser, "#failing-rest summary")
    browser.wait_for(lambda: browser.script(rest_open), what="the other failing completions", timeout=LOADED)
    assert len(browser.texts("#failing-rest-table tbody tr")) == 1
    browser.screenshot(SHOTS / "evidence.png")

    # attest-all: its overturned verdict, to the dispute's votes and the stake it lost
    browser.get(f"{url}/#/validator/{run.judges['overturn']}")
    browser.wait_for(lambda: "overturned" in text("#verdicts"), what="the overturned verdict", timeout=LOADED)
    assert "wrong verdict 60.0000" in text(f"#validator-pool-{run.pool_id}")
    assert browser.script("return document.querySelectorAll('#earnings circle.point').length") > 0
    browser.screenshot(SHOTS / "validator.png")
    browser.script("[...document.querySelectorAll('#verdicts tbody tr')].find(r => r.querySelector('.overturned'))"
                   ".querySelector('a.case-link').click()")  # the overturned one (it may have judged others too)
    browser.wait_for(lambda: len(browser.texts("#votes tbody tr")) == 3, what="the committee's votes", timeout=LOADED)
    votes = text("#votes")
    assert votes.count("invalid") == 2 and "valid" in votes.replace("invalid", "") and "10.0000" in votes
    assert "wrong verdict" in text("#penalties") and "60.0000" in text("#penalties")
    assert "dispute share" in text("#payments") and "bounty" in text("#payments")
    assert "keccak256" in text("#committee")
    # a final case says so; none of its deadlines counts down
    closed = browser.wait_for(lambda: text("#case-closed"), what="the case's finality", timeout=LOADED)
    assert closed.startswith("final since") and "no deadline runs" in closed
    assert "(in " not in text("#deadlines")
    browser.screenshot(SHOTS / "case.png")

    # the overturned work: judged by the first verdict's judge (not the disputer that won); its evidence once
    browser.get(f"{url}/#/work/0x{run.works['overturn'].hex()}")
    browser.wait_for(lambda: browser.texts("#evidence"), what="the overturned work's evidence", timeout=LOADED)
    judged_by = browser.script("return document.querySelector('#judged-by a').getAttribute('href')")
    assert judged_by.lower() == f"#/validator/{run.judges['overturn']}".lower() != f"#/validator/{run.disputer}".lower()
    assert browser.texts("#dispute-evidence") == [] and text("#main").count("failed check") == 1
    assert "REWARD" in text("#evidence")

    browser.get(f"{url}/#/work/0x{run.works['accepted'].hex()}")
    browser.wait_for(lambda: browser.texts("#checks"), what="the checks an accepted work passed", timeout=LOADED)
    assert "TOPLOC proofs" in text("#checks") and "RewardsClaimed" in text("#timeline")
    browser.get(f"{url}/#/pool/{run.pool_id}/trainer")
    browser.wait_for(lambda: browser.texts("#trainer-title"), what="the trainer's page", timeout=LOADED)
    assert "error" not in " ".join(browser.texts("#error"))
