// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {IComputePool} from "../src/IComputePool.sol";
import {IValidatorCourt} from "../src/IValidatorCourt.sol";
import {IForcedErrors} from "../src/IForcedErrors.sol";
import {ForcedErrors} from "../src/ForcedErrors.sol";
import {CourtBase} from "./ValidatorCourt.t.sol";

/// A court pool with committed hash chains and forced errors (decision 0009 §1, §2; docs/protocol.md R9.25–R9.28):
/// issue 43's item 1 (audits nobody can predict) and item 2 (checking pays when nobody cheats), the settlement
/// amounts, and the refusals of bad chains, links and parameters.
abstract contract ForcedErrorsBase is CourtBase {
    ForcedErrors internal fe;

    uint32 internal constant EPOCH = 1 hours;
    uint32 internal constant REVEAL_WINDOW = 1 hours;
    uint16 internal constant FORCED_BPS = 1_000;
    uint16 internal constant AUDIT_BPS = 5_000;
    uint96 internal constant JACKPOT = 300 ether;
    uint96 internal constant V_BOND = 100 ether;
    uint96 internal constant W_BOND = 2_100 ether;
    uint96 internal constant FE_SILENCE = 10 ether;
    uint32 internal constant LENGTH = 4;
    uint32 internal constant N = 10; // completions a file: its reward is 10 tokens
    /// Epoch 1's beacon in these tests (`_recordBeacon` sets its anchor block's hash).
    bytes32 internal constant BEACON = keccak256("epoch 1's beacon");
    IForcedErrors.Role internal constant VALIDATOR = IForcedErrors.Role.Validator;
    IForcedErrors.Role internal constant WORKER = IForcedErrors.Role.Worker;

    function setUp() public virtual override {
        super.setUp();
        fe = new ForcedErrors(court);
        vm.startPrank(admin);
        stake.grantRole(stake.SLASHER_ROLE(), address(fe));
        token.mint(owner, 10_000 ether);
        token.mint(alice, 5_000 ether);
        vm.stopPrank();
        vm.startPrank(owner);
        fe.configure(poolId, _feParams());
        token.approve(address(fe), type(uint256).max);
        fe.fundBudget(poolId, 5_000 ether);
        vm.stopPrank();
        vm.prank(alice);
        stake.bond(5_000 ether);
    }

    function _feParams() internal pure returns (IForcedErrors.Params memory) {
        return IForcedErrors.Params({
            forcedBps: FORCED_BPS,
            auditBps: AUDIT_BPS,
            epochLength: EPOCH,
            revealWindow: REVEAL_WINDOW,
            jackpot: JACKPOT,
            validatorBond: V_BOND,
            workerBond: W_BOND,
            silencePenalty: FE_SILENCE
        });
    }

    /// `keccak` applied `n` times.
    function _hashes(bytes32 s, uint256 n) internal pure returns (bytes32 h) {
        h = s;
        for (uint256 i; i < n; ++i) {
            h = keccak256(abi.encode(h));
        }
    }

    function _secret(address who) internal pure returns (bytes32) {
        return keccak256(abi.encode("secret", who));
    }

    /// Epoch `epoch`'s link of a chain from `s` committed in epoch 0 (it ends at epoch LENGTH).
    function _link(bytes32 s, uint32 epoch) internal pure returns (bytes32) {
        return _hashes(s, LENGTH - epoch);
    }

    /// A worker secret whose chain owes (or not) a forced error in alice's next submission in epoch 1 under the
    /// beacon BEACON (a test may pick it: it sets the beacon; a worker cannot, R9.29).
    function _workerSecret(bool forced, uint256 ahead) internal view returns (bytes32 s) {
        uint64 nonce = pools.getMember(poolId, alice).nextNonce + uint64(ahead);
        bytes32 workId = pools.workIdOf(poolId, alice, nonce);
        for (uint256 j;; ++j) {
            s = keccak256(abi.encode("worker", j));
            if (fe.drawn(_link(s, 1), BEACON, workId, FORCED_BPS) == forced) return s;
        }
    }

    /// Anchor epoch `epoch`'s beacon in this block and record it in the next, the anchor's hash set to `value`.
    function _recordBeacon(uint32 epoch, bytes32 value) internal {
        fe.recordBeacon(poolId, epoch);
        uint256 anchor = block.number;
        vm.roll(anchor + 1);
        vm.setBlockhash(anchor, value);
        fe.recordBeacon(poolId, epoch);
    }

    /// Every validator commits its chain (epoch 0), alice commits `workerSecret`'s; then epoch 1 begins and its
    /// beacon (BEACON) is recorded.
    function _commitAll(bytes32 workerSecret) internal {
        _commitChains(workerSecret);
        _recordBeacon(1, BEACON);
    }

    function _commitChains(bytes32 workerSecret) internal {
        for (uint256 i; i < vals.length; ++i) {
            vm.prank(vals[i]);
            fe.commitChain(poolId, VALIDATOR, _hashes(_secret(vals[i]), LENGTH), LENGTH);
        }
        vm.prank(alice);
        fe.commitChain(poolId, WORKER, _hashes(workerSecret, LENGTH), LENGTH);
        vm.warp(fe.genesis(poolId) + EPOCH);
    }

    /// Everyone but `silent` reveals epoch 1's link in its window; the window then closes.
    function _revealEpoch1(bytes32 workerSecret, address silent) internal {
        (uint64 from, uint64 until) = fe.revealWindowOf(poolId, 1);
        vm.warp(from);
        for (uint256 i; i < vals.length; ++i) {
            if (vals[i] == silent) continue;
            vm.prank(vals[i]);
            fe.revealLink(poolId, VALIDATOR, 1, _link(_secret(vals[i]), 1));
        }
        if (silent != alice) {
            vm.prank(alice);
            fe.revealLink(poolId, WORKER, 1, _link(workerSecret, 1));
        }
        vm.warp(until + 1);
    }

    function _submitWork(uint256 i) internal returns (bytes32 workId, address judge) {
        workId = _submit(alice, poolId, 0, keccak256(abi.encode("file", i)), N);
        vm.roll(block.number + 2);
        judge = court.assignedValidator(workId);
    }

    /// The judge's verdict, final undisputed after the dispute window.
    function _judgeFinal(bytes32 workId, address judge, bool accept) internal {
        vm.prank(judge);
        if (accept) court.attest(workId);
        else court.challenge(workId, 3, EVIDENCE);
        vm.warp(block.timestamp + DISPUTE + 1);
        court.finalize(workId);
    }

    function _feLocked(IForcedErrors.Role role, address who) internal view returns (uint256) {
        return fe.getChain(poolId, role, who).locked;
    }
}

contract ForcedErrorsTest is ForcedErrorsBase {
    // ---------------------------------------------------------------- item 2: checking pays when nobody cheats

    /// A lazy judge attests a forced error unchecked: it loses wrongVerdictSlash here and the worker (whose
    /// error was accepted, and paid by the pool) loses its slash; the honest judge of another forced error
    /// challenges it and takes the jackpot, and the worker it slashed is refunded and paid the file's reward.
    function test_item2_aLazyJudgeLosesOnAForcedErrorAndAnHonestOneTakesTheJackpot() public {
        bytes32 s = _workerSecret(true, 0);
        _commitAll(s);
        (bytes32 lazyWork, address lazy) = _submitWork(0);
        _judgeFinal(lazyWork, lazy, true);
        _revealEpoch1(s, address(0));
        assertTrue(fe.isForced(lazyWork), "the worker owed a forced error");
        uint256 budget = fe.budget(poolId);
        fe.settle(lazyWork, lazy, address(0));
        assertEq(_feLocked(VALIDATOR, lazy), V_BOND - WRONG_SLASH, "the lazy judge loses wrongVerdictSlash");
        assertEq(_feLocked(WORKER, alice), W_BOND - SLASH, "an accepted forced error costs S (the pool paid its R)");
        assertEq(fe.budget(poolId), budget + WRONG_SLASH + SLASH, "penalties feed the budget");
        assertEq(uint8(fe.outcomeOf(lazyWork)), uint8(IForcedErrors.Outcome.Forced));
    }

    function test_item2_anHonestJudgeThatChallengesAForcedErrorTakesTheJackpotAndTheWorkerIsRefunded() public {
        bytes32 s = _workerSecret(true, 0);
        _commitAll(s);
        (bytes32 workId, address judge) = _submitWork(0);
        uint256 aliceStake = stake.lockedOf(address(pools), alice);
        _judgeFinal(workId, judge, false);
        assertEq(stake.lockedOf(address(pools), alice), aliceStake - SLASH, "the pool slashed the worker");
        _revealEpoch1(s, address(0));
        uint256 budget = fe.budget(poolId);
        uint256 judgeCredit = fe.credits(judge);
        fe.settle(workId, judge, address(0));
        assertEq(fe.credits(judge), judgeCredit + JACKPOT, "the catcher takes J");
        assertEq(fe.credits(alice), SLASH + N * REWARD_PER_SAMPLE, "the slash is refunded and the reward paid");
        assertEq(fe.budget(poolId), budget - JACKPOT - SLASH - N * REWARD_PER_SAMPLE, "paid from the verification budget");
        assertEq(_feLocked(VALIDATOR, judge), V_BOND, "the honest judge loses nothing");
        assertEq(_feLocked(WORKER, alice), W_BOND, "nor does the worker");
        uint256 before = token.balanceOf(judge);
        vm.prank(judge);
        fe.withdraw();
        assertEq(token.balanceOf(judge), before + JACKPOT);
    }

    /// Re-rolling by waiting (R9.28 (7)) gains nothing: a worker whose next file owes a forced error, and that plants
    /// it, ends with exactly what an honest file of the same size earns — slashed S by the pool, refunded S and paid
    /// the reward R here —, so holding the file until an epoch whose draw owes nothing would only cost it the wait.
    function test_aCaughtForcedErrorEarnsWhatAnHonestFileDoes() public {
        bytes32 owed = pools.workIdOf(poolId, alice, pools.getMember(poolId, alice).nextNonce);
        bytes32 clean = pools.workIdOf(poolId, alice, pools.getMember(poolId, alice).nextNonce + 1);
        bytes32 s;
        for (uint256 j;; ++j) {
            s = keccak256(abi.encode("worker", j));
            bytes32 link = _link(s, 1);
            if (fe.drawn(link, BEACON, owed, FORCED_BPS) && !fe.drawn(link, BEACON, clean, FORCED_BPS)) break;
        }
        _commitAll(s);
        uint256 locked = stake.lockedOf(address(pools), alice);
        uint256 wallet = token.balanceOf(alice);
        (bytes32 forcedWork, address forcedJudge) = _submitWork(0);
        _judgeFinal(forcedWork, forcedJudge, false);
        (bytes32 honestWork, address honestJudge) = _submitWork(1);
        _judgeFinal(honestWork, honestJudge, true);
        _revealEpoch1(s, address(0));
        fe.settle(forcedWork, forcedJudge, address(0));
        fe.settle(honestWork, honestJudge, address(0));
        vm.startPrank(alice);
        fe.withdraw();
        uint256 fromForced = token.balanceOf(alice) - wallet - (locked - stake.lockedOf(address(pools), alice));
        wallet = token.balanceOf(alice);
        vm.warp(pools.getWork(honestWork).submittedAt + pools.getPool(poolId).params.rewardLock + 1);
        pools.claim(_ids(honestWork));
        vm.stopPrank();
        uint256 fromHonest = token.balanceOf(alice) - wallet;
        assertEq(fromHonest, N * REWARD_PER_SAMPLE, "an honest file earns R");
        assertEq(fromForced, fromHonest, "a caught forced error nets what an honest file does");
    }

    /// A lazy attestation of a forced error that an auditor disputes and the committee overturns: the judge loses
    /// here too, the disputer takes the jackpot, the worker (slashed by the final challenge) is refunded.
    function test_item2_anAuditorThatDisputesALazyAttestationOfAForcedErrorTakesTheJackpot() public {
        bytes32 s = _workerSecret(true, 0);
        _commitAll(s);
        (bytes32 workId, address judge) = _submitWork(0);
        vm.prank(judge);
        court.attest(workId);
        address disputer = _other(judge, address(0));
        _disputeAndVote(workId, disputer, [uint8(2), 2, 2]);
        court.resolve(workId);
        _revealEpoch1(s, address(0));
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.WrongParty.selector, workId, address(0)));
        fe.settle(workId, judge, address(0)); // the dispute's party must be named
        fe.settle(workId, judge, disputer);
        assertEq(_feLocked(VALIDATOR, judge), V_BOND - WRONG_SLASH, "the lazy judge loses here as in the court");
        assertEq(fe.credits(disputer), JACKPOT, "the disputer caught it");
        assertEq(fe.credits(alice), SLASH + N * REWARD_PER_SAMPLE, "the worker is refunded and paid");
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.AlreadySettled.selector, workId));
        fe.settle(workId, judge, disputer);
    }

    /// A file the worker's chain did not force settles to nothing: the honest attestation costs nobody anything.
    function test_aFileThatWasNotForcedSettlesToNothing() public {
        bytes32 s = _workerSecret(false, 0);
        _commitAll(s);
        (bytes32 workId, address judge) = _submitWork(0);
        _judgeFinal(workId, judge, true);
        _revealEpoch1(s, address(0));
        uint256 budget = fe.budget(poolId);
        fe.settle(workId, judge, address(0));
        assertEq(uint8(fe.outcomeOf(workId)), uint8(IForcedErrors.Outcome.NotForced));
        assertEq(fe.budget(poolId), budget);
        assertEq(_feLocked(VALIDATOR, judge), V_BOND);
        assertEq(_feLocked(WORKER, alice), W_BOND);
    }

    /// Drawn auditors of an accepted, undisputed forced error lose wrongVerdictSlash; those not drawn cannot be
    /// charged; a validator that withheld its link counts as drawn.
    function test_item2_drawnAuditorsThatLetAForcedErrorStandLose() public {
        bytes32 s = _workerSecret(true, 0);
        _commitAll(s);
        (bytes32 workId, address judge) = _submitWork(0);
        _judgeFinal(workId, judge, true);
        address silent = _other(judge, address(0));
        _revealEpoch1(s, silent);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.NotChargeable.selector, workId, vals[1]));
        fe.chargeAuditor(workId, vals[1]); // settle first
        fe.settle(workId, judge, address(0));
        uint256 drawnCount;
        uint256 spared;
        for (uint256 i; i < vals.length; ++i) {
            address v = vals[i];
            if (v == judge) continue;
            bool drawn_ = v == silent || fe.isAudited(workId, v);
            if (!drawn_) {
                vm.expectRevert(abi.encodeWithSelector(IForcedErrors.NotChargeable.selector, workId, v));
                fe.chargeAuditor(workId, v);
                assertEq(_feLocked(VALIDATOR, v), V_BOND, "not drawn: not charged");
                ++spared;
                continue;
            }
            fe.chargeAuditor(workId, v);
            assertEq(_feLocked(VALIDATOR, v), V_BOND - WRONG_SLASH, "drawn and silent on it: charged");
            vm.expectRevert(abi.encodeWithSelector(IForcedErrors.NotChargeable.selector, workId, v));
            fe.chargeAuditor(workId, v);
            ++drawnCount;
        }
        assertGt(drawnCount, 1, "the silent validator and at least one drawn one");
        assertGt(spared, 0, "some were not drawn");
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.NotChargeable.selector, workId, judge));
        fe.chargeAuditor(workId, judge);
    }

    // ---------------------------------------------------------------- withheld links

    function test_aValidatorThatWithholdsItsLinkLosesTheSilencePenaltyOnce() public {
        bytes32 s = _workerSecret(false, 0);
        _commitAll(s);
        (, uint64 until) = fe.revealWindowOf(poolId, 1);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.NotSilent.selector, vals[0], uint32(1)));
        fe.reportSilence(poolId, vals[0], 1); // its window is not over
        _revealEpoch1(s, vals[0]);
        assertGt(block.timestamp, until);
        fe.reportSilence(poolId, vals[0], 1);
        assertEq(_feLocked(VALIDATOR, vals[0]), V_BOND - FE_SILENCE);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.NotSilent.selector, vals[0], uint32(1)));
        fe.reportSilence(poolId, vals[0], 1);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.NotSilent.selector, vals[1], uint32(1)));
        fe.reportSilence(poolId, vals[1], 1); // it revealed
    }

    /// A worker that withholds the link deciding its files' forced errors is settled as owing each of them.
    function test_aWorkerThatWithholdsItsLinkLosesAsIfItOmittedEachForcedError() public {
        bytes32 s = _workerSecret(false, 0);
        _commitAll(s);
        (bytes32 workId, address judge) = _submitWork(0);
        _judgeFinal(workId, judge, true);
        _revealEpoch1(s, alice);
        fe.settle(workId, judge, address(0));
        assertEq(uint8(fe.outcomeOf(workId)), uint8(IForcedErrors.Outcome.Withheld));
        assertEq(_feLocked(WORKER, alice), W_BOND - SLASH - N * REWARD_PER_SAMPLE);
        assertEq(_feLocked(VALIDATOR, judge), V_BOND, "validators are not charged for the worker's silence");
    }

    // ---------------------------------------------------------------- item 1: audits nobody can predict

    /// Before its reveal nobody can compute a validator's audits: the court-visible state holds only the head of its
    /// chain, `isAudited` refuses, and no storage slot the contract wrote holds the link; after the reveal the draw
    /// is `keccak(σ_e ‖ β_e ‖ workId) < auditBps`, checked on-chain.
    function testFuzz_item1_aSelectionIsUnknownBeforeItsRevealAndVerifiableAfter(bytes32 secret, uint8 ahead) public {
        vm.assume(secret != bytes32(0) && secret != BEACON); // the beacon is stored: a secret equal to it is not new
        vm.record();
        vm.prank(vals[0]);
        fe.commitChain(poolId, VALIDATOR, _hashes(secret, LENGTH), LENGTH);
        vm.warp(fe.genesis(poolId) + EPOCH);
        _recordBeacon(1, BEACON);
        (bytes32 workId,) = _submitWork(ahead);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.NotRevealed.selector, vals[0], uint32(1)));
        fe.isAudited(workId, vals[0]);
        _assertNoStoredLink(secret, 1);
        (uint64 from,) = fe.revealWindowOf(poolId, 1);
        vm.warp(from);
        vm.prank(vals[0]);
        fe.revealLink(poolId, VALIDATOR, 1, _link(secret, 1));
        bytes32 link = _link(secret, 1);
        bool expected = uint256(keccak256(abi.encode(link, BEACON, workId))) < (type(uint256).max / 10_000) * AUDIT_BPS;
        assertEq(fe.isAudited(workId, vals[0]), expected, "the draw is the keccak threshold");
        _assertNoStoredLink(secret, 2); // the next epoch's link is still nowhere
        assertEq(fe.linkOf(poolId, VALIDATOR, vals[0], 1), link, "the revealed one is stored: the scan sees it");
    }

    /// No slot the ForcedErrors contract wrote holds a link of epoch `from` or later of the chain from `secret`.
    function _assertNoStoredLink(bytes32 secret, uint32 from) internal {
        (, bytes32[] memory writes) = vm.accesses(address(fe));
        for (uint256 i; i < writes.length; ++i) {
            bytes32 value = vm.load(address(fe), writes[i]);
            for (uint32 e = from; e <= LENGTH; ++e) {
                assertTrue(value != _link(secret, e), "an unrevealed link is in storage");
            }
        }
    }

    // ---------------------------------------------------------------- the epoch beacon (R9.29)

    /// An epoch's beacon is anchored by its first `recordBeacon` in the epoch and recorded from the next block as the
    /// anchor block's hash — once: it is never replaced; before the epoch it is pending, in the anchor's block a call
    /// changes nothing.
    function test_beacon_isRecordedOnceAsItsAnchorBlocksHash() public {
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BeaconPending.selector, uint32(1)));
        fe.recordBeacon(poolId, 1); // epoch 1 has not begun
        vm.warp(fe.genesis(poolId) + EPOCH);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BeaconPending.selector, uint32(1)));
        fe.beaconOf(poolId, 1); // nothing drawn with it can be computed yet
        vm.expectEmit(address(fe));
        emit IForcedErrors.BeaconAnchored(poolId, 1, uint64(block.number));
        fe.recordBeacon(poolId, 1);
        uint256 anchor = block.number;
        vm.recordLogs();
        fe.recordBeacon(poolId, 1); // its own block's hash is not known in it: nothing happens
        assertEq(vm.getRecordedLogs().length, 0);
        assertEq(fe.getBeacon(poolId, 1).value, bytes32(0));
        assertEq(fe.getBeacon(poolId, 1).anchor, anchor);
        vm.roll(anchor + 1);
        vm.setBlockhash(anchor, BEACON);
        vm.prank(stranger); // anyone
        fe.recordBeacon(poolId, 1);
        IForcedErrors.Beacon memory b = fe.getBeacon(poolId, 1);
        assertEq(b.value, BEACON, "the anchor block's hash");
        assertEq(b.anchor, anchor);
        assertEq(fe.beaconOf(poolId, 1), BEACON);
        vm.roll(anchor + 300);
        vm.setBlockhash(anchor + 299, keccak256("another"));
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BeaconAlreadyRecorded.selector, uint32(1)));
        fe.recordBeacon(poolId, 1); // never twice, never replaced
        vm.warp(fe.genesis(poolId) + 3 * EPOCH);
        assertEq(fe.beaconOf(poolId, 1), BEACON, "kept after its epoch");
    }

    /// The beacon is unknown when any chain covering its epoch is committed: a chain committed in the anchor's block
    /// or after covers only later epochs (at any time in the epoch the anchor falls), and one committed before it
    /// (in the epoch before) covers it.
    function testFuzz_beacon_aChainCommittedAtOrAfterItsAnchorDoesNotCoverItsEpoch(uint32 into, uint8 later) public {
        vm.prank(vals[0]);
        fe.commitChain(poolId, VALIDATOR, _hashes(_secret(vals[0]), LENGTH), LENGTH); // in epoch 0: covers 1..
        vm.warp(fe.genesis(poolId) + EPOCH + bound(into, 0, EPOCH - 1));
        vm.roll(block.number + 1);
        fe.recordBeacon(poolId, 1);
        uint64 anchor = fe.getBeacon(poolId, 1).anchor;
        assertEq(anchor, block.number);
        vm.prank(vals[1]); // in the anchor's block
        fe.commitChain(poolId, VALIDATOR, _hashes(_secret(vals[1]), LENGTH), LENGTH);
        vm.roll(block.number + 1 + later);
        vm.warp(block.timestamp + later);
        vm.prank(vals[2]); // after it
        fe.commitChain(poolId, VALIDATOR, _hashes(_secret(vals[2]), LENGTH), LENGTH);
        assertLe(fe.getChain(poolId, VALIDATOR, vals[0]).firstEpoch, 1, "committed before the anchor: covers it");
        assertGt(fe.getChain(poolId, VALIDATOR, vals[1]).firstEpoch, 1, "committed in the anchor's block: not");
        assertGt(fe.getChain(poolId, VALIDATOR, vals[2]).firstEpoch, 1, "committed after it: not");
    }

    /// The beacon decides the draws: the same link and file are forced under one beacon and not under another,
    /// `isForced` and `settle` follow the recorded one; the draw is the vector the clients' tests check
    /// (tests/unit/protocol/test_hashchain.py, the same numbers).
    function test_beacon_decidesTheDraws() public {
        bytes32 link = keccak256("link");
        bytes32 work = keccak256("work");
        assertEq(uint256(keccak256(abi.encode(link, keccak256("beacon"), work))),
            0xbff4e88bca74ee04b97626e575c2ff9be50ae84bbbd9e3dbe379ecb0814eb9c6);
        assertTrue(fe.drawn(link, keccak256("beacon"), work, 7_499) && !fe.drawn(link, keccak256("beacon"), work, 7_498));
        assertTrue(fe.drawn(link, bytes32(0), work, 3_554) && !fe.drawn(link, bytes32(0), work, 3_553));
        // a worker chain forced in its next file under BEACON; epoch 1 records another beacon under which it is not
        bytes32 s = _workerSecret(true, 0);
        bytes32 workId = pools.workIdOf(poolId, alice, pools.getMember(poolId, alice).nextNonce);
        bytes32 other;
        for (uint256 j;; ++j) {
            other = keccak256(abi.encode("beacon", j));
            if (!fe.drawn(_link(s, 1), other, workId, FORCED_BPS)) break;
        }
        _commitChains(s);
        _recordBeacon(1, other);
        (bytes32 submitted, address judge) = _submitWork(0);
        assertEq(submitted, workId);
        _judgeFinal(workId, judge, true);
        _revealEpoch1(s, address(0));
        assertFalse(fe.isForced(workId), "not forced under the beacon recorded");
        for (uint256 i; i < vals.length; ++i) {
            bool expected = fe.drawn(_link(_secret(vals[i]), 1), other, workId, AUDIT_BPS);
            if (vals[i] != judge) assertEq(fe.isAudited(workId, vals[i]), expected, "the audit draw uses it");
        }
        fe.settle(workId, judge, address(0));
        assertEq(uint8(fe.outcomeOf(workId)), uint8(IForcedErrors.Outcome.NotForced));
    }

    /// The 256-block limit: an anchor whose hash was not recorded in time is replaced by the next call while the
    /// epoch lasts; an epoch that ends without a readable anchor keeps the fallback beacon, zero, for good — its
    /// files still settle, drawn as `keccak(link ‖ 0 ‖ workId)`.
    function test_beacon_anExpiredAnchorIsReplacedAndAMissedEpochSettlesOnTheFallback() public {
        bytes32 s = _workerSecret(false, 0);
        _commitChains(s);
        fe.recordBeacon(poolId, 1);
        uint256 first = block.number;
        vm.roll(first + 257); // its hash is gone
        vm.expectEmit(address(fe));
        emit IForcedErrors.BeaconAnchored(poolId, 1, uint64(first + 257));
        fe.recordBeacon(poolId, 1); // anchored again, in the epoch
        (bytes32 workId, address judge) = _submitWork(0);
        _judgeFinal(workId, judge, true);
        vm.warp(fe.genesis(poolId) + 2 * EPOCH);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BeaconPending.selector, uint32(1)));
        fe.beaconOf(poolId, 1); // the second anchor's hash is still readable: it may still be recorded
        vm.roll(block.number + 257);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BeaconMissed.selector, uint32(1)));
        fe.recordBeacon(poolId, 1); // the epoch is over: no anchor now could be unknown to its chains
        assertEq(fe.beaconOf(poolId, 1), bytes32(0), "the fallback");
        _revealEpoch1(s, address(0));
        bool forced = fe.drawn(_link(s, 1), bytes32(0), workId, FORCED_BPS);
        assertEq(fe.isForced(workId), forced);
        fe.settle(workId, judge, address(0));
        assertEq(uint8(fe.outcomeOf(workId)), uint8(forced ? IForcedErrors.Outcome.Forced : IForcedErrors.Outcome.NotForced));
    }

    /// Files settle only once their epoch's beacon is settled: pending, `settle` reverts (and can be retried).
    function test_beacon_settlementWaitsForAPendingBeacon() public {
        bytes32 s = _workerSecret(true, 0);
        _commitChains(s);
        fe.recordBeacon(poolId, 1); // anchored, not recorded
        uint256 anchor = block.number;
        (bytes32 workId, address judge) = _submitWork(0);
        _judgeFinal(workId, judge, false);
        _revealEpoch1(s, address(0));
        vm.roll(anchor + 200);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BeaconPending.selector, uint32(1)));
        fe.settle(workId, judge, address(0));
        vm.setBlockhash(anchor, BEACON);
        fe.recordBeacon(poolId, 1); // late, but the anchor's hash: fixed before any link of the epoch was revealed
        fe.settle(workId, judge, address(0));
        assertEq(uint8(fe.outcomeOf(workId)), uint8(IForcedErrors.Outcome.Forced));
        assertEq(fe.credits(judge), JACKPOT);
    }

    // ---------------------------------------------------------------- refusals

    function test_badChainsAndLinksAreRefused() public {
        bytes32 s = _secret(vals[0]);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.NotParticipant.selector, poolId, VALIDATOR, stranger));
        fe.commitChain(poolId, VALIDATOR, _hashes(s, LENGTH), LENGTH);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.NotParticipant.selector, poolId, WORKER, stranger));
        fe.commitChain(poolId, WORKER, _hashes(s, LENGTH), LENGTH);
        vm.startPrank(vals[0]);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BadChain.selector, poolId, vals[0]));
        fe.commitChain(poolId, VALIDATOR, bytes32(0), LENGTH);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BadChain.selector, poolId, vals[0]));
        fe.commitChain(poolId, VALIDATOR, _hashes(s, LENGTH), 0);
        uint32 tooLong = fe.MAX_CHAIN_LENGTH() + 1;
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BadChain.selector, poolId, vals[0]));
        fe.commitChain(poolId, VALIDATOR, _hashes(s, LENGTH), tooLong);
        fe.commitChain(poolId, VALIDATOR, _hashes(s, LENGTH), LENGTH);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BadChain.selector, poolId, vals[0]));
        fe.commitChain(poolId, VALIDATOR, _hashes(keccak256("other"), LENGTH), LENGTH); // one chain at a time
        (uint64 from, uint64 until) = fe.revealWindowOf(poolId, 1);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.OutsideRevealWindow.selector, uint32(1), from, until));
        fe.revealLink(poolId, VALIDATOR, 1, _link(s, 1)); // too early: its files may still be judged
        vm.warp(from);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BadLink.selector, uint32(1)));
        fe.revealLink(poolId, VALIDATOR, 1, _link(s, 2)); // a later link does not hash to the head
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BadLink.selector, uint32(1)));
        fe.revealLink(poolId, VALIDATOR, 1, keccak256("guess"));
        fe.revealLink(poolId, VALIDATOR, 1, _link(s, 1));
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BadLink.selector, uint32(1)));
        fe.revealLink(poolId, VALIDATOR, 1, _link(s, 1)); // once
        vm.warp(until + 1);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.OutsideRevealWindow.selector, uint32(1), from, until));
        fe.revealLink(poolId, VALIDATOR, 1, _link(s, 1));
        // a skipped epoch: epoch 3's link hashes twice to epoch 1's; epoch 2 stays unrevealed (silent)
        (from,) = fe.revealWindowOf(poolId, 3);
        vm.warp(from);
        fe.revealLink(poolId, VALIDATOR, 3, _link(s, 3));
        assertEq(fe.linkOf(poolId, VALIDATOR, vals[0], 2), bytes32(0));
        (from,) = fe.revealWindowOf(poolId, LENGTH + 1);
        vm.warp(from);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BadLink.selector, LENGTH + 1));
        fe.revealLink(poolId, VALIDATOR, LENGTH + 1, s); // past the chain's end
        vm.stopPrank();
    }

    function test_settlementWaitsForTheFinalVerdictAndTheRevealWindow() public {
        bytes32 s = _workerSecret(true, 0);
        _commitAll(s);
        (bytes32 workId, address judge) = _submitWork(0);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.CaseNotFinal.selector, workId));
        fe.settle(workId, judge, address(0));
        _judgeFinal(workId, judge, true);
        (, uint64 until) = fe.revealWindowOf(poolId, 1);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.OutsideRevealWindow.selector, uint32(1), until + 1, type(uint64).max));
        fe.settle(workId, judge, address(0));
        _revealEpoch1(s, address(0));
        address notJudge = _other(judge, address(0));
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.WrongParty.selector, workId, notJudge));
        fe.settle(workId, notJudge, address(0));
    }

    function test_abusiveParamsAreRefused() public {
        // a second pool judged by the court, not configured here yet
        IComputePool.PoolParams memory pp = _params();
        pp.validators[0] = address(court);
        vm.startPrank(owner);
        uint256 other = pools.createPool(pp);
        pools.freezeValidators(other, address(court));
        court.configurePool(other, _courtParams());
        vm.stopPrank();
        IForcedErrors.Params memory p = _feParams();
        p.forcedBps = 0;
        _expectRule(other, p, 1);
        p.forcedBps = fe.MAX_FORCED_BPS() + 1;
        _expectRule(other, p, 1);
        p = _feParams();
        p.auditBps = 0;
        _expectRule(other, p, 2);
        p.auditBps = 10_001;
        _expectRule(other, p, 2);
        p = _feParams();
        p.epochLength = MIN_PERIOD - 1;
        _expectRule(other, p, 3);
        p.epochLength = 7 days + 1;
        _expectRule(other, p, 3);
        p = _feParams();
        p.revealWindow = 0;
        _expectRule(other, p, 3);
        p = _feParams();
        p.validatorBond = WRONG_SLASH - 1;
        _expectRule(other, p, 4);
        p = _feParams();
        p.workerBond = uint96(SLASH + REWARD_PER_SAMPLE * MAX_SAMPLES - 1);
        _expectRule(other, p, 4);
        p = _feParams();
        p.silencePenalty = 0;
        _expectRule(other, p, 5);
        p.silencePenalty = WRONG_SLASH / 4 + 1;
        _expectRule(other, p, 5);
        p = _feParams();
        p.jackpot = 0;
        _expectRule(other, p, 6);
        p.jackpot = uint96(uint256(REWARD_PER_SAMPLE) * MAX_SAMPLES * 10_000 / FORCED_BPS + 1); // ρ·J > R
        _expectRule(other, p, 6);
        p = _feParams();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.NotPoolOwner.selector, other, stranger));
        fe.configure(other, p);
        vm.prank(owner);
        fe.configure(other, p);
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.AlreadyConfigured.selector, other));
        fe.configure(other, p);
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.UnknownPool.selector, uint256(99)));
        fe.configure(99, p);
    }

    function _expectRule(uint256 pool, IForcedErrors.Params memory p, uint8 rule) internal {
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BadForcedErrorParams.selector, rule));
        fe.configure(pool, p);
    }

    /// A bond returns, and a chain is replaced, only once every file of its last epoch is settled: a worker cannot
    /// shed a withheld or forced epoch by committing a new chain over it.
    function test_aBondIsReturnedAndAChainReplacedOnlyAfterItsChainIsSettled() public {
        vm.prank(vals[0]);
        fe.commitChain(poolId, VALIDATOR, _hashes(_secret(vals[0]), LENGTH), LENGTH);
        (, uint64 closes) = fe.revealWindowOf(poolId, LENGTH);
        uint64 until = closes + court.exitDelay(poolId);
        assertEq(fe.settledBy(poolId, LENGTH), until);
        vm.prank(vals[0]);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BondStillLocked.selector, until));
        fe.withdrawBond(poolId, VALIDATOR);
        vm.warp(until);
        vm.prank(vals[0]);
        vm.expectRevert(abi.encodeWithSelector(IForcedErrors.BadChain.selector, poolId, vals[0]));
        fe.commitChain(poolId, VALIDATOR, _hashes(keccak256("next"), LENGTH), LENGTH); // its last epoch is not settled
        vm.warp(until + 1);
        uint256 free = stake.bondedOf(vals[0]);
        vm.prank(vals[0]);
        fe.withdrawBond(poolId, VALIDATOR);
        assertEq(stake.bondedOf(vals[0]), free + V_BOND);
        vm.prank(vals[0]);
        fe.commitChain(poolId, VALIDATOR, _hashes(keccak256("next"), LENGTH), LENGTH);
        IForcedErrors.Chain memory c = fe.getChain(poolId, VALIDATOR, vals[0]);
        assertEq(c.firstEpoch, fe.epochOf(poolId, block.timestamp) + 1, "the next chain covers the epochs after now");
        assertEq(c.locked, V_BOND, "its bond locked again");
    }
}
