// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {BaseTest} from "./Base.t.sol";
import {IComputePool} from "../src/IComputePool.sol";
import {IJudgedPool, IValidatorCourt} from "../src/IValidatorCourt.sol";
import {IStakeManager} from "../src/IStakeManager.sol";
import {ValidatorCourt} from "../src/ValidatorCourt.sol";
import {Vm} from "forge-std/Vm.sol";

/// A pool judged by the ValidatorCourt, with seven bonded validators.
abstract contract CourtBase is BaseTest {
    ValidatorCourt internal court;
    uint256 internal poolId;
    address[] internal vals;

    uint128 internal constant BOND = 100 ether;
    uint128 internal constant FEE = 1 ether;
    uint128 internal constant DISPUTE_BOND = 20 ether;
    uint96 internal constant WRONG_SLASH = 40 ether;
    uint128 internal constant NO_VOTE = 5 ether;
    uint128 internal constant SILENCE = 2 ether;
    uint24 internal constant ASSIGNED = 5 minutes;
    uint24 internal constant VERDICT = 15 minutes;
    uint24 internal constant DISPUTE = 10 minutes;
    uint24 internal constant COMMIT = 10 minutes;
    uint24 internal constant REVEAL = 10 minutes;
    uint24 internal constant ACTIVATION = 2 minutes;
    uint24 internal constant MIN_PERIOD = 1 minutes;
    bytes32 internal constant DIGEST = keccak256("rollouts");
    bytes32 internal constant EVIDENCE = keccak256("evidence");

    function setUp() public virtual override {
        super.setUp();
        court = new ValidatorCourt(IJudgedPool(address(pools)), MIN_PERIOD);
        vm.startPrank(admin);
        stake.grantRole(stake.SLASHER_ROLE(), address(court));
        vm.stopPrank();
        IComputePool.PoolParams memory p = _params();
        p.validators[0] = address(court);
        vm.startPrank(owner);
        poolId = pools.createPool(p);
        pools.fundPool(poolId, 10_000 ether);
        pools.freezeValidators(poolId, address(court));
        court.configurePool(poolId, _courtParams());
        token.approve(address(court), type(uint256).max);
        court.fundFees(poolId, 100 ether);
        vm.stopPrank();
        for (uint256 i; i < 7; ++i) {
            address v = makeAddr(string(abi.encodePacked("val", vm.toString(i))));
            vals.push(v);
            _fundValidator(v);
            vm.prank(v);
            court.register(poolId);
        }
        vm.warp(block.timestamp + ACTIVATION); // the registrations count from now on
        _bondAndJoin(alice, poolId, 500 ether);
    }

    function _courtParams() internal pure returns (IValidatorCourt.CourtParams memory) {
        return IValidatorCourt.CourtParams({
            validatorBond: BOND,
            verdictFee: FEE,
            disputeBond: DISPUTE_BOND,
            nonVoterPenalty: NO_VOTE,
            silencePenalty: SILENCE,
            assignedWindow: ASSIGNED,
            verdictWindow: VERDICT,
            disputeWindow: DISPUTE,
            commitPeriod: COMMIT,
            revealPeriod: REVEAL,
            committeeSize: 3,
            wrongVerdictSlash: WRONG_SLASH,
            activationDelay: ACTIVATION
        });
    }

    function _fundValidator(address v) internal {
        vm.prank(admin);
        token.mint(v, 1_000 ether);
        vm.startPrank(v);
        token.approve(address(stake), type(uint256).max);
        stake.bond(1_000 ether);
        vm.stopPrank();
    }

    /// Submit from alice and mine two blocks so the assignment can be drawn.
    function _submitAndDraw() internal returns (bytes32 workId, address assigned) {
        workId = _submit(alice, poolId, 0, DIGEST, 10);
        vm.roll(block.number + 2);
        assigned = court.assignedValidator(workId);
    }

    /// Some registered validator other than those given.
    function _other(address a, address b) internal view returns (address) {
        for (uint256 i; i < vals.length; ++i) {
            if (vals[i] != a && vals[i] != b) return vals[i];
        }
        revert("no other validator");
    }

    function _commitment(bytes32 workId, address voter, bool valid) internal pure returns (bytes32) {
        return keccak256(abi.encode(workId, voter, valid, keccak256(abi.encode(voter))));
    }

    /// Dispute, draw the committee, have every member vote `votes[i]` (0 = no vote, 1 = valid, 2 = invalid).
    function _disputeAndVote(bytes32 workId, address disputer, uint8[3] memory votes)
        internal
        returns (address[] memory committee)
    {
        vm.prank(disputer);
        court.dispute(workId, EVIDENCE);
        committee = _drawAndVote(workId, votes);
    }

    /// Draw the dispute's committee (two blocks on), then commit and reveal `votes` (0 = silent).
    function _drawAndVote(bytes32 workId, uint8[3] memory votes) internal returns (address[] memory committee) {
        vm.roll(block.number + 2);
        court.drawCommittee(workId);
        committee = court.committeeOf(workId);
        for (uint256 i; i < committee.length; ++i) {
            if (votes[i] == 0) continue;
            vm.prank(committee[i]);
            court.commitVote(workId, _commitment(workId, committee[i], votes[i] == 1));
        }
        vm.warp(block.timestamp + COMMIT + 1);
        for (uint256 i; i < committee.length; ++i) {
            if (votes[i] == 0) continue;
            vm.prank(committee[i]);
            court.revealVote(workId, votes[i] == 1, keccak256(abi.encode(committee[i])));
        }
        vm.warp(block.timestamp + REVEAL);
    }

    function _caseState(bytes32 workId) internal view returns (IValidatorCourt.CaseState state) {
        (,,,, state,,,,,) = court.cases(workId);
    }

    function _locked(address v) internal view returns (uint256) {
        return court.getValidator(poolId, v).locked;
    }

    /// The court holds exactly what it owes: every credit and every fee budget.
    function _assertCourtSolvent() internal view {
        uint256 owed = court.feeBudget(poolId) + court.credits(owner) + court.credits(alice);
        for (uint256 i; i < vals.length; ++i) {
            owed += court.credits(vals[i]);
        }
        assertEq(token.balanceOf(address(court)), owed, "court balance = credits + fee budget");
    }
}

contract ValidatorCourtTest is CourtBase {
    function test_configureRequiresSoleFrozenCourt() public {
        vm.startPrank(owner);
        uint256 open = pools.createPool(_params()); // an EOA validator, not frozen
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.CourtNotSoleValidator.selector, open));
        court.configurePool(open, _courtParams());
        pools.setValidator(open, address(court), true);
        pools.setValidator(open, validator, false);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.CourtNotSoleValidator.selector, open));
        court.configurePool(open, _courtParams()); // not frozen yet
        pools.freezeValidators(open, address(court));
        vm.expectRevert(abi.encodeWithSelector(IComputePool.ValidatorsAreFrozen.selector, open));
        pools.setValidator(open, owner, true); // the owner can no longer add a validator of its own
        IValidatorCourt.CourtParams memory bad = _courtParams();
        bad.verdictWindow = uint24(WINDOW); // nothing left of the challenge window for disputes
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.BadCourtParams.selector, 4));
        court.configurePool(open, bad);
        vm.stopPrank();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.NotPoolOwner.selector, open, stranger));
        court.configurePool(open, _courtParams());
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.AlreadyConfigured.selector, poolId));
        court.configurePool(poolId, _courtParams());
    }

    function test_registerLocksBondAndRefusesOwner() public {
        assertEq(_locked(vals[0]), BOND);
        assertEq(stake.lockedOf(address(court), vals[0]), BOND);
        vm.prank(vals[0]);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.AlreadyRegistered.selector, poolId, vals[0]));
        court.register(poolId);
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.OwnerCannotValidate.selector, poolId));
        court.register(poolId);
        vm.prank(stranger); // no bonded stake
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.InsufficientBonded.selector, BOND, 0));
        court.register(poolId);
    }

    function test_lockedStakeBoundsOpenVerdicts() public {
        address v = vals[0];
        bytes32[3] memory works;
        for (uint256 i; i < 3; ++i) {
            (works[i],) = _submitAndDraw();
        }
        vm.warp(block.timestamp + ASSIGNED + 1); // v may stand in for whoever is assigned
        vm.startPrank(v);
        court.attest(works[0]); // 100 ether of bond: two verdicts of 40 ether exposure each
        court.attest(works[1]);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.InsufficientBond.selector, 20 ether, WRONG_SLASH));
        court.attest(works[2]);
        court.addBond(poolId, 20 ether);
        court.attest(works[2]);
        vm.stopPrank();
        assertEq(court.getValidator(poolId, v).reserved, 3 * uint256(WRONG_SLASH));
    }

    function test_onlyTheAssignedValidatorJudgesFirst() public {
        bytes32 workId = _submit(alice, poolId, 0, DIGEST, 10);
        vm.prank(vals[0]);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.AssignmentNotDrawn.selector, workId));
        court.attest(workId);
        vm.roll(block.number + 2);
        address assigned = court.assignedValidator(workId);
        address other = _other(assigned, address(0));
        vm.prank(other);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.NotAssigned.selector, workId, assigned));
        court.attest(workId);
        vm.prank(assigned);
        court.attest(workId);
        assertEq(uint8(_caseState(workId)), uint8(IValidatorCourt.CaseState.Verdict));
        assertEq(court.getValidator(poolId, assigned).reserved, WRONG_SLASH);
        // the verdict is not final: the ComputePool still has the work pending, nothing to claim
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Pending));
    }

    function test_aStandInNeedNotWaitForAnAssigneeThatCannotJudge() public {
        (bytes32 w1,) = _submitAndDraw();
        (bytes32 w2,) = _submitAndDraw();
        vm.warp(block.timestamp + ASSIGNED + 1); // anyone may stand in on w1 and w2 now
        (bytes32 workId, address assigned) = _submitAndDraw();
        address standIn = _other(assigned, address(0));
        vm.prank(standIn);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.NotAssigned.selector, workId, assigned));
        court.attest(workId); // the assignee could judge: its window
        vm.startPrank(assigned);
        court.attest(w1); // 100 ether of bond, 40 reserved per open verdict: 20 left, below a verdict's 40
        court.attest(w2);
        vm.stopPrank();
        uint256 lockedBefore = court.getValidator(poolId, assigned).locked;
        vm.prank(standIn);
        court.attest(workId); // within the assigned window: the assignee cannot judge, nothing to wait for
        assertEq(uint8(_caseState(workId)), uint8(IValidatorCourt.CaseState.Verdict));
        assertEq(court.getValidator(poolId, assigned).locked, lockedBefore, "no silence penalty: it could not judge");
        assertEq(court.getValidator(poolId, standIn).reserved, WRONG_SLASH);
    }

    function test_workerCannotJudgeItsOwnWork() public {
        _fundValidator(alice);
        vm.prank(alice);
        court.register(poolId);
        (bytes32 workId,) = _submitAndDraw();
        vm.warp(block.timestamp + ASSIGNED + 1);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.NotEligible.selector, workId, alice));
        court.attest(workId);
    }

    function test_attestIsFinalOnlyAfterTheDisputeWindow() public {
        (bytes32 workId, address assigned) = _submitAndDraw();
        vm.prank(assigned);
        court.attest(workId);
        uint64 finalFrom = uint64(block.timestamp) + DISPUTE + 1;
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.OutsidePeriod.selector, workId, finalFrom,
                                               type(uint64).max));
        court.finalize(workId);
        vm.warp(block.timestamp + DISPUTE + 1);
        court.finalize(workId);
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Accepted));
        assertEq(court.credits(assigned), FEE);
        assertEq(court.getValidator(poolId, assigned).reserved, 0);
        vm.warp(block.timestamp + LOCK);
        vm.prank(alice);
        assertEq(pools.claim(_ids(workId)), 10 * REWARD_PER_SAMPLE);
        vm.prank(assigned);
        court.withdraw();
        assertEq(token.balanceOf(assigned), FEE);
        _assertCourtSolvent();
    }

    function test_challengeSlashesTheWorkerOnlyWhenFinal() public {
        (bytes32 workId, address assigned) = _submitAndDraw();
        uint256 allocationBefore = pools.getMember(poolId, alice).allocation;
        vm.prank(assigned);
        court.challenge(workId, 7, EVIDENCE);
        assertEq(pools.getMember(poolId, alice).allocation, allocationBefore, "no slash before finality");
        assertEq(court.credits(assigned), 0, "no bounty before finality");
        vm.warp(block.timestamp + DISPUTE + 1);
        court.finalize(workId);
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Rejected));
        assertEq(pools.getMember(poolId, alice).allocation, allocationBefore - SLASH);
        assertEq(court.credits(assigned), FEE + uint256(SLASH) * BOUNTY_BPS / 10_000);
        _assertCourtSolvent();
    }

    function test_silentAssignedValidatorLosesSilencePenalty() public {
        (bytes32 workId, address assigned) = _submitAndDraw();
        address standIn = _other(assigned, address(0));
        vm.warp(block.timestamp + ASSIGNED + 1);
        vm.prank(standIn);
        court.attest(workId);
        assertEq(_locked(assigned), BOND - SILENCE);
        assertEq(court.credits(standIn), SILENCE);
        _assertCourtSolvent();
    }

    function test_noVerdictAfterTheVerdictWindow() public {
        (bytes32 workId, address assigned) = _submitAndDraw();
        uint64 submittedAt = uint64(block.timestamp);
        vm.warp(block.timestamp + VERDICT + 1);
        vm.prank(assigned);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.OutsidePeriod.selector, workId, submittedAt,
                                               submittedAt + VERDICT));
        court.attest(workId);
    }

    function test_disputeOverturnsAWrongAttestation() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId); // the work is bad; the judge attests it anyway
        address disputer = _other(judge, address(0));
        uint256 allocationBefore = pools.getMember(poolId, alice).allocation;
        address[] memory committee = _disputeAndVote(workId, disputer, [uint8(2), 2, 1]);
        assertEq(committee.length, 3);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.WrongCaseState.selector, workId,
                                               IValidatorCourt.CaseState.Disputed));
        court.finalize(workId); // a disputed verdict is final only through resolve
        court.resolve(workId);
        assertEq(_locked(judge), BOND - WRONG_SLASH, "judge loses exactly wrongVerdictSlash");
        assertEq(_locked(committee[2]), BOND - NO_VOTE, "a minority voter loses nonVoterPenalty");
        // pot = WRONG_SLASH + the minority's penalty: each majority voter is paid NO_VOTE / 2, the disputer the rest
        uint256 pay = NO_VOTE / 2;
        uint256 bounty = uint256(SLASH) * BOUNTY_BPS / 10_000;
        assertEq(court.credits(disputer), uint256(WRONG_SLASH) + NO_VOTE - 2 * pay + FEE + bounty);
        assertEq(court.credits(committee[0]), pay);
        assertEq(court.credits(committee[1]), pay);
        assertEq(court.credits(committee[2]), 0);
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Rejected));
        assertEq(pools.getMember(poolId, alice).allocation, allocationBefore - SLASH, "worker slashed as today");
        assertEq(court.getValidator(poolId, disputer).reserved, 0);
        assertEq(court.getValidator(poolId, judge).reserved, 0);
        _assertCourtSolvent();
    }

    function test_wronglyChallengedHonestWorkerIsMadeWhole() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.challenge(workId, 9, EVIDENCE); // honest work, false challenge
        address disputer = _other(judge, address(0));
        uint256 allocationBefore = pools.getMember(poolId, alice).allocation;
        _disputeAndVote(workId, disputer, [uint8(1), 1, 1]);
        court.resolve(workId);
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Accepted));
        assertEq(pools.getMember(poolId, alice).allocation, allocationBefore, "worker never slashed");
        assertEq(_locked(judge), BOND - WRONG_SLASH);
        vm.warp(block.timestamp + LOCK);
        vm.prank(alice);
        assertEq(pools.claim(_ids(workId)), 10 * REWARD_PER_SAMPLE, "worker paid in full");
        _assertCourtSolvent();
    }

    function test_upheldVerdictCostsTheDisputerItsBond() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        address disputer = _other(judge, address(0));
        uint256 disputerLocked = _locked(disputer);
        address[] memory committee = _disputeAndVote(workId, disputer, [uint8(1), 1, 0]);
        court.resolve(workId);
        // the bond came from the disputer's unreserved locked stake, and was taken from it
        assertEq(_locked(disputer), disputerLocked - DISPUTE_BOND, "the disputer loses exactly its dispute bond");
        assertEq(stake.lockedOf(address(court), disputer), disputerLocked - DISPUTE_BOND);
        assertEq(_locked(committee[2]), BOND - NO_VOTE, "a silent member loses exactly nonVoterPenalty");
        // pot = DISPUTE_BOND + the silent member's penalty: each majority voter is paid NO_VOTE / 2 (as when a
        // verdict is overturned), the judge the rest
        uint256 pay = NO_VOTE / 2;
        assertEq(court.credits(judge), uint256(DISPUTE_BOND) + NO_VOTE - 2 * pay + FEE);
        assertEq(court.credits(committee[0]), pay);
        assertEq(court.feeBudget(poolId), 100 ether - FEE);
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Accepted));
        _assertCourtSolvent();
    }

    /// A committee that reveals no vote does not decide: the dispute is reopened with a new committee, its
    /// silent members pay `nonVoterPenalty` to the fee budget, the parties stay reserved, and the next
    /// committee decides (here it overturns the acceptance).
    function test_noVoteReopensTheDisputeAndTheNextCommitteeDecides() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        address disputer = _other(judge, address(0));
        uint256 budget = court.feeBudget(poolId);
        address[] memory silent = _disputeAndVote(workId, disputer, [uint8(0), 0, 0]);
        vm.expectEmit(address(court));
        emit IValidatorCourt.DisputeReopened(poolId, workId, 1);
        court.resolve(workId);
        assertEq(uint8(_caseState(workId)), uint8(IValidatorCourt.CaseState.Disputed), "still disputed");
        assertEq(court.committeeOf(workId).length, 0, "the silent committee is gone");
        for (uint256 i; i < silent.length; ++i) {
            assertEq(_locked(silent[i]), BOND - NO_VOTE, "each silent member paid");
            assertEq(court.getValidator(poolId, silent[i]).reserved, 0, "its seat freed");
            assertEq(court.votes(workId, silent[i]), bytes32(0), "it may sit again");
        }
        assertEq(court.feeBudget(poolId), budget + silent.length * NO_VOTE, "to the fee budget");
        assertEq(court.getValidator(poolId, judge).reserved, WRONG_SLASH, "the judge stays answerable");
        assertEq(court.getValidator(poolId, disputer).reserved, DISPUTE_BOND, "the disputer too");
        (,, uint40 disputeBlock,,,, uint8 round,) = court.disputes(workId);
        assertEq(round, 1);
        assertEq(disputeBlock, block.number, "the next committee is drawn from a later block's hash");
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.CommitteeNotDrawn.selector, workId));
        court.drawCommittee(workId);
        _drawAndVote(workId, [uint8(2), 2, 1]);
        court.resolve(workId);
        assertEq(uint8(_caseState(workId)), uint8(IValidatorCourt.CaseState.Final));
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Rejected), "overturned by round 2");
        assertEq(_locked(judge), BOND - WRONG_SLASH);
        assertEq(court.getValidator(poolId, disputer).reserved, 0);
        _assertCourtSolvent();
    }

    /// After `DISPUTE_ROUNDS` committees without a vote the case is void: no verdict reaches the pool and
    /// the parties are freed (every silent member of every round paid).
    function test_noVoteInEveryRoundVoidsTheCaseAndFreesTheParties() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        address disputer = _other(judge, address(0));
        _disputeAndVote(workId, disputer, [uint8(0), 0, 0]);
        for (uint256 round = 1; round < court.DISPUTE_ROUNDS(); ++round) {
            court.resolve(workId);
            _drawAndVote(workId, [uint8(0), 0, 0]);
        }
        court.resolve(workId);
        assertEq(_locked(disputer), BOND, "bond freed, not taken");
        assertEq(court.getValidator(poolId, disputer).reserved, 0);
        assertEq(court.getValidator(poolId, judge).reserved, 0, "judge freed");
        assertEq(uint8(_caseState(workId)), uint8(IValidatorCourt.CaseState.Void));
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Pending));
        vm.warp(uint256(pools.getWork(workId).submittedAt) + WINDOW + 1);
        pools.expireWork(workId);
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Expired));
        _assertCourtSolvent();
    }

    /// Past the 256-block horizon the draw is anchored again to the next block (two steps), never drawn from
    /// a block the caller picks.
    function test_aCommitteeDrawnPastTheHorizonIsAnchoredToALaterBlock() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        vm.prank(_other(judge, address(0)));
        court.dispute(workId, EVIDENCE);
        vm.roll(block.number + 300);
        court.drawCommittee(workId);
        assertEq(court.committeeOf(workId).length, 0, "not drawn from a substitute hash");
        (,, uint40 disputeBlock,,, bool drawn,,) = court.disputes(workId);
        assertFalse(drawn);
        assertEq(disputeBlock, block.number, "anchored to the next block");
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.CommitteeNotDrawn.selector, workId));
        court.drawCommittee(workId);
        vm.roll(block.number + 2);
        court.drawCommittee(workId);
        assertEq(court.committeeOf(workId).length, 3, "drawn from the new anchor's next block");
    }

    /// With exactly committeeSize validators eligible (7 registered: judge, disputer and two deregistered
    /// left out), the committee is always full: the fill scan seats whom the random draws missed.
    function testFuzz_committeeFillsWhenExactlyEnoughAreEligible(uint16 blocks) public {
        vm.roll(block.number + blocks);
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        address disputer = _other(judge, address(0));
        uint256 gone;
        for (uint256 i; i < vals.length && gone < 2; ++i) {
            if (vals[i] == judge || vals[i] == disputer) continue;
            vm.prank(vals[i]);
            court.deregister(poolId);
            ++gone;
        }
        vm.prank(disputer);
        court.dispute(workId, EVIDENCE);
        vm.roll(block.number + 2);
        court.drawCommittee(workId);
        address[] memory committee = court.committeeOf(workId);
        assertEq(committee.length, 3, "committee full");
        for (uint256 i; i < committee.length; ++i) {
            assertTrue(committee[i] != judge && committee[i] != disputer, "no party on its own committee");
            assertEq(court.getValidator(poolId, committee[i]).registeredAt != 0, true);
        }
    }

    /// A committee's event names its pool as the first indexed topic, so a validator reads its own pool's
    /// committees with one topic filter.
    function test_aCommitteeDrawnNamesItsPoolAsTheFirstTopic() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        vm.prank(_other(judge, address(0)));
        court.dispute(workId, EVIDENCE);
        vm.roll(block.number + 2);
        vm.recordLogs();
        court.drawCommittee(workId);
        Vm.Log[] memory logs = vm.getRecordedLogs();
        assertEq(logs.length, 1);
        assertEq(logs[0].topics[0], IValidatorCourt.CommitteeDrawn.selector);
        assertEq(logs[0].topics[1], bytes32(poolId), "the pool, indexed first");
        assertEq(logs[0].topics[2], workId);
        assertEq(abi.decode(logs[0].data, (address[])), court.committeeOf(workId));
    }

    function test_onlyCommitteeMembersVoteAndRevealsMustMatch() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        address disputer = _other(judge, address(0));
        vm.prank(disputer);
        court.dispute(workId, EVIDENCE);
        uint64 revealFrom = uint64(block.timestamp) + COMMIT + 1;
        uint64 revealUntil = uint64(block.timestamp) + COMMIT + REVEAL;
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.CommitteeNotDrawn.selector, workId));
        court.drawCommittee(workId); // the block after the dispute is not there yet
        vm.roll(block.number + 2);
        court.drawCommittee(workId);
        address[] memory committee = court.committeeOf(workId);
        for (uint256 i; i < committee.length; ++i) {
            assertTrue(committee[i] != judge && committee[i] != disputer && committee[i] != alice);
        }
        vm.prank(judge);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.NotCommitteeMember.selector, workId, judge));
        court.commitVote(workId, keccak256("x"));
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.NotCommitteeMember.selector, workId, stranger));
        court.commitVote(workId, keccak256("x"));
        vm.prank(committee[0]);
        court.commitVote(workId, _commitment(workId, committee[0], true));
        vm.prank(committee[0]);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.OutsidePeriod.selector, workId, revealFrom,
                                               revealUntil)); // reveal before the commit period ends
        court.revealVote(workId, true, keccak256(abi.encode(committee[0])));
        vm.warp(block.timestamp + COMMIT + 1);
        vm.prank(committee[0]);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.RevealMismatch.selector, workId, committee[0]));
        court.revealVote(workId, false, keccak256(abi.encode(committee[0])));
        vm.prank(committee[0]);
        court.revealVote(workId, true, keccak256(abi.encode(committee[0])));
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.OutsidePeriod.selector, workId, revealUntil + 1,
                                               type(uint64).max)); // resolve before the reveal period ends
        court.resolve(workId);
    }

    function test_judgeAndWorkerCannotDispute() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        uint64 verdictAt = uint64(block.timestamp);
        vm.prank(judge);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.NotEligible.selector, workId, judge));
        court.dispute(workId, EVIDENCE);
        vm.warp(block.timestamp + DISPUTE + 1);
        vm.prank(_other(judge, address(0)));
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.OutsidePeriod.selector, workId, verdictAt,
                                               verdictAt + DISPUTE)); // the dispute window is over
        court.dispute(workId, EVIDENCE);
    }

    /// Every validator of the case's set but `judge` (and `skip`) concurs; returns how many did.
    function _concurAll(bytes32 workId, address judge, address skip) internal returns (uint256 n) {
        for (uint256 i; i < vals.length; ++i) {
            if (vals[i] == judge || vals[i] == skip) continue;
            vm.prank(vals[i]);
            court.concur(workId);
            ++n;
        }
    }

    function test_aVerdictEveryOtherValidatorConcursWithIsFinalAtOnce() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        address last = vals[vals.length - 1] == judge ? vals[vals.length - 2] : vals[vals.length - 1];
        _concurAll(workId, judge, last);
        assertEq(uint8(_caseState(workId)), uint8(IValidatorCourt.CaseState.Verdict), "one may still dispute");
        vm.prank(last);
        court.concur(workId);
        assertEq(uint8(_caseState(workId)), uint8(IValidatorCourt.CaseState.Final));
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Accepted));
        assertEq(court.credits(judge), FEE);
        assertEq(court.getValidator(poolId, judge).reserved, 0);
        _assertCourtSolvent();
    }

    function test_aChallengeEveryOtherValidatorConcursWithSlashesAtOnce() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        uint256 allocationBefore = pools.getMember(poolId, alice).allocation;
        vm.prank(judge);
        court.challenge(workId, 7, EVIDENCE);
        _concurAll(workId, judge, address(0));
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Rejected));
        assertEq(pools.getMember(poolId, alice).allocation, allocationBefore - SLASH);
        _assertCourtSolvent();
    }

    function test_oneValidatorThatDoesNotConcurKeepsItsRightToDispute() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        address holdout = _other(judge, address(0));
        _concurAll(workId, judge, holdout);
        vm.prank(holdout);
        court.dispute(workId, EVIDENCE);
        assertEq(uint8(_caseState(workId)), uint8(IValidatorCourt.CaseState.Disputed));
        // a committee drawn from validators that concurred still votes freely: the concurrence is no vote
        _drawAndVote(workId, [uint8(2), 2, 2]);
        court.resolve(workId);
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Rejected), "overturned");
        _assertCourtSolvent();
    }

    function test_onlyValidatorsThatMayDisputeConcurOnceWithinTheWindow() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        address other = _other(judge, address(0));
        vm.prank(other);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.WrongCaseState.selector, workId,
                                               IValidatorCourt.CaseState.Pending));
        court.concur(workId); // no verdict yet
        vm.prank(judge);
        court.attest(workId);
        uint64 verdictAt = uint64(block.timestamp);
        vm.prank(judge);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.NotEligible.selector, workId, judge));
        court.concur(workId);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.NotRegistered.selector, poolId, alice));
        court.concur(workId);
        address late = makeAddr("late validator");
        _fundValidator(late);
        vm.prank(late);
        court.register(poolId);
        vm.prank(late);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.NotEligible.selector, workId, late));
        court.concur(workId); // registered after the case's set was fixed
        vm.prank(other);
        court.concur(workId);
        vm.prank(other);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.AlreadyConcurred.selector, workId, other));
        court.concur(workId);
        vm.warp(block.timestamp + DISPUTE + 1);
        vm.prank(_other(judge, other));
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.OutsidePeriod.selector, workId, verdictAt,
                                               verdictAt + DISPUTE));
        court.concur(workId); // the window is over: `finalize` as before
        court.finalize(workId);
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Accepted));
    }

    function test_aWorkerInTheSetNeedNotConcurWithItsOwnCase() public {
        _fundValidator(alice);
        vm.prank(alice);
        court.register(poolId);
        vm.warp(block.timestamp + ACTIVATION); // alice is in the set of the case below: it cannot dispute it
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.NotEligible.selector, workId, alice));
        court.concur(workId);
        _concurAll(workId, judge, address(0));
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Accepted));
    }

    function test_aSetOfTheJudgeAloneIsFinalAtItsVerdict() public {
        for (uint256 i = 1; i < vals.length; ++i) {
            vm.prank(vals[i]);
            court.deregister(poolId);
        }
        vm.warp(block.timestamp + ACTIVATION + 1); // the cases below are judged by vals[0] alone
        (bytes32 workId, address judge) = _submitAndDraw();
        assertEq(judge, vals[0]);
        vm.prank(judge);
        court.attest(workId);
        assertEq(uint8(_caseState(workId)), uint8(IValidatorCourt.CaseState.Final), "nobody may dispute it");
        assertEq(uint8(_status(workId)), uint8(IComputePool.WorkStatus.Accepted));
        assertEq(court.getValidator(poolId, judge).reserved, 0);
        _assertCourtSolvent();
    }

    function test_bondWithdrawnOnlyAfterExitDelayAndWithNothingReserved() public {
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        court.attest(workId);
        vm.prank(judge);
        court.deregister(poolId);
        uint64 exitAt = uint64(block.timestamp) + court.exitDelay(poolId);
        vm.prank(judge);
        vm.expectRevert(abi.encodeWithSelector(IValidatorCourt.BondStillLocked.selector, exitAt, WRONG_SLASH));
        court.withdrawBond(poolId);
        vm.warp(block.timestamp + DISPUTE + 1);
        court.finalize(workId);
        vm.warp(exitAt);
        uint256 bondedBefore = stake.bondedOf(judge);
        vm.prank(judge);
        court.withdrawBond(poolId);
        assertEq(stake.bondedOf(judge), bondedBefore + BOND);
        assertEq(_locked(judge), 0);
    }

    /// Any verdict, any votes: the losing side loses exactly the documented amount, the court stays
    /// solvent, every reservation is freed and the ComputePool records the decided outcome.
    function testFuzz_disputeOutcomes(bool attested, uint8 a, uint8 b, uint8 c) public {
        uint8[3] memory votes = [a % 3, b % 3, c % 3];
        (bytes32 workId, address judge) = _submitAndDraw();
        vm.prank(judge);
        if (attested) court.attest(workId);
        else court.challenge(workId, 3, EVIDENCE);
        address disputer = _other(judge, address(0));
        uint256 disputerLocked = _locked(disputer);
        address[] memory committee = _disputeAndVote(workId, disputer, votes);
        court.resolve(workId);
        if (votes[0] + votes[1] + votes[2] == 0) {
            assertEq(uint8(_caseState(workId)), uint8(IValidatorCourt.CaseState.Disputed), "reopened, not decided");
            assertEq(court.getValidator(poolId, disputer).reserved, DISPUTE_BOND);
            return;
        }
        (uint256 yes, uint256 no, uint256 silent) = (0, 0, 0);
        for (uint256 i; i < 3; ++i) {
            if (votes[i] == 1) ++yes;
            else if (votes[i] == 2) ++no;
            else ++silent;
        }
        bool workValid = yes > no ? true : no > yes ? false : attested;
        bool overturned = workValid != attested;
        assertEq(_locked(judge), overturned ? BOND - WRONG_SLASH : BOND);
        uint256 disputerAfter = disputerLocked - (!overturned && yes + no > 0 ? DISPUTE_BOND : 0);
        assertEq(_locked(disputer), disputerAfter);
        bool tie = yes == no;
        for (uint256 i; i < committee.length; ++i) {
            bool lost = votes[i] == 0 || (!tie && (votes[i] == 1) != workValid);
            assertEq(_locked(committee[i]), lost ? BOND - NO_VOTE : BOND, "out of the majority: exactly the penalty");
            assertEq(court.getValidator(poolId, committee[i]).reserved, 0);
        }
        assertEq(court.getValidator(poolId, judge).reserved, 0);
        assertEq(court.getValidator(poolId, disputer).reserved, 0);
        IComputePool.WorkStatus expected = workValid ? IComputePool.WorkStatus.Accepted : IComputePool.WorkStatus.Rejected;
        assertEq(uint8(_status(workId)), uint8(expected));
        _assertCourtSolvent();
    }
}
