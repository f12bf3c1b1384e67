// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IComputePool} from "./IComputePool.sol";
import {IStakeManager} from "./IStakeManager.sol";
import {IJudgedPool, IValidatorCourt} from "./IValidatorCourt.sol";

/// @title ValidatorCourt — bonded, permissionless validators who answer for their verdicts
/// @notice A pool opts in by making this court its only validator and freezing its validator set.
/// Anyone with the pool's validator bond locked here registers as a validator of the pool. Each
/// submission is assigned to one registered validator by the hash of the block after it, which the
/// worker cannot know when it submits; only that validator may give the first verdict during the
/// assigned window, then any registered validator may (and the silent one loses `silencePenalty`).
/// Any other registered validator may dispute a verdict within the dispute window by locking a
/// dispute bond; a committee drawn from the other validators by a later block hash votes by
/// commit–reveal, the revealed majority decides (a tie or no vote keeps the verdict), the losing
/// side is slashed and the majority shares what was slashed. A verdict reaches the ComputePool
/// (attest, or challenge that slashes the worker) only once it is final, so the trainer, the
/// worker's reward and the challenger's bounty all wait for finality, and an honest worker wrongly
/// challenged is never slashed. Rules, numbers and why honest play is each party's best response:
/// docs/protocol.md, "Bonded validators and disputes".
/// @dev Stake rule: `reserved ≤ locked` for every validator — each open verdict reserves
/// `wrongVerdictSlash`, each dispute its `disputeBond`, each committee seat `nonVoterPenalty`, so
/// every penalty but silence's (taken from what is unreserved) is paid in full.
contract ValidatorCourt is IValidatorCourt, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    /// @notice Largest dispute committee.
    uint8 public constant MAX_COMMITTEE = 15;
    /// @notice Longest verdict window (periods are stored in 24 bits; each is below the pool's challenge window).
    uint24 public constant MAX_PERIOD = 30 days;
    /// @notice Reason code of a challenge that a dispute committee decided (the work was attested first).
    uint16 public constant REASON_DISPUTE = 18;
    /// @dev Entries a committee draw walks, after its random draws, to fill seats they missed (bounds its gas).
    uint256 private constant MAX_FILL_SCAN = 64;
    uint8 private constant WHY_WRONG_VERDICT = 1;
    uint8 private constant WHY_LOST_DISPUTE = 2;
    uint8 private constant WHY_NO_VOTE = 3;
    uint8 private constant WHY_SILENCE = 4;
    uint8 private constant WHY_MINORITY = 5;
    bytes32 private constant REVEALED_VALID = bytes32(uint256(1));
    bytes32 private constant REVEALED_INVALID = bytes32(uint256(2));

    /// @dev One slot: what a verdict needs to read and reserve.
    struct Validator {
        uint24 index;
        uint40 deregisteredAt;
        uint96 locked;
        uint96 reserved;
    }

    struct Entry {
        address validator;
        uint40 registeredAt;
    }

    /// @dev One slot, written by the ComputePool's submission hook, so that a verdict only updates it.
    /// `workerIndex` is the worker's own validator index in the pool at submission (0 = none).
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
    }

    struct Dispute {
        uint24 disputer;
        uint40 disputedAt;
        uint40 disputeBlock;
        uint16 votesValid;
        uint16 votesInvalid;
    }

    IJudgedPool public immutable pools;
    IStakeManager public immutable stakeManager;
    IERC20 public immutable token;

    mapping(uint256 poolId => CourtParams) private _params;
    mapping(uint256 poolId => address) public poolOwner;
    mapping(uint256 poolId => uint256) public feeBudget;
    // slither-disable-next-line uninitialized-state (written through a storage pointer in `register`)
    mapping(uint256 poolId => Entry[]) private _entries;
    mapping(uint256 poolId => mapping(address => Validator)) private _validators;
    /// @notice Each submission's case (judge and disputer are 1-based validator indices: `validatorAt`).
    mapping(bytes32 workId => Case) public cases;
    mapping(bytes32 workId => Dispute) public disputes;
    mapping(bytes32 workId => bytes32) private _evidence;
    mapping(bytes32 workId => address[]) private _committees;
    /// @notice A committee member's commitment, then (once revealed) 1 = work valid, 2 = invalid.
    mapping(bytes32 workId => mapping(address voter => bytes32)) public votes;
    /// @notice Fees, bounties and shares of penalties owed to each address (`withdraw`).
    mapping(address => uint256) public credits;

    constructor(IJudgedPool pools_) {
        if (address(pools_) == address(0)) revert ZeroAddress();
        pools = pools_;
        stakeManager = pools_.stakeManager();
        token = IERC20(pools_.token());
    }

    // ------------------------------------------------------------------ pool owner

    /// @notice Set the court rules of a pool (its owner, once). The pool must have this court as its
    /// only validator with its validator set frozen, and the periods must end within its challenge window.
    function configurePool(uint256 poolId, CourtParams calldata p) external {
        IComputePool.PoolView memory pool = pools.getPool(poolId);
        if (msg.sender != pool.owner) revert NotPoolOwner(poolId, msg.sender);
        if (_params[poolId].committeeSize != 0) revert AlreadyConfigured(poolId);
        if (
            !pool.validatorsFrozen || pool.validatorCount != 1 || !pools.isValidator(poolId, address(this))
                || pools.judgeOf(poolId) != address(this)
        ) {
            revert CourtNotSoleValidator(poolId);
        }
        _checkParams(p, pool.params.challengeWindow);
        _params[poolId] = p;
        poolOwner[poolId] = pool.owner;
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
            reasonCode: 0
        });
    }

    // ------------------------------------------------------------------ validators

    /// @notice Register as a validator of the pool: locks (from the caller's free bonded stake) what
    /// its locked stake here lacks of the validator bond. Not the pool owner.
    function register(uint256 poolId) external {
        CourtParams storage p = _configured(poolId);
        if (msg.sender == poolOwner[poolId]) revert OwnerCannotValidate(poolId);
        Validator storage v = _validators[poolId][msg.sender];
        Entry[] storage entries = _entries[poolId];
        if (v.index != 0 && v.deregisteredAt == 0) revert AlreadyRegistered(poolId, msg.sender);
        uint256 bond = p.validatorBond;
        if (v.locked < bond) _lock(v, bond - v.locked);
        if (v.index == 0) {
            entries.push(Entry({validator: msg.sender, registeredAt: uint40(block.timestamp)}));
            v.index = uint24(entries.length);
        } else {
            // a returning validator rejoins at its old place, as if new: it is assigned only later work
            entries[v.index - 1].registeredAt = uint40(block.timestamp);
            v.deregisteredAt = 0;
        }
        emit ValidatorRegistered(poolId, msg.sender, v.index, v.locked);
    }

    /// @notice Lock `amount` more of the caller's free bonded stake here: each open verdict reserves
    /// `wrongVerdictSlash` of it, so the locked stake bounds how many verdicts a validator has open at once.
    function addBond(uint256 poolId, uint256 amount) external {
        _configured(poolId);
        Validator storage v = _registered(poolId, msg.sender);
        if (amount == 0) revert ZeroAmount();
        if (uint256(v.locked) + amount > type(uint96).max) revert BadCourtParams(7);
        _lock(v, amount);
        emit BondAdded(poolId, msg.sender, amount, v.locked);
    }

    /// @notice Stop validating the pool. Work submitted before now may still be assigned to the caller;
    /// its bond can be withdrawn once `exitDelay` has passed and nothing of it is reserved.
    function deregister(uint256 poolId) external {
        CourtParams storage p = _configured(poolId);
        Validator storage v = _registered(poolId, msg.sender);
        v.deregisteredAt = uint40(block.timestamp);
        emit ValidatorDeregistered(poolId, msg.sender, uint64(block.timestamp) + _exitDelay(p));
    }

    /// @notice Return a deregistered validator's locked stake to its free bonded stake.
    function withdrawBond(uint256 poolId) external {
        CourtParams storage p = _configured(poolId);
        Validator storage v = _validators[poolId][msg.sender];
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
    function attest(bytes32 workId) external {
        _judge(workId, true, 0, bytes32(0));
    }

    /// @notice Challenge a pending submission (the first verdict). The worker is slashed only if the
    /// verdict becomes final.
    function challenge(bytes32 workId, uint16 reasonCode, bytes32 evidenceDigest) external {
        _judge(workId, false, reasonCode, evidenceDigest);
    }

    /// @notice Dispute the first verdict of a submission within the dispute window, locking the
    /// pool's dispute bond (a registered validator that is neither the judge nor the worker).
    function dispute(bytes32 workId, bytes32 evidenceDigest) external {
        Case storage c = cases[workId];
        if (c.state != CaseState.Verdict) revert WrongCaseState(workId, c.state);
        uint256 poolId = c.poolId;
        CourtParams storage p = _params[poolId];
        uint64 until = uint64(c.verdictAt) + p.disputeWindow;
        if (block.timestamp > until) revert OutsidePeriod(workId, c.verdictAt, until);
        Validator storage v = _registered(poolId, msg.sender);
        if (v.index == c.judge || v.index == c.workerIndex) revert NotEligible(workId, msg.sender);
        uint256 free = v.locked - v.reserved; // a freed dispute bond stays locked here: use it again first
        if (free < p.disputeBond) _lock(v, p.disputeBond - free);
        v.reserved += uint96(p.disputeBond);
        c.state = CaseState.Disputed;
        disputes[workId] = Dispute({
            disputer: v.index,
            disputedAt: uint40(block.timestamp),
            disputeBlock: uint40(block.number),
            votesValid: 0,
            votesInvalid: 0
        });
        emit Disputed(poolId, workId, msg.sender, evidenceDigest);
    }

    /// @notice Draw the dispute committee (anyone, from the block after the dispute on, within the
    /// commit period): up to `committeeSize` validators registered before the submission and still
    /// registered, none of them a party, each with `nonVoterPenalty` of unreserved stake, by the hash
    /// of the block after the dispute.
    function drawCommittee(bytes32 workId) external {
        (Case storage c, Dispute storage d) = _disputed(workId);
        address[] storage committee = _committees[workId];
        if (committee.length != 0) revert WrongCaseState(workId, c.state);
        if (block.number <= uint256(d.disputeBlock) + 1) revert CommitteeNotDrawn(workId);
        uint256 poolId = c.poolId;
        CourtParams storage p = _params[poolId];
        uint64 until = uint64(d.disputedAt) + p.commitPeriod;
        if (block.timestamp > until) revert OutsidePeriod(workId, d.disputedAt, until);
        bytes32 seed = keccak256(abi.encode(_blockHashAfter(d.disputeBlock), workId));
        uint256 n = _entries[poolId].length; // ≥ 2: the judge and the disputer
        uint256 size = p.committeeSize;
        for (uint256 j; j < 4 * size + 8 && committee.length < size; ++j) {
            // slither-disable-next-line weak-prng (block-hash randomness by design: docs/protocol.md, its bias)
            _seat(c, d, committee, uint256(keccak256(abi.encode(seed, j))) % n + 1, p.nonVoterPenalty);
        }
        // Random draws can miss the last eligible validators when few are eligible; then walk the list from a
        // random place (at most MAX_FILL_SCAN entries, to bound gas), so a committee is short only when fewer
        // than committeeSize validators are eligible.
        for (uint256 j; j < n && j < MAX_FILL_SCAN && committee.length < size; ++j) {
            // slither-disable-next-line weak-prng (block-hash randomness by design: docs/protocol.md, its bias)
            _seat(c, d, committee, (uint256(seed) + j) % n + 1, p.nonVoterPenalty);
        }
        emit CommitteeDrawn(workId, committee);
    }

    /// @notice Commit a vote: `commitment = keccak256(abi.encode(workId, voter, workValid, salt))`.
    function commitVote(bytes32 workId, bytes32 commitment) external {
        (Case storage c, Dispute storage d) = _disputed(workId);
        uint64 until = uint64(d.disputedAt) + _params[c.poolId].commitPeriod;
        if (block.timestamp > until) revert OutsidePeriod(workId, d.disputedAt, until);
        if (!_inCommittee(_committees[workId], msg.sender)) revert NotCommitteeMember(workId, msg.sender);
        bytes32 vote = votes[workId][msg.sender];
        if (vote != bytes32(0) || commitment == bytes32(0) || commitment == REVEALED_VALID
                || commitment == REVEALED_INVALID) revert AlreadyCommitted(workId, msg.sender);
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
        votes[workId][msg.sender] = workValid ? REVEALED_VALID : REVEALED_INVALID;
        if (workValid) d.votesValid += 1;
        else d.votesInvalid += 1;
        emit VoteRevealed(workId, msg.sender, workValid);
    }

    /// @notice Decide a dispute after the reveal period (anyone) and make the decided verdict final.
    /// Overturned: the judge loses `wrongVerdictSlash`, the disputer's bond is freed and the disputer
    /// becomes the verdict's owner (fee, bounty). Upheld (also on a tie with votes): the disputer loses
    /// its bond. No vote revealed: the verdict stands and the bond is freed. Committee members that
    /// did not reveal lose `nonVoterPenalty`; the majority's voters share every amount taken (the
    /// remainder, or all of it when no one voted with a majority, goes to the pool's fee budget).
    function resolve(bytes32 workId) external nonReentrant {
        (Case storage c, Dispute storage d) = _disputed(workId);
        CourtParams storage p = _params[c.poolId];
        uint64 until = uint64(d.disputedAt) + p.commitPeriod + p.revealPeriod;
        if (block.timestamp <= until) revert OutsidePeriod(workId, until + 1, type(uint64).max);
        (uint16 yes, uint16 no) = (d.votesValid, d.votesInvalid);
        bool workValid = yes > no ? true : no > yes ? false : c.accepted;
        bool overturned = workValid != c.accepted;
        address winner = _settle(workId, c, d, p, overturned);
        emit DisputeResolved(workId, workValid, overturned, yes, no);
        if (overturned) {
            c.accepted = workValid;
            c.reasonCode = REASON_DISPUTE;
        }
        _finalize(c.poolId, workId, c, p, winner);
    }

    /// @notice Make an undisputed verdict final once its dispute window has passed (anyone): records it
    /// in the ComputePool, frees the judge's reservation and pays the verdict fee (and a challenge's bounty).
    function finalize(bytes32 workId) external nonReentrant {
        Case storage c = cases[workId];
        if (c.state != CaseState.Verdict) revert WrongCaseState(workId, c.state);
        uint256 poolId = c.poolId;
        CourtParams storage p = _params[poolId];
        uint64 from = uint64(c.verdictAt) + p.disputeWindow;
        if (block.timestamp <= from) revert OutsidePeriod(workId, from + 1, type(uint64).max);
        address judge = _entries[poolId][c.judge - 1].validator;
        _validators[poolId][judge].reserved -= uint96(p.wrongVerdictSlash);
        _finalize(poolId, workId, c, p, judge);
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
        Validator memory v = _validators[poolId][validator];
        view_.index = v.index;
        view_.deregisteredAt = v.deregisteredAt;
        view_.locked = v.locked;
        view_.reserved = v.reserved;
        if (v.index != 0) view_.registeredAt = _entries[poolId][v.index - 1].registeredAt;
    }

    /// @notice The validator assigned to a submission (zero: none yet — wait one block — or none
    /// registered before it, or the hash is older than 256 blocks: then any registered validator may judge).
    function assignedValidator(bytes32 workId) external view returns (address) {
        Case memory c = cases[workId];
        if (c.state == CaseState.None || block.number <= uint256(c.submittedBlock) + 1) return address(0);
        uint256 index = _assignment(workId, c);
        return index == 0 ? address(0) : _entries[c.poolId][index - 1].validator;
    }

    /// @notice The validators drawn to decide the submission's dispute.
    function committeeOf(bytes32 workId) external view returns (address[] memory) {
        return _committees[workId];
    }

    /// @notice Seconds after deregistering before a validator's bond can be withdrawn: every case it
    /// can still be part of is decided by then.
    function exitDelay(uint256 poolId) external view returns (uint64) {
        return _exitDelay(_configured(poolId));
    }

    // ------------------------------------------------------------------ internal

    /// @dev First verdict. Before `assignedWindow` ends only the assigned validator may give it (if none is
    /// assigned, any registered one); until `verdictWindow` ends any registered validator that is not the
    /// worker, and the silent assigned one then loses `silencePenalty` to the judge. The judge reserves
    /// `wrongVerdictSlash` of its locked stake until the verdict is final.
    function _judge(bytes32 workId, bool accepted, uint16 reasonCode, bytes32 evidenceDigest) private {
        Case storage c = cases[workId];
        if (c.state != CaseState.Pending) revert WrongCaseState(workId, c.state);
        uint256 poolId = c.poolId;
        CourtParams storage p = _params[poolId];
        Validator storage v = _eligibleJudge(workId, c, p);
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
    }

    /// @dev The caller's record if it may give the first verdict now (penalizing a silent assigned
    /// validator): registered before the submission and not deregistered by then, not the worker.
    function _eligibleJudge(bytes32 workId, Case storage c, CourtParams storage p)
        private
        returns (Validator storage v)
    {
        uint64 submittedAt = c.submittedAt;
        if (block.timestamp > submittedAt + p.verdictWindow) {
            revert OutsidePeriod(workId, submittedAt, submittedAt + p.verdictWindow);
        }
        if (block.number <= uint256(c.submittedBlock) + 1) revert AssignmentNotDrawn(workId);
        uint256 poolId = c.poolId;
        v = _validators[poolId][msg.sender];
        uint24 index = v.index;
        if (
            index == 0 || index == c.workerIndex || (v.deregisteredAt != 0 && v.deregisteredAt <= submittedAt)
                || _entries[poolId][index - 1].registeredAt > submittedAt
        ) revert NotEligible(workId, msg.sender);
        uint256 assigned = _assignment(workId, c);
        if (assigned != 0 && assigned != index) {
            address silent = _entries[poolId][assigned - 1].validator;
            if (block.timestamp <= submittedAt + p.assignedWindow) revert NotAssigned(workId, silent);
            _penalizeSilence(poolId, workId, silent, msg.sender, p.silencePenalty);
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

    /// @dev Free the parties' reservations, take the losing side's stake and every non-voter's penalty,
    /// and share it between the winning party (returned) and the majority's voters; a tie has no majority
    /// to reward, so then (and for the division's remainder) it goes to the pool's fee budget.
    function _settle(bytes32 workId, Case storage c, Dispute storage d, CourtParams storage p, bool overturned)
        private
        returns (address winner)
    {
        uint256 poolId = c.poolId;
        address judge = _entries[poolId][c.judge - 1].validator;
        address disputer = _entries[poolId][d.disputer - 1].validator;
        _validators[poolId][judge].reserved -= p.wrongVerdictSlash;
        _validators[poolId][disputer].reserved -= uint96(p.disputeBond);
        uint256 votes = uint256(d.votesValid) + d.votesInvalid;
        uint256 pot;
        if (overturned) pot = _penalize(poolId, workId, judge, WHY_WRONG_VERDICT, p.wrongVerdictSlash);
        else if (votes > 0) pot = _penalize(poolId, workId, disputer, WHY_LOST_DISPUTE, p.disputeBond);
        bool workValid = overturned != c.accepted;
        bool tie = d.votesValid == d.votesInvalid;
        pot += _settleCommittee(poolId, workId, p.nonVoterPenalty, workValid ? REVEALED_VALID : REVEALED_INVALID, tie);
        winner = overturned ? disputer : judge;
        uint256 winners = d.votesValid == d.votesInvalid ? 0 : 1 + (workValid ? d.votesValid : d.votesInvalid);
        uint256 share = winners == 0 ? 0 : pot / winners;
        if (share != 0) _payMajority(workId, winner, workValid, share);
        feeBudget[poolId] += pot - share * winners;
    }

    /// @dev Free every committee seat's reservation and take `penalty` from the members that did not reveal
    /// and, unless the votes tied, from those that revealed the losing vote (so that a vote not made by
    /// checking the work — at random, or always the same — loses in expectation).
    function _settleCommittee(uint256 poolId, bytes32 workId, uint128 penalty, bytes32 winning, bool tie)
        private
        returns (uint256 taken)
    {
        address[] storage committee = _committees[workId];
        for (uint256 i; i < committee.length; ++i) {
            address member = committee[i];
            _validators[poolId][member].reserved -= uint96(penalty);
            bytes32 vote = votes[workId][member];
            bool revealed = vote == REVEALED_VALID || vote == REVEALED_INVALID;
            if (!revealed || (!tie && vote != winning)) {
                taken += _penalize(poolId, workId, member, revealed ? WHY_MINORITY : WHY_NO_VOTE, penalty);
            }
        }
    }

    /// @dev Credit `share` to the winning party and to every member that revealed the winning vote.
    function _payMajority(bytes32 workId, address party, bool workValid, uint256 share) private {
        _credit(party, share);
        bytes32 winning = workValid ? REVEALED_VALID : REVEALED_INVALID;
        address[] storage committee = _committees[workId];
        for (uint256 i; i < committee.length; ++i) {
            if (votes[workId][committee[i]] == winning) _credit(committee[i], share);
        }
    }

    /// @dev Take up to `amount` of `party`'s locked stake here into this contract; returns what was taken.
    function _penalize(uint256 poolId, bytes32 workId, address party, uint8 why, uint256 amount)
        private
        returns (uint256 taken)
    {
        Validator storage v = _validators[poolId][party];
        taken = amount < v.locked ? amount : v.locked;
        if (taken == 0) return 0;
        v.locked -= uint96(taken);
        emit ValidatorPenalized(poolId, workId, party, why, taken);
        stakeManager.slash(party, taken, address(this), 10_000);
    }

    /// @dev The silent assigned validator loses up to `amount` of its unreserved stake to the judge that stood in.
    function _penalizeSilence(uint256 poolId, bytes32 workId, address silent, address judge, uint256 amount) private {
        Validator storage s = _validators[poolId][silent];
        uint256 free = s.locked - s.reserved;
        uint256 taken = _penalize(poolId, workId, silent, WHY_SILENCE, amount < free ? amount : free);
        if (taken != 0) _credit(judge, taken);
    }

    /// @dev The assigned validator's 1-based index (0 = none): uniform over the validators registered at the
    /// submission (a prefix of the append-only list, found walking back from its end), by the hash of the
    /// block after the submission; none if that validator re-registered since or had deregistered by then.
    function _assignment(bytes32 workId, Case memory c) private view returns (uint256 index) {
        Entry[] storage entries = _entries[c.poolId];
        uint256 n = entries.length;
        while (n != 0 && entries[n - 1].registeredAt > c.submittedAt) --n;
        bytes32 hash = blockhash(uint256(c.submittedBlock) + 1);
        if (n == 0 || hash == bytes32(0)) return 0;
        // slither-disable-next-line weak-prng (block-hash randomness by design: docs/protocol.md, its bias)
        index = uint256(keccak256(abi.encode(hash, workId))) % n + 1;
        Entry storage e = entries[index - 1];
        uint40 gone = _validators[c.poolId][e.validator].deregisteredAt;
        if (e.registeredAt > c.submittedAt || (gone != 0 && gone <= c.submittedAt)) return 0;
    }

    /// @dev The hash of block `b + 1`; if it is older than 256 blocks, the previous block's (documented bias).
    function _blockHashAfter(uint40 b) private view returns (bytes32 hash) {
        hash = blockhash(uint256(b) + 1);
        if (hash == bytes32(0)) hash = blockhash(block.number - 1);
    }

    function _lock(Validator storage v, uint256 amount) private {
        if (amount == 0) return;
        v.locked += uint96(amount);
        stakeManager.lock(msg.sender, amount);
    }

    function _credit(address to, uint256 amount) private {
        credits[to] += amount;
        emit Credited(to, amount);
    }

    /// @dev Seat the validator at 1-based `index` on the committee if it is eligible: registered at the
    /// submission and still, neither the judge, the disputer nor the worker, not seated yet, and with
    /// `penalty` of unreserved locked stake (reserved until the dispute is resolved).
    function _seat(
        Case storage c,
        Dispute storage d,
        address[] storage committee,
        uint256 index,
        uint128 penalty
    ) private {
        Entry storage e = _entries[c.poolId][index - 1];
        Validator storage v = _validators[c.poolId][e.validator];
        if (
            v.deregisteredAt != 0 || e.registeredAt > c.submittedAt || index == c.judge || index == d.disputer
                || index == c.workerIndex || v.locked - v.reserved < penalty || _inCommittee(committee, e.validator)
        ) return;
        v.reserved += uint96(penalty);
        committee.push(e.validator);
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

    function _registered(uint256 poolId, address who) private view returns (Validator storage v) {
        v = _validators[poolId][who];
        if (v.index == 0 || v.deregisteredAt != 0) revert NotRegistered(poolId, who);
    }

    function _disputed(bytes32 workId) private view returns (Case storage c, Dispute storage d) {
        c = cases[workId];
        if (c.state != CaseState.Disputed) revert WrongCaseState(workId, c.state);
        d = disputes[workId];
    }

    function _exitDelay(CourtParams storage p) private view returns (uint64) {
        return uint64(p.verdictWindow) + p.disputeWindow + p.commitPeriod + p.revealPeriod;
    }

    /// @dev The periods fit in the pool's challenge window (so the final verdict still reaches the
    /// ComputePool, with the rest of the window as the margin to call `finalize`/`resolve`), and the bond
    /// covers the largest penalty of one case.
    function _checkParams(CourtParams calldata p, uint32 challengeWindow) private pure {
        if (p.committeeSize == 0 || p.committeeSize % 2 == 0 || p.committeeSize > MAX_COMMITTEE) {
            revert BadCourtParams(1);
        }
        if (p.assignedWindow == 0 || p.assignedWindow >= p.verdictWindow) {
            revert BadCourtParams(2);
        }
        if (p.disputeWindow == 0 || p.commitPeriod == 0 || p.revealPeriod == 0) {
            revert BadCourtParams(3);
        }
        if (uint256(p.verdictWindow) + p.disputeWindow + p.commitPeriod + p.revealPeriod >= challengeWindow) {
            revert BadCourtParams(4);
        }
        if (p.wrongVerdictSlash == 0 || p.disputeBond == 0 || p.nonVoterPenalty == 0) {
            revert BadCourtParams(5);
        }
        if (p.validatorBond < p.wrongVerdictSlash || p.validatorBond < p.nonVoterPenalty) {
            revert BadCourtParams(6);
        }
        if (p.validatorBond > type(uint96).max || p.disputeBond > type(uint96).max || p.verdictWindow > MAX_PERIOD) {
            revert BadCourtParams(7);
        }
    }
}
