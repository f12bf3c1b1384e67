// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {StdInvariant} from "forge-std/StdInvariant.sol";
import {DevStakeToken} from "../src/DevStakeToken.sol";
import {StakeManager} from "../src/StakeManager.sol";
import {ComputePool} from "../src/ComputePool.sol";
import {IComputePool} from "../src/IComputePool.sol";
import {IValidatorCourt} from "../src/IValidatorCourt.sol";
import {ValidatorCourt} from "../src/ValidatorCourt.sol";
import {CourtBase} from "./ValidatorCourt.t.sol";

/// Random sequences of every court call (verdicts, disputes, draws, votes, resolutions, finalizations,
/// the passing of time) by the pool's worker and seven validators; calls that revert change nothing.
contract CourtHandler is Test {
    ValidatorCourt internal court;
    ComputePool internal pools;
    uint256 internal poolId;
    address internal worker;
    address[] internal vals;
    bytes32[] public works;
    mapping(bytes32 => mapping(address => bool)) internal voteOf;
    /// How far the random sequences got (verdicts, disputes, resolved disputes, finalized verdicts):
    /// log them from an `afterInvariant` when tuning the handler, so the invariants see resolutions.
    uint256 public verdicts;
    uint256 public disputes;
    uint256 public resolved;
    uint256 public finalized;
    uint256 public drawn;
    uint256 public churns;
    /// Set when a committee was drawn shorter than min(committeeSize, eligible validators) (issue 27).
    bool public shortCommittee;
    /// Set when a case past its deadline (every court period after its submission; for a reopened dispute, its
    /// current round's reveal period) could not be settled.
    bool public unsettled;
    /// Set when a verdict became final through `concur` while a validator that could still dispute it had not
    /// concurred.
    bool public earlyWithoutUnanimity;
    uint256 public earlyFinal;
    mapping(bytes32 => mapping(address => bool)) internal concurred;

    /// Every change of a validator's registration (time, validator, registered), oldest first.
    struct Change {
        uint256 at;
        address validator;
        bool registered;
    }

    Change[] internal changes;

    constructor(ValidatorCourt c, ComputePool p, uint256 id, address w, address[] memory v) {
        court = c;
        pools = p;
        poolId = id;
        worker = w;
        vals = v;
        for (uint256 i; i < v.length; ++i) {
            changes.push(Change(c.getValidator(id, v[i]).registeredAt, v[i], true));
        }
    }

    /// Validator `v` leaves the pool, or joins it again.
    function churn(uint256 v) external {
        address who = vals[v % vals.length];
        bool registered = court.getValidator(poolId, who).deregisteredAt == 0;
        vm.prank(who);
        if (registered) {
            try court.deregister(poolId) {
                changes.push(Change(block.timestamp, who, false));
                ++churns;
            } catch {}
        } else {
            try court.register(poolId) {
                changes.push(Change(block.timestamp, who, true));
                ++churns;
            } catch {}
        }
    }

    /// Whether `who` was registered at time `key`, by the handler's own record of every change.
    function _wasActive(address who, uint256 key) internal view returns (bool active) {
        for (uint256 i; i < changes.length && changes[i].at <= key; ++i) {
            if (changes[i].validator == who) active = changes[i].registered;
        }
    }

    /// Draw the committee of `id`, checking that it seats min(committeeSize, eligible) validators, where
    /// eligible counts those of the case's set that are no party and had the seat's stake free.
    function _draw(bytes32 id) internal {
        (, uint40 submittedAt,, uint24 workerIndex,,, uint24 judge,,,) = court.cases(id);
        (uint24 disputer,,,,,,,) = court.disputes(id);
        IValidatorCourt.CourtParams memory p = court.getParams(poolId);
        uint256 key = uint256(submittedAt) - p.activationDelay;
        uint256 eligible;
        for (uint256 i; i < vals.length; ++i) {
            IValidatorCourt.ValidatorView memory v = court.getValidator(poolId, vals[i]);
            if (v.index == judge || v.index == disputer || v.index == workerIndex) continue;
            if (_wasActive(vals[i], key) && v.locked - v.reserved >= p.nonVoterPenalty) ++eligible;
        }
        try court.drawCommittee(id) {
            ++drawn;
            uint256 want = eligible < p.committeeSize ? eligible : p.committeeSize;
            if (court.committeeOf(id).length != want) shortCommittee = true;
        } catch {}
    }

    function workCount() external view returns (uint256) {
        return works.length;
    }

    function submit() external {
        uint64 nonce = pools.getMember(poolId, worker).nextNonce;
        vm.prank(worker);
        try pools.submitWork(poolId, 0, nonce, keccak256(abi.encode(nonce)), 10) returns (bytes32 id) {
            works.push(id);
        } catch {}
        vm.roll(block.number + 2);
    }

    function judge(uint256 w, uint256 v, bool accepted) external {
        if (works.length == 0) return;
        bytes32 id = works[w % works.length];
        address assigned = court.assignedValidator(id);
        address who = v % 2 == 0 && assigned != address(0) ? assigned : vals[v % vals.length];
        vm.prank(who);
        if (accepted) {
            try court.attest(id) {
                ++verdicts;
            } catch {}
        } else {
            try court.challenge(id, 7, keccak256("evidence")) {
                ++verdicts;
            } catch {}
        }
    }

    /// Validator `v` concurs with the verdict on work `w`; if that made it final, everyone who could still
    /// have disputed it must have concurred.
    function concur(uint256 w, uint256 v) public {
        if (works.length == 0) return;
        bytes32 id = works[w % works.length];
        address who = vals[v % vals.length];
        vm.prank(who);
        try court.concur(id) {
            concurred[id][who] = true;
        } catch {
            return;
        }
        (, uint40 submittedAt,, uint24 workerIndex, IValidatorCourt.CaseState state,, uint24 judge,,,) = court.cases(id);
        if (state != IValidatorCourt.CaseState.Final) return;
        ++earlyFinal;
        uint256 key = uint256(submittedAt) - court.getParams(poolId).activationDelay;
        for (uint256 i; i < vals.length; ++i) {
            IValidatorCourt.ValidatorView memory val = court.getValidator(poolId, vals[i]);
            bool mayDispute = val.index != judge && val.index != workerIndex && val.deregisteredAt == 0
                && val.registeredAt <= key;
            if (mayDispute && !concurred[id][vals[i]]) earlyWithoutUnanimity = true;
        }
    }

    /// Every validator but the `skip`-th concurs with the verdict on work `w` (the one left out may
    /// still dispute, so the case stays open unless it is the judge or the worker).
    function concurAll(uint256 w, uint256 skip) external {
        for (uint256 i; i < vals.length; ++i) {
            if (i != skip % (vals.length + 1)) concur(w, i);
        }
    }

    function dispute(uint256 w, uint256 v) external {
        if (works.length == 0) return;
        vm.prank(vals[v % vals.length]);
        try court.dispute(works[w % works.length], keccak256("dispute")) {
            ++disputes;
        } catch {}
    }

    function draw(uint256 w) external {
        if (works.length == 0) return;
        vm.roll(block.number + 2);
        _draw(works[w % works.length]);
    }

    function commit(uint256 w, uint256 m, bool valid) external {
        if (works.length == 0) return;
        bytes32 id = works[w % works.length];
        address[] memory committee = court.committeeOf(id);
        if (committee.length == 0) return;
        address voter = committee[m % committee.length];
        vm.prank(voter);
        try court.commitVote(id, keccak256(abi.encode(id, voter, valid, keccak256(abi.encode(voter))))) {
            voteOf[id][voter] = valid;
        } catch {}
    }

    function reveal(uint256 w, uint256 m) external {
        if (works.length == 0) return;
        bytes32 id = works[w % works.length];
        address[] memory committee = court.committeeOf(id);
        if (committee.length == 0) return;
        address voter = committee[m % committee.length];
        vm.prank(voter);
        try court.revealVote(id, voteOf[id][voter], keccak256(abi.encode(voter))) {} catch {}
    }

    /// A whole dispute of work `w` by validator `v`, each member voting `(votes >> 2i) % 3` (0 = silent,
    /// 1 = valid, 2 = invalid), through the commit and reveal periods to the resolution.
    function fullDispute(uint256 w, uint256 v, uint256 votes) external {
        if (works.length == 0) return;
        bytes32 id = works[w % works.length];
        vm.prank(vals[v % vals.length]);
        try court.dispute(id, keccak256("dispute")) {
            ++disputes;
        } catch {
            return;
        }
        vm.roll(block.number + 2);
        _draw(id);
        address[] memory committee = court.committeeOf(id);
        for (uint256 i; i < committee.length; ++i) {
            uint256 vote = (votes >> (2 * i)) % 3;
            if (vote == 0) continue;
            voteOf[id][committee[i]] = vote == 1;
            vm.prank(committee[i]);
            court.commitVote(id, keccak256(abi.encode(id, committee[i], vote == 1, keccak256(abi.encode(committee[i])))));
        }
        vm.warp(block.timestamp + 10 minutes + 1);
        for (uint256 i; i < committee.length; ++i) {
            if ((votes >> (2 * i)) % 3 == 0) continue;
            vm.prank(committee[i]);
            court.revealVote(id, voteOf[id][committee[i]], keccak256(abi.encode(committee[i])));
        }
        vm.warp(block.timestamp + 10 minutes);
        court.resolve(id);
        ++resolved;
    }

    function settle(uint256 w) external {
        if (works.length == 0) return;
        bytes32 id = works[w % works.length];
        try court.finalize(id) {
            ++finalized;
        } catch {}
        try court.resolve(id) {
            ++resolved;
        } catch {}
        (, uint40 submittedAt,,, IValidatorCourt.CaseState state,,,,,) = court.cases(id);
        IValidatorCourt.CourtParams memory p = court.getParams(poolId);
        uint256 deadline = uint256(submittedAt) + p.verdictWindow + p.disputeWindow + p.commitPeriod + p.revealPeriod;
        if (state == IValidatorCourt.CaseState.Disputed) {
            // a dispute whose committee revealed nothing is reopened: its deadline is the current round's
            (, uint40 disputedAt,,,,, uint8 round,) = court.disputes(id);
            if (round >= court.DISPUTE_ROUNDS()) unsettled = true;
            deadline = uint256(disputedAt) + p.commitPeriod + p.revealPeriod;
        }
        bool closed = state == IValidatorCourt.CaseState.Final || state == IValidatorCourt.CaseState.Void;
        if (block.timestamp > deadline && !closed) unsettled = true;
    }

    function wait(uint256 seconds_) external {
        vm.warp(block.timestamp + bound(seconds_, 1, 4 minutes));
        vm.roll(block.number + 1);
    }
}

contract CourtInvariantsTest is StdInvariant, CourtBase {
    CourtHandler internal handler;

    function setUp() public override {
        super.setUp();
        vm.prank(alice);
        stake.bond(500 ether); // alice: 1000 ether bonded, all of it allocated to the pool
        vm.prank(alice);
        pools.allocate(poolId, 500 ether);
        handler = new CourtHandler(court, pools, poolId, alice, vals);
        targetContract(address(handler));
    }

    /// The court holds exactly what it owes (credits and the fee budget), and every validator's stake
    /// locked here is what the StakeManager locked for it, never less than what its open cases reserve.
    function invariant_courtStakeAndBalanceConserved() public view {
        _assertCourtSolvent();
        for (uint256 i; i < vals.length; ++i) {
            IValidatorCourt.ValidatorView memory v = court.getValidator(poolId, vals[i]);
            assertLe(v.reserved, v.locked, "reserved <= locked");
            assertEq(stake.lockedOf(address(court), vals[i]), v.locked, "court's lock = StakeManager's lock");
        }
    }

    /// Issue 27: over random register/deregister/dispute sequences no committee is shorter than
    /// min(committeeSize, eligible), and every case can be settled once its deadline has passed.
    function invariant_committeesFullAndCasesSettle() public view {
        assertFalse(handler.shortCommittee(), "a committee shorter than min(k, eligible)");
        assertFalse(handler.unsettled(), "a case past its deadline could not be settled");
    }

    /// Early finality: a verdict is final before its dispute window ends only when every validator that could
    /// still dispute it concurred.
    function invariant_earlyFinalityOnlyByUnanimity() public view {
        assertFalse(handler.earlyWithoutUnanimity(), "final early while a validator could still dispute");
    }

    /// The ComputePool learns a verdict only once it is final (and then it is the court's final one).
    function invariant_noVerdictBeforeFinality() public view {
        for (uint256 i; i < handler.workCount(); ++i) {
            bytes32 id = handler.works(i);
            IComputePool.WorkStatus status = _status(id);
            (,,,, IValidatorCourt.CaseState state, bool accepted,,,,) = court.cases(id);
            if (status == IComputePool.WorkStatus.Accepted || status == IComputePool.WorkStatus.Rejected) {
                assertEq(uint8(state), uint8(IValidatorCourt.CaseState.Final), "judged in the pool only when final");
                assertEq(accepted, status == IComputePool.WorkStatus.Accepted, "the pool records the final verdict");
            }
            if (state == IValidatorCourt.CaseState.Final) {
                assertTrue(status != IComputePool.WorkStatus.Pending, "a final verdict reached the pool");
            }
        }
    }
}
