// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IComputePool} from "./IComputePool.sol";
import {IStakeManager} from "./IStakeManager.sol";
import {IJudgedPool, IValidatorCourt} from "./IValidatorCourt.sol";
import {CourtRules} from "./CourtRules.sol";
import {ValidatorSet} from "./ValidatorSet.sol";
import {DisputeSettlement} from "./DisputeSettlement.sol";

/// @title ValidatorCourt — bonded, permissionless validators who answer for their verdicts
/// @notice A pool opts in by making this court its only validator and freezing its validator set.
/// Anyone with the pool's validator bond locked here registers as a validator of the pool; it enters
/// the pool's *active set* (a compact list: deregistering removes it, swap-and-pop), and every change
/// of that set is recorded with its time. A case is judged by the set as it was `activationDelay`
/// seconds before its submission (the case's set): later registrations and deregistrations change
/// nothing about it. Each submission is assigned to one validator of its set by the hash of the block
/// after it, which nobody knows when the set is fixed; only that validator may give the first verdict
/// during the assigned window, then any validator of the set may (and the silent one loses
/// `silencePenalty`). Any other validator of the set may dispute a verdict within the dispute window
/// by locking a dispute bond, or concur with it (once all of them have, the verdict is final at once:
/// nobody is left who may dispute it); a committee drawn from the case's set by a later block hash votes by
/// commit–reveal, the revealed majority decides (a tie keeps the verdict; no vote at all voids the
/// case), the losing side is slashed and the majority shares what was slashed. A verdict reaches the
/// ComputePool (attest, or challenge that slashes the worker) only once it is final, so the trainer,
/// the worker's reward and the challenger's bounty all wait for finality, and an honest worker wrongly
/// challenged is never slashed. The ComputePool keeps a case's work open while the case is open here,
/// so every case settles. Rules, numbers and why honest play is each party's best response:
/// docs/protocol.md §9 (the bounds on its rules: §1.2).
/// @dev Stake rule: `reserved ≤ locked` for every validator — each open verdict reserves
/// `wrongVerdictSlash`, each dispute its `disputeBond`, each committee seat `nonVoterPenalty`, so
/// every penalty but silence's (taken from what is unreserved) is paid in full.
contract ValidatorCourt is IValidatorCourt, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;
    using ValidatorSet for ValidatorSet.Set;

    /// @notice Largest dispute committee.
    uint8 public constant MAX_COMMITTEE = 15;
    /// @notice Longest verdict window (periods are stored in 24 bits; each is below the pool's challenge window).
    uint24 public constant MAX_PERIOD = 30 days;
    /// @notice Reason code of a challenge that a dispute committee decided (the work was attested first).
    uint16 public constant REASON_DISPUTE = 18;
    /// @dev `Case.assigned` of a case whose draw found no validator (0 = not drawn yet).
    uint24 private constant NO_ONE = type(uint24).max;
    uint8 private constant WHY_SILENCE = 4;
    /// @dev Draws of an assignment that land on the worker's own entry before the next position is taken.
    uint256 private constant REDRAWS = 8;
    uint8 private constant VOID_LAPSED = 1;
    uint8 private constant VOID_NO_VOTE = 2;
    /// @notice Committees a dispute may draw: one that reveals no vote is replaced, up to this many in all.
    uint8 public constant DISPUTE_ROUNDS = 3;

    /// @dev One slot, written by the ComputePool's submission hook, so that a verdict only updates it.
    /// `workerIndex` is the worker's own validator index in the pool at submission (0 = none);
    /// `assigned` the drawn validator's index once recorded (0 = not yet, NO_ONE = none).
    struct Case {
        uint32 poolId;
        uint40 submittedAt;
        uint40 submittedBlock;
        uint24 workerIndex;
        CaseState state;
        bool accepted;
        uint24 judge;
        uint40 verdictAt;
        uint16 reasonCode;
        uint24 assigned;
    }

    struct Dispute {
        uint24 disputer;
        uint40 disputedAt;
        uint40 disputeBlock;
        uint16 votesValid;
        uint16 votesInvalid;
        bool drawn;
        uint8 round;
        /// @dev Before a dispute: how many validators concurred with the verdict (`concur`).
        uint24 concurrences;
    }

    IJudgedPool public immutable pools;
    IStakeManager public immutable stakeManager;
    IERC20 public immutable token;
    /// @notice Shortest window or period a pool may set, in seconds: a few of this chain's blocks.
    uint24 public immutable minPeriod;

    mapping(uint256 poolId => CourtParams) private _params;
    mapping(uint256 poolId => address) public poolOwner;
    mapping(uint256 poolId => uint256) public feeBudget;
    /// @notice When the owner of a closed pool may take its fee budget back (0: not asked).
    mapping(uint256 poolId => uint64) public feesReclaimableAt;
    // slither-disable-next-line uninitialized-state (written through a storage pointer in `register`)
    mapping(uint256 poolId => ValidatorSet.Entry[]) private _entries;
    mapping(uint256 poolId => mapping(address => ValidatorSet.Validator)) private _validators;
    /// @dev When a freed reservation (`ValidatorSet.release`) last brought each validator's unreserved stake back to a
    /// verdict's reservation: the silence penalty spares an assignee that could not judge through its assigned window.
    mapping(uint256 poolId => mapping(address => uint40)) private _freedAt;
    /// @dev Each pool's active set over time.
    mapping(uint256 poolId => ValidatorSet.Set) private _active;
    /// @notice Each submission's case (judge and disputer are 1-based validator indices: `validatorAt`).
    mapping(bytes32 workId => Case) public cases;
    mapping(bytes32 workId => Dispute) public disputes;
    mapping(bytes32 workId => bytes32) private _evidence;
    mapping(bytes32 workId => address[]) private _committees;
    /// @notice A committee member's commitment, then (once revealed) 1 = work valid, 2 = invalid.
    mapping(bytes32 workId => mapping(address voter => bytes32)) public votes;
    mapping(bytes32 workId => mapping(address validator => bool)) private _concurred;
    /// @notice Fees, bounties and shares of penalties owed to each address (`withdraw`).
    mapping(address => uint256) public credits;

    /// @param minPeriod_ the shortest window a pool may set on this chain (a few block times, in seconds)
    constructor(IJudgedPool pools_, uint24 minPeriod_) {
        if (address(pools_) == address(0)) revert ZeroAddress();
        if (minPeriod_ == 0) revert ZeroAmount();
        pools = pools_;
        stakeManager = pools_.stakeManager();
        token = IERC20(pools_.token());
        minPeriod = minPeriod_;
    }

    // ------------------------------------------------------------------ pool owner

    /// @notice Set the court rules of a pool (its owner, once). The pool must have this court as its
    /// only validator with its validator set frozen, and the rules must meet `BadCourtParams`' bounds.
    function configurePool(uint256 poolId, CourtParams calldata p) external {
        if (_params[poolId].committeeSize != 0) revert AlreadyConfigured(poolId);
        address owner_ = CourtRules.checkPool(pools, poolId, p, minPeriod);
        if (msg.sender != owner_) revert NotPoolOwner(poolId, msg.sender);
        _params[poolId] = p;
        poolOwner[poolId] = owner_;
        emit CourtConfigured(poolId, p);
    }

    /// @notice Add `amount` to the pool's verdict-fee budget (anyone; needs approval).
    function fundFees(uint256 poolId, uint256 amount) external nonReentrant {
        _configured(poolId);
        if (amount == 0) revert ZeroAmount();
        uint256 budget = feeBudget[poolId] + amount;
        feeBudget[poolId] = budget;
        emit FeesFunded(poolId, msg.sender, amount, budget);
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(msg.sender, address(this), amount);
        uint256 received = token.balanceOf(address(this)) - before;
        if (received != amount) revert TransferAmountMismatch(amount, received);
    }

    /// @notice Take back the fee budget of a closed pool (its owner): the first call asks, and the budget
    /// (with the tie pots and remainders it collected) is paid from `exitDelay` later on, when every case
    /// of the pool has been decided.
    function reclaimFees(uint256 poolId) external nonReentrant {
        CourtParams storage p = _configured(poolId);
        address owner_ = poolOwner[poolId];
        if (msg.sender != owner_) revert NotPoolOwner(poolId, msg.sender);
        if (!CourtRules.isClosed(pools, poolId)) {
            revert FeesNotReclaimable(poolId, type(uint64).max);
        }
        uint64 at = feesReclaimableAt[poolId];
        if (at == 0) {
            at = uint64(block.timestamp) + _exitDelay(p);
            feesReclaimableAt[poolId] = at;
            emit FeesReclaimRequested(poolId, at);
            return;
        }
        if (block.timestamp < at) revert FeesNotReclaimable(poolId, at);
        uint256 amount = feeBudget[poolId];
        if (amount == 0) revert ZeroAmount();
        feeBudget[poolId] = 0;
        emit FeesReclaimed(poolId, owner_, amount);
        token.safeTransfer(owner_, amount);
    }

    /// @notice The ComputePool's hook on every submission of a pool judged here: opens its case.
    function onWorkSubmitted(uint256 poolId, bytes32 workId, address worker) external {
        if (msg.sender != address(pools)) revert NotComputePool(msg.sender);
        _configured(poolId);
        cases[workId] = Case({
            poolId: uint32(poolId),
            submittedAt: uint40(block.timestamp),
            submittedBlock: uint40(block.number),
            workerIndex: _validators[poolId][worker].index,
            state: CaseState.Pending,
            accepted: false,
            judge: 0,
            verdictAt: 0,
            reasonCode: 0,
            assigned: 0
        });
    }

    /// @notice Whether the case may still be decided here (the ComputePool keeps the work open meanwhile):
    /// a verdict or a dispute is open, or the verdict window has not passed.
    function isOpen(bytes32 workId) external view returns (bool) {
        Case memory c = cases[workId];
        if (c.state == CaseState.Verdict || c.state == CaseState.Disputed) return true;
        return c.state == CaseState.Pending && block.timestamp <= uint256(c.submittedAt) + _params[c.poolId].verdictWindow;
    }

    // ------------------------------------------------------------------ validators

    /// @notice Register as a validator of the pool: locks (from the caller's free bonded stake) what
    /// its locked stake here lacks of the validator bond, and joins the active set. It judges work
    /// submitted `activationDelay` seconds from now on. Not the pool owner.
    function register(uint256 poolId) external {
        CourtParams storage p = _configured(poolId);
        if (msg.sender == poolOwner[poolId]) revert OwnerCannotValidate(poolId);
        ValidatorSet.Validator storage v = _validators[poolId][msg.sender];
        ValidatorSet.Entry[] storage entries = _entries[poolId];
        if (v.index != 0 && v.deregisteredAt == 0) revert AlreadyRegistered(poolId, msg.sender);
        uint256 bond = p.validatorBond;
        if (v.locked < bond) _lock(v, bond - v.locked);
        if (v.index == 0) {
            entries.push(ValidatorSet.Entry({validator: msg.sender, registeredAt: uint40(block.timestamp), position: 0}));
            v.index = uint24(entries.length);
        } else {
            entries[v.index - 1].registeredAt = uint40(block.timestamp);
            v.deregisteredAt = 0;
        }
        entries[v.index - 1].position = _active[poolId].add(v.index);
        emit ValidatorRegistered(poolId, msg.sender, v.index, v.locked);
    }

    /// @notice Lock `amount` more of the caller's free bonded stake here: each open verdict reserves
    /// `wrongVerdictSlash` of it, so the locked stake bounds how many verdicts a validator has open at once.
    function addBond(uint256 poolId, uint256 amount) external {
        _configured(poolId);
        ValidatorSet.Validator storage v = _registered(poolId, msg.sender);
        if (amount == 0) revert ZeroAmount();
        if (uint256(v.locked) + amount > type(uint96).max) revert BadCourtParams(7);
        _lock(v, amount);
        emit BondAdded(poolId, msg.sender, amount, v.locked);
    }

    /// @notice Stop validating the pool: leaves the active set (the last validator takes its place).
    /// Cases whose set it was in may still be assigned to it or seat it; its bond can be withdrawn once
    /// `exitDelay` has passed and nothing of it is reserved.
    function deregister(uint256 poolId) external {
        CourtParams storage p = _configured(poolId);
        ValidatorSet.Validator storage v = _registered(poolId, msg.sender);
        v.deregisteredAt = uint40(block.timestamp);
        ValidatorSet.Entry storage e = _entries[poolId][v.index - 1];
        uint256 moved = _active[poolId].remove(e.position);
        if (moved != 0) _entries[poolId][moved - 1].position = e.position;
        e.position = 0;
        emit ValidatorDeregistered(poolId, msg.sender, uint64(block.timestamp) + _exitDelay(p));
    }

    /// @notice Return a deregistered validator's locked stake to its free bonded stake.
    function withdrawBond(uint256 poolId) external {
        CourtParams storage p = _configured(poolId);
        ValidatorSet.Validator storage v = _validators[poolId][msg.sender];
        if (v.index == 0 || v.deregisteredAt == 0) revert NotRegistered(poolId, msg.sender);
        uint64 exitAt = uint64(v.deregisteredAt) + _exitDelay(p);
        if (block.timestamp < exitAt || v.reserved != 0) revert BondStillLocked(exitAt, v.reserved);
        uint256 amount = v.locked;
        if (amount == 0) revert ZeroAmount();
        v.locked = 0;
        emit BondWithdrawn(poolId, msg.sender, amount);
        stakeManager.unlock(msg.sender, amount);
    }

    /// @notice Attest a pending submission as valid (the first verdict; see `_judge` for who may).
    function attest(bytes32 workId) external nonReentrant {
        _judge(workId, true, 0, bytes32(0));
    }

    /// @notice Challenge a pending submission (the first verdict). The worker is slashed only if the
    /// verdict becomes final.
    function challenge(bytes32 workId, uint16 reasonCode, bytes32 evidenceDigest) external nonReentrant {
        _judge(workId, false, reasonCode, evidenceDigest);
    }

    /// @notice Record a pending submission's assignment (anyone, from two blocks after the submission):
    /// a verdict records it too; recording it before the block hash it draws from is 256 blocks old keeps
    /// the assigned window and the silence penalty (past that, an unrecorded case has no assignee).
    function drawAssignment(bytes32 workId) external {
        Case storage c = cases[workId];
        if (c.state != CaseState.Pending) revert WrongCaseState(workId, c.state);
        if (block.number <= uint256(c.submittedBlock) + 1) revert AssignmentNotDrawn(workId);
        if (c.assigned != 0 || blockhash(uint256(c.submittedBlock) + 1) == bytes32(0)) {
            revert AssignmentRecorded(workId);
        }
        uint24 assigned = _drawAssignment(workId, c, _params[c.poolId].activationDelay);
        c.assigned = assigned;
        emit AssignmentDrawn(workId, assigned == NO_ONE ? address(0) : _entries[c.poolId][assigned - 1].validator);
    }

    /// @notice Dispute the first verdict of a submission within the dispute window, locking the
    /// pool's dispute bond (a registered validator of the case's set that is neither the judge nor the worker).
    function dispute(bytes32 workId, bytes32 evidenceDigest) external {
        (Case storage c, CourtParams storage p, ValidatorSet.Validator storage v) = _auditor(workId);
        uint256 poolId = c.poolId;
        uint256 free = v.locked - v.reserved; // a freed dispute bond stays locked here: use it again first
        if (free < p.disputeBond) _lock(v, p.disputeBond - free);
        v.reserved += uint96(p.disputeBond);
        c.state = CaseState.Disputed;
        disputes[workId] = Dispute({
            disputer: v.index,
            disputedAt: uint40(block.timestamp),
            disputeBlock: uint40(block.number),
            votesValid: 0,
            votesInvalid: 0,
            drawn: false,
            round: 0,
            concurrences: 0
        });
        emit Disputed(poolId, workId, msg.sender, evidenceDigest);
    }

    /// @notice Concur with the first verdict of a submission within the dispute window (a validator that may
    /// dispute it: of the case's set, registered, neither the judge nor the worker). Once every validator
    /// of the case's set but the judge and the worker has concurred, nobody is left who may dispute it:
    /// the verdict is final at once, as after the window (docs/protocol.md, "Early finality").
    function concur(bytes32 workId) external nonReentrant {
        (Case storage c, CourtParams storage p,) = _auditor(workId);
        if (_concurred[workId][msg.sender]) revert AlreadyConcurred(workId, msg.sender);
        _concurred[workId][msg.sender] = true;
        uint24 concurrences = ++disputes[workId].concurrences;
        emit Concurred(workId, msg.sender, concurrences);
        if (concurrences == _mayDispute(c, p)) _finalVerdict(c.poolId, workId, c, p);
    }

    /// @dev How many validators may dispute the case's verdict: its set but the judge and the worker. The
    /// worker's entry is left out only if it is certainly in the set; counting it otherwise asks one
    /// concurrence too many (the case then waits for its window), never one too few.
    function _mayDispute(Case storage c, CourtParams storage p) private view returns (uint256 n) {
        uint256 poolId = c.poolId;
        uint256 key = _caseKey(c, p);
        n = _active[poolId].sizeAt(key) - 1;
        uint24 worker = c.workerIndex;
        if (worker != 0 && _inCaseSet(poolId, _validators[poolId][_entries[poolId][worker - 1].validator], key)) {
            n -= 1;
        }
    }

    /// @notice Draw the dispute committee, once (anyone, from the block after the dispute on, within the
    /// commit period): `committeeSize` validators of the case's set — fewer only when fewer are eligible —
    /// none of them a party, each with `nonVoterPenalty` of unreserved stake, by the hash of the block
    /// after the dispute. Seats are drawn uniformly; if the random draws miss, a walk over the whole set in
    /// an order drawn from the same hash fills the rest.
    function drawCommittee(bytes32 workId) external {
        (Case storage c, Dispute storage d) = _disputed(workId);
        if (d.drawn) revert WrongCaseState(workId, c.state);
        if (block.number <= uint256(d.disputeBlock) + 1) revert CommitteeNotDrawn(workId);
        uint256 poolId = c.poolId;
        CourtParams storage p = _params[poolId];
        // drawn in the first half of the commit period: a late draw would leave its members no time to commit
        uint64 until = uint64(d.disputedAt) + p.commitPeriod / 2;
        if (block.timestamp > until) revert OutsidePeriod(workId, d.disputedAt, until);
        bytes32 hash = blockhash(uint256(d.disputeBlock) + 1);
        if (hash == bytes32(0)) {
            // past the 256-block horizon: anchored again to the next block, never to one the caller picks
            d.disputeBlock = uint40(block.number);
            return;
        }
        d.drawn = true;
        ValidatorSet.Draw memory draw = ValidatorSet.Draw({
            key: _caseKey(c, p),
            seed: keccak256(abi.encode(hash, workId, d.round)),
            size: p.committeeSize,
            penalty: p.nonVoterPenalty,
            judge: c.judge,
            disputer: d.disputer,
            worker: c.workerIndex
        });
        address[] storage committee = _committees[workId];
        ValidatorSet.drawCommittee(_active[poolId], _entries[poolId], _validators[poolId], committee, draw);
        emit CommitteeDrawn(poolId, workId, committee);
    }

    /// @notice Commit a vote: `commitment = keccak256(abi.encode(workId, voter, workValid, salt))`.
    function commitVote(bytes32 workId, bytes32 commitment) external {
        (Case storage c, Dispute storage d) = _disputed(workId);
        uint64 until = uint64(d.disputedAt) + _params[c.poolId].commitPeriod;
        if (block.timestamp > until) revert OutsidePeriod(workId, d.disputedAt, until);
        if (!_inCommittee(_committees[workId], msg.sender)) revert NotCommitteeMember(workId, msg.sender);
        bytes32 vote = votes[workId][msg.sender];
        // 1 and 2 mark revealed votes: no commitment may look like one
        if (vote != bytes32(0) || uint256(commitment) <= 2) revert AlreadyCommitted(workId, msg.sender);
        votes[workId][msg.sender] = commitment;
        emit VoteCommitted(workId, msg.sender);
    }

    /// @notice Reveal a committed vote during the reveal period.
    function revealVote(bytes32 workId, bool workValid, bytes32 salt) external {
        (Case storage c, Dispute storage d) = _disputed(workId);
        CourtParams storage p = _params[c.poolId];
        uint64 from = uint64(d.disputedAt) + p.commitPeriod;
        uint64 until = from + p.revealPeriod;
        if (block.timestamp <= from || block.timestamp > until) revert OutsidePeriod(workId, from + 1, until);
        bytes32 commitment = votes[workId][msg.sender];
        if (commitment == bytes32(0) || commitment != keccak256(abi.encode(workId, msg.sender, workValid, salt))) {
            revert RevealMismatch(workId, msg.sender);
        }
        votes[workId][msg.sender] = workValid ? DisputeSettlement.REVEALED_VALID : DisputeSettlement.REVEALED_INVALID;
        if (workValid) d.votesValid += 1;
        else d.votesInvalid += 1;
        emit VoteRevealed(workId, msg.sender, workValid);
    }

    /// @notice Decide a dispute after the reveal period (anyone) and make the decided verdict final.
    /// Overturned: the judge loses `wrongVerdictSlash`, the disputer's bond is freed and the disputer
    /// becomes the verdict's owner (fee, bounty). Upheld (also on a tie with votes): the disputer loses
    /// its bond. No vote revealed (or no committee): the dispute is reopened — a new committee is drawn
    /// and votes in a new commit and reveal period — up to `DISPUTE_ROUNDS` committees; after the last,
    /// the case is void (no verdict reaches the pool, the judge and the disputer are freed). Committee members that did not reveal lose `nonVoterPenalty`;
    /// the majority's voters share every amount taken (the remainder, or all of it when no one voted with
    /// a majority, goes to the pool's fee budget).
    function resolve(bytes32 workId) external nonReentrant {
        (Case storage c, Dispute storage d) = _disputed(workId);
        CourtParams storage p = _params[c.poolId];
        uint64 until = uint64(d.disputedAt) + p.commitPeriod + p.revealPeriod;
        if (block.timestamp <= until) revert OutsidePeriod(workId, until + 1, type(uint64).max);
        DisputeSettlement.Outcome memory o = _outcome(workId, c, d, p);
        bool noVote = o.votesValid + o.votesInvalid == 0;
        o.reopen = noVote && d.round + 1 < DISPUTE_ROUNDS;
        DisputeSettlement.release(_validators[o.poolId], _freedAt[o.poolId], _committees[workId], o);
        (address winner, uint256 remainder) = DisputeSettlement.settle(
            _validators[o.poolId], _committees[workId], votes[workId], credits, stakeManager, o
        );
        feeBudget[o.poolId] += remainder;
        if (o.reopen) {
            // nobody revealed: a new committee, drawn from the next block's hash, gets a full commit and reveal
            d.round += 1;
            d.disputedAt = uint40(block.timestamp);
            d.disputeBlock = uint40(block.number);
            d.drawn = false;
            emit DisputeReopened(o.poolId, workId, d.round);
            return;
        }
        emit DisputeResolved(workId, o.workValid, o.overturned, uint16(o.votesValid), uint16(o.votesInvalid));
        if (noVote) {
            c.state = CaseState.Void;
            emit CaseVoided(o.poolId, workId, VOID_NO_VOTE);
            return;
        }
        if (o.overturned) {
            c.accepted = o.workValid;
            c.reasonCode = REASON_DISPUTE;
        }
        _finalize(o.poolId, workId, c, p, winner);
    }

    /// @dev The resolved dispute: the revealed majority decides; a tie (or no vote) keeps the verdict.
    function _outcome(bytes32 workId, Case storage c, Dispute storage d, CourtParams storage p)
        private
        view
        returns (DisputeSettlement.Outcome memory o)
    {
        (uint256 yes, uint256 no) = (d.votesValid, d.votesInvalid);
        o.poolId = c.poolId;
        o.workId = workId;
        o.judge = _entries[o.poolId][c.judge - 1].validator;
        o.disputer = _entries[o.poolId][d.disputer - 1].validator;
        o.workValid = yes > no ? true : no > yes ? false : c.accepted;
        o.overturned = o.workValid != c.accepted;
        o.votesValid = yes;
        o.votesInvalid = no;
        o.wrongVerdictSlash = p.wrongVerdictSlash;
        o.disputeBond = p.disputeBond;
        o.nonVoterPenalty = p.nonVoterPenalty;
    }

    /// @notice Make an undisputed verdict final once its dispute window has passed (anyone): records it
    /// in the ComputePool, frees the judge's reservation and pays the verdict fee (and a challenge's bounty).
    /// A case nobody judged within its verdict window is voided instead, and its silent assignee loses
    /// `silencePenalty` to the pool's fee budget.
    function finalize(bytes32 workId) external nonReentrant {
        Case storage c = cases[workId];
        uint256 poolId = c.poolId;
        CourtParams storage p = _params[poolId];
        if (c.state == CaseState.Pending) {
            uint64 closes = uint64(c.submittedAt) + p.verdictWindow;
            if (block.timestamp <= closes) revert OutsidePeriod(workId, closes + 1, type(uint64).max);
            c.state = CaseState.Void;
            uint24 assigned = c.assigned != 0 ? c.assigned : _drawAssignment(workId, c, p.activationDelay);
            c.assigned = assigned;
            emit CaseVoided(poolId, workId, VOID_LAPSED);
            if (assigned != NO_ONE) {
                address silent = _entries[poolId][assigned - 1].validator;
                feeBudget[poolId] += _penalizeSilence(workId, c, p, silent);
            }
            return;
        }
        if (c.state != CaseState.Verdict) revert WrongCaseState(workId, c.state);
        uint64 from = uint64(c.verdictAt) + p.disputeWindow;
        if (block.timestamp <= from) revert OutsidePeriod(workId, from + 1, type(uint64).max);
        _finalVerdict(poolId, workId, c, p);
    }

    /// @notice Withdraw everything credited to the caller.
    function withdraw() external nonReentrant {
        uint256 amount = credits[msg.sender];
        if (amount == 0) revert ZeroAmount();
        credits[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        token.safeTransfer(msg.sender, amount);
    }

    // ------------------------------------------------------------------ views

    function getParams(uint256 poolId) external view returns (CourtParams memory) {
        return _params[poolId];
    }

    function getValidator(uint256 poolId, address validator) external view returns (ValidatorView memory view_) {
        ValidatorSet.Validator memory v = _validators[poolId][validator];
        view_.index = v.index;
        view_.deregisteredAt = v.deregisteredAt;
        view_.locked = v.locked;
        view_.reserved = v.reserved;
        if (v.index != 0) view_.registeredAt = _entries[poolId][v.index - 1].registeredAt;
    }

    /// @notice The pool's active validators now (`at`: 1-based index of the validator at each position).
    function activeCount(uint256 poolId) external view returns (uint256) {
        return _active[poolId].count.value;
    }

    /// @notice The validator assigned to a submission (zero: none yet — wait one block — or none in the
    /// case's set, or the draw was not recorded before its block hash passed the 256-block horizon: then any
    /// validator of the case's set may judge).
    function assignedValidator(bytes32 workId) external view returns (address) {
        Case memory c = cases[workId];
        if (c.state == CaseState.None || block.number <= uint256(c.submittedBlock) + 1) return address(0);
        uint24 index = c.assigned != 0 ? c.assigned : _drawAssignment(workId, c, _params[c.poolId].activationDelay);
        return index == NO_ONE ? address(0) : _entries[c.poolId][index - 1].validator;
    }

    /// @notice The validators drawn to decide the submission's dispute.
    function committeeOf(bytes32 workId) external view returns (address[] memory) {
        return _committees[workId];
    }

    /// @notice Seconds after deregistering before a validator's bond can be withdrawn: every case it
    /// can still be part of (its set is fixed `activationDelay` before the submission) is decided by then.
    function exitDelay(uint256 poolId) external view returns (uint64) {
        return _exitDelay(_configured(poolId));
    }

    // ------------------------------------------------------------------ internal

    /// @dev First verdict. Before `assignedWindow` ends only the assigned validator may give it (if none is
    /// assigned, any validator of the case's set); until `verdictWindow` ends any validator of the set that
    /// is not the worker, and the silent assigned one then loses `silencePenalty` to the judge. The judge
    /// reserves `wrongVerdictSlash` of its locked stake until the verdict is final.
    function _judge(bytes32 workId, bool accepted, uint16 reasonCode, bytes32 evidenceDigest) private {
        Case storage c = cases[workId];
        if (c.state != CaseState.Pending) revert WrongCaseState(workId, c.state);
        uint256 poolId = c.poolId;
        CourtParams storage p = _params[poolId];
        ValidatorSet.Validator storage v = _eligibleJudge(workId, c, p);
        uint96 exposure = p.wrongVerdictSlash;
        if (v.locked - v.reserved < exposure) revert InsufficientBond(v.locked - v.reserved, exposure);
        v.reserved += exposure;
        c.state = CaseState.Verdict;
        c.accepted = accepted;
        c.judge = v.index;
        c.verdictAt = uint40(block.timestamp);
        if (!accepted) {
            c.reasonCode = reasonCode;
            _evidence[workId] = evidenceDigest;
        }
        emit VerdictGiven(poolId, workId, msg.sender, accepted, reasonCode, evidenceDigest);
        if (_mayDispute(c, p) == 0) _finalVerdict(poolId, workId, c, p); // a set of the judge alone: nobody may dispute
    }

    /// @dev The caller's record if it may give the first verdict now (recording the draw, and penalizing
    /// a silent assigned validator): the assigned validator, or (after the assigned window, when none is
    /// assigned, or while the assignee's unreserved stake is below `wrongVerdictSlash`) a validator of the
    /// case's set that is not the worker.
    function _eligibleJudge(bytes32 workId, Case storage c, CourtParams storage p)
        private
        returns (ValidatorSet.Validator storage v)
    {
        uint64 submittedAt = c.submittedAt;
        if (block.timestamp > submittedAt + p.verdictWindow) {
            revert OutsidePeriod(workId, submittedAt, submittedAt + p.verdictWindow);
        }
        if (block.number <= uint256(c.submittedBlock) + 1) revert AssignmentNotDrawn(workId);
        uint256 poolId = c.poolId;
        v = _validators[poolId][msg.sender];
        uint24 index = v.index;
        uint24 assigned = c.assigned;
        if (assigned == 0) {
            assigned = _drawAssignment(workId, c, p.activationDelay);
            c.assigned = assigned;
        }
        if (index == assigned && index != 0) return v;
        if (index == 0 || index == c.workerIndex || !_inCaseSet(poolId, v, _caseKey(c, p))) {
            revert NotEligible(workId, msg.sender);
        }
        if (assigned != NO_ONE) {
            address silent = _entries[poolId][assigned - 1].validator;
            ValidatorSet.Validator storage a = _validators[poolId][silent];
            // an assignee without the stake a verdict reserves cannot judge now: its window would only hold the
            // file up (it pays no silence penalty either, below)
            if (block.timestamp <= submittedAt + p.assignedWindow && a.locked - a.reserved >= p.wrongVerdictSlash) {
                revert NotAssigned(workId, silent);
            }
            uint256 taken = _penalizeSilence(workId, c, p, silent);
            if (taken != 0) _credit(msg.sender, taken);
        }
    }

    /// @dev The assignment: the validator at a position of the case's set drawn by the hash of the block
    /// after the submission (drawn again if that is the worker); NO_ONE if the set is empty, is the
    /// worker alone, or the hash is past the 256-block horizon. Every input was fixed before that hash
    /// existed, so recomputing it gives the same answer until the horizon; O(1) storage reads.
    function _drawAssignment(bytes32 workId, Case memory c, uint24 delay) private view returns (uint24) {
        bytes32 hash = blockhash(uint256(c.submittedBlock) + 1);
        uint256 key = uint256(c.submittedAt) - delay;
        uint256 n = _active[c.poolId].sizeAt(key);
        if (n == 0 || hash == bytes32(0)) return NO_ONE;
        // slither-disable-next-line weak-prng (block-hash randomness by design: docs/protocol.md, its bias)
        uint256 position = uint256(keccak256(abi.encode(hash, workId))) % n;
        uint256 index = _active[c.poolId].indexAt(position, key);
        if (index == c.workerIndex && n == 1) return NO_ONE;
        // the worker's own entry: draw again (a neighbour rule would give the entry after it twice the odds)
        for (uint256 attempt = 1; index == c.workerIndex && attempt < REDRAWS; ++attempt) {
            // slither-disable-next-line weak-prng (the same block-hash randomness, documented with its bias)
            position = uint256(keccak256(abi.encode(hash, workId, attempt))) % n;
            index = _active[c.poolId].indexAt(position, key);
        }
        if (index == c.workerIndex) {
            // slither-disable-next-line weak-prng (after REDRAWS misses, odds (1/n)^REDRAWS: the next position)
            index = _active[c.poolId].indexAt((position + 1) % n, key);
        }
        return uint24(index);
    }

    /// @dev The time whose active set judges the case.
    function _caseKey(Case storage c, CourtParams storage p) private view returns (uint256) {
        return uint256(c.submittedAt) - p.activationDelay;
    }

    /// @dev Whether `v` was in the active set at `key`, judged by its current stint (registered at or
    /// before `key` and not deregistered by then): true only if it was; a validator that re-registered
    /// since is refused (it may still be the case's assignee or sit on its committee).
    function _inCaseSet(uint256 poolId, ValidatorSet.Validator storage v, uint256 key) private view returns (bool) {
        uint256 gone = v.deregisteredAt;
        return _entries[poolId][v.index - 1].registeredAt <= key && (gone == 0 || gone > key);
    }

    /// @dev The undisputed first verdict becomes final: the judge's reservation is freed and it is recorded.
    function _finalVerdict(uint256 poolId, bytes32 workId, Case storage c, CourtParams storage p) private {
        address judge = _entries[poolId][c.judge - 1].validator;
        ValidatorSet.release(_validators[poolId], _freedAt[poolId], judge, p.wrongVerdictSlash, p.wrongVerdictSlash);
        _finalize(poolId, workId, c, p, judge);
    }

    /// @dev The case of an undisputed verdict inside its dispute window, and the caller's record if it may
    /// dispute (or concur with) that verdict: registered, in the case's set, neither the judge nor the worker.
    function _auditor(bytes32 workId)
        private
        view
        returns (Case storage c, CourtParams storage p, ValidatorSet.Validator storage v)
    {
        c = cases[workId];
        if (c.state != CaseState.Verdict) revert WrongCaseState(workId, c.state);
        uint256 poolId = c.poolId;
        p = _params[poolId];
        uint64 until = uint64(c.verdictAt) + p.disputeWindow;
        if (block.timestamp > until) revert OutsidePeriod(workId, c.verdictAt, until);
        v = _registered(poolId, msg.sender);
        if (v.index == c.judge || v.index == c.workerIndex || !_inCaseSet(poolId, v, _caseKey(c, p))) {
            revert NotEligible(workId, msg.sender);
        }
    }

    /// @dev Record the final verdict in the ComputePool (the judge's reservation was freed by the caller);
    /// `owner_`, whose verdict it is, gets the fee and a challenge's bounty.
    function _finalize(uint256 poolId, bytes32 workId, Case storage c, CourtParams storage p, address owner_) private {
        c.state = CaseState.Final;
        uint256 fee = p.verdictFee;
        uint256 budget = feeBudget[poolId];
        if (fee > budget) fee = budget;
        feeBudget[poolId] = budget - fee;
        if (fee != 0) _credit(owner_, fee);
        emit VerdictFinal(poolId, workId, c.accepted, owner_, fee);
        if (c.accepted) {
            pools.attest(workId);
        } else {
            uint256 before = token.balanceOf(address(this));
            pools.challenge(workId, c.reasonCode, _evidence[workId]);
            uint256 bounty = token.balanceOf(address(this)) - before;
            if (bounty != 0) _credit(owner_, bounty);
        }
    }

    /// @dev Take up to `amount` of `party`'s locked stake here into this contract; returns what was taken.
    function _penalize(uint256 poolId, bytes32 workId, address party, uint8 why, uint256 amount)
        private
        returns (uint256 taken)
    {
        ValidatorSet.Validator storage v = _validators[poolId][party];
        taken = amount < v.locked ? amount : v.locked;
        if (taken == 0) return 0;
        v.locked -= uint96(taken);
        emit ValidatorPenalized(poolId, workId, party, why, taken);
        stakeManager.slash(party, taken, address(this), 10_000);
    }

    /// @dev The silent assigned validator loses up to `silencePenalty` of its unreserved stake; returns what was
    /// taken. Nothing when it could not have judged: its unreserved stake is below `wrongVerdictSlash` (a verdict's
    /// reservation) now, or a freed reservation brought it back to that in the second half of its assigned window
    /// or since (`_freedAt`) — so a burst of work that ties up its stake through its window cannot turn its silence
    /// into a penalty for a stand-in to collect, whenever the stand-in judges. Locking more stake is not a release:
    /// an `addBond` right after saturating itself would otherwise excuse any silence.
    function _penalizeSilence(bytes32 workId, Case storage c, CourtParams storage p, address silent)
        private
        returns (uint256)
    {
        uint256 poolId = c.poolId;
        ValidatorSet.Validator storage s = _validators[poolId][silent];
        uint256 free = s.locked - s.reserved;
        uint256 closed = uint256(c.submittedAt) + p.assignedWindow;
        if (free < p.wrongVerdictSlash || uint256(_freedAt[poolId][silent]) + p.assignedWindow / 2 > closed) return 0;
        uint256 amount = p.silencePenalty;
        return _penalize(poolId, workId, silent, WHY_SILENCE, amount < free ? amount : free);
    }

    function _lock(ValidatorSet.Validator storage v, uint256 amount) private {
        if (amount == 0) return;
        v.locked += uint96(amount);
        stakeManager.lock(msg.sender, amount);
    }

    function _credit(address to, uint256 amount) private {
        credits[to] += amount;
        emit Credited(to, amount);
    }

    function _inCommittee(address[] storage committee, address who) private view returns (bool) {
        for (uint256 i; i < committee.length; ++i) {
            if (committee[i] == who) return true;
        }
        return false;
    }

    function _configured(uint256 poolId) private view returns (CourtParams storage p) {
        p = _params[poolId];
        if (p.committeeSize == 0) revert NotConfigured(poolId);
    }

    function _registered(uint256 poolId, address who) private view returns (ValidatorSet.Validator storage v) {
        v = _validators[poolId][who];
        if (v.index == 0 || v.deregisteredAt != 0) revert NotRegistered(poolId, who);
    }

    function _disputed(bytes32 workId) private view returns (Case storage c, Dispute storage d) {
        c = cases[workId];
        if (c.state != CaseState.Disputed) revert WrongCaseState(workId, c.state);
        d = disputes[workId];
    }

    /// @dev A validator deregistered at t is in the sets of cases submitted until t + activationDelay,
    /// each decided within the case periods after its submission.
    function _exitDelay(CourtParams storage p) private view returns (uint64) {
        return uint64(p.activationDelay) + p.verdictWindow + p.disputeWindow
            + uint64(DISPUTE_ROUNDS) * (uint64(p.commitPeriod) + p.revealPeriod);
    }
}
