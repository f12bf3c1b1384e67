// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IComputePool} from "./IComputePool.sol";
import {IStakeManager} from "./IStakeManager.sol";

/// @title IJudgedPool — the ComputePool functions a ValidatorCourt calls
interface IJudgedPool {
    function getPool(uint256 poolId) external view returns (IComputePool.PoolView memory);
    function isValidator(uint256 poolId, address validator) external view returns (bool);
    function judgeOf(uint256 poolId) external view returns (address);
    function stakeManager() external view returns (IStakeManager);
    function token() external view returns (address);
    function attest(bytes32 workId) external;
    function challenge(bytes32 workId, uint16 reasonCode, bytes32 evidenceDigest) external;
}

/// @title IValidatorCourt — events, errors and types of the bonded-validator court
interface IValidatorCourt {
    /// @dev None → Pending (submitted) → Verdict (first verdict) → Final, or Verdict → Disputed → Final (resolve).
    /// Void: no verdict reaches the ComputePool (nobody judged within the verdict window, or no committee
    /// member revealed a vote); the work expires there, neither paid nor slashed.
    enum CaseState {
        None,
        Pending,
        Verdict,
        Disputed,
        Final,
        Void
    }

    /// @notice A pool's court rules, set once by the pool owner (`configurePool`). Amounts are in
    /// stake-token base units, periods in seconds. Bounds: docs/protocol.md §1.2.
    /// @param validatorBond stake a validator locks to register (covers every amount below it can lose)
    /// @param verdictFee paid from the pool's fee budget to the validator whose verdict becomes final
    /// @param disputeBond stake a disputer locks; lost if the committee upholds the verdict
    /// @param wrongVerdictSlash taken from a validator whose verdict the committee overturns
    /// @param nonVoterPenalty taken from a committee member that does not reveal a vote, or (unless the
    /// votes tie) reveals the losing one
    /// @param silencePenalty taken from an assigned validator that gave no verdict in its window
    /// @param assignedWindow seconds after submission in which only the assigned validator may judge
    /// @param verdictWindow seconds after submission in which any first verdict must be given
    /// @param disputeWindow seconds after a verdict in which it may be disputed
    /// @param commitPeriod seconds after a dispute in which the committee is drawn and commits votes
    /// @param revealPeriod seconds after the commit period in which votes are revealed
    /// @param committeeSize validators drawn to decide a dispute (odd, 3 ≤ size ≤ MAX_COMMITTEE)
    /// @param activationDelay seconds a registration (or deregistration) takes to count: a case is judged by
    /// the validators active `activationDelay` seconds before its submission (≥ the court's `minPeriod`)
    /// @dev Declared in storage order: the last two slots hold everything a verdict reads.
    struct CourtParams {
        uint128 validatorBond;
        uint128 verdictFee;
        uint128 disputeBond;
        uint128 nonVoterPenalty;
        uint128 silencePenalty;
        uint24 assignedWindow;
        uint24 verdictWindow;
        uint24 disputeWindow;
        uint24 commitPeriod;
        uint24 revealPeriod;
        uint8 committeeSize;
        uint96 wrongVerdictSlash;
        uint24 activationDelay;
    }

    /// @notice One registered validator of a pool.
    /// @param index its 1-based place in the pool's validator list (0 = never registered)
    /// @param registeredAt when it (last) registered
    /// @param deregisteredAt when it deregistered (0 = registered)
    /// @param locked its stake the StakeManager locked for this court in this pool
    /// @param reserved the part of `locked` its open verdicts, disputes and committee seats can still lose
    struct ValidatorView {
        uint32 index;
        uint40 registeredAt;
        uint40 deregisteredAt;
        uint256 locked;
        uint256 reserved;
    }

    event CourtConfigured(uint256 indexed poolId, CourtParams params);
    event ValidatorRegistered(uint256 indexed poolId, address indexed validator, uint32 index, uint256 bond);
    event BondAdded(uint256 indexed poolId, address indexed validator, uint256 amount, uint256 locked);
    event ValidatorDeregistered(uint256 indexed poolId, address indexed validator, uint64 exitAt);
    event BondWithdrawn(uint256 indexed poolId, address indexed validator, uint256 amount);
    event FeesFunded(uint256 indexed poolId, address indexed from, uint256 amount, uint256 feeBudget);
    /// @notice `judge` gave the first verdict (`accepted`, else a challenge for `reasonCode`).
    event VerdictGiven(
        uint256 indexed poolId,
        bytes32 indexed workId,
        address indexed judge,
        bool accepted,
        uint16 reasonCode,
        bytes32 evidenceDigest
    );
    /// @notice `disputer` disputed the verdict, posting its dispute bond.
    event Disputed(uint256 indexed poolId, bytes32 indexed workId, address indexed disputer, bytes32 evidenceDigest);
    /// @notice The committee of the dispute on `workId`, a work of pool `poolId` (indexed first, as in every event of a
    /// case, so that a validator follows its own pool's committees with one topic filter).
    event CommitteeDrawn(uint256 indexed poolId, bytes32 indexed workId, address[] committee);
    /// @notice No member of the dispute's committee revealed a vote: committee number `round` (0-based) will be
    /// drawn from the next block's hash, with a new commit and reveal period from now.
    event DisputeReopened(uint256 indexed poolId, bytes32 indexed workId, uint8 round);
    /// @notice `validator` concurred with the verdict on `workId`, the `concurrences`-th to do so.
    event Concurred(bytes32 indexed workId, address indexed validator, uint24 concurrences);
    event VoteCommitted(bytes32 indexed workId, address indexed voter);
    event VoteRevealed(bytes32 indexed workId, address indexed voter, bool workValid);
    /// @notice The dispute was decided: `workValid` by the revealed majority (a tie keeps the verdict).
    event DisputeResolved(bytes32 indexed workId, bool workValid, bool overturned, uint16 votesValid, uint16 votesInvalid);
    /// @notice `party` lost `amount` of its locked stake (`why`: 1 wrong verdict, 2 lost dispute, 3 no vote,
    /// 4 silence, 5 voted against the majority).
    event ValidatorPenalized(uint256 indexed poolId, bytes32 indexed workId, address indexed party, uint8 why, uint256 amount);
    /// @notice The verdict became final and was recorded in the ComputePool (`accepted` → attest, else challenge).
    event VerdictFinal(uint256 indexed poolId, bytes32 indexed workId, bool accepted, address judge, uint256 fee);
    /// @notice The case closed with no verdict (`why`: 1 nobody judged in the verdict window, 2 no committee
    /// member revealed a vote): the ComputePool expires the work, the judge and the disputer are freed.
    event CaseVoided(uint256 indexed poolId, bytes32 indexed workId, uint8 why);
    /// @notice The assignment of a submission was recorded (`validator` zero: none).
    event AssignmentDrawn(bytes32 indexed workId, address validator);
    /// @notice The owner of a closed pool asked for its fee budget back (paid from `at` on) or took it.
    event FeesReclaimRequested(uint256 indexed poolId, uint64 at);
    event FeesReclaimed(uint256 indexed poolId, address indexed to, uint256 amount);
    /// @notice `to` was credited `amount` (fee, bounty or share of penalties), withdrawable with `withdraw`.
    event Credited(address indexed to, uint256 amount);
    event Withdrawn(address indexed to, uint256 amount);

    error ZeroAddress();
    error ZeroAmount();
    error UnknownPool(uint256 poolId);
    error NotPoolOwner(uint256 poolId, address caller);
    /// @notice The court is not the pool's only validator, or the pool's validator set is not frozen.
    error CourtNotSoleValidator(uint256 poolId);
    error AlreadyConfigured(uint256 poolId);
    error NotConfigured(uint256 poolId);
    /// @notice `configurePool` parameters break rule `rule`: 1 committeeSize odd, 3..MAX_COMMITTEE;
    /// 2 minPeriod ≤ assignedWindow ≤ verdictWindow − minPeriod; 3 dispute, commit and reveal periods and
    /// minPeriod ≤ activationDelay ≤ the pool's challengeWindow; 4 the case periods plus a margin of max(minPeriod, their sum / 4) fit in
    /// the pool's challengeWindow; 5 wrongVerdictSlash, disputeBond, nonVoterPenalty > 0;
    /// 6 silencePenalty ≤ wrongVerdictSlash ≤ validatorBond, disputeBond ≤ validatorBond, nonVoterPenalty
    /// ≤ validatorBond; 7 validatorBond < 2^96, verdictWindow ≤ MAX_PERIOD; 8 wrongVerdictSlash ≥ the
    /// bounty b·S + verdictFee a wrong challenge can earn; 9 the spot-check bound with the worker's
    /// worst-case loss: q·(S − b·S − verdictFee) ≥ (1 − q)·R·(1 + SPOT_CHECK_MARGIN); 10 a whole committee's
    /// vote pay, committeeSize × nonVoterPenalty / 2, ≤ disputeBond and ≤ wrongVerdictSlash.
    error BadCourtParams(uint8 rule);
    /// @notice The pool owner may not validate its own pool.
    error OwnerCannotValidate(uint256 poolId);
    error AlreadyRegistered(uint256 poolId, address validator);
    error NotRegistered(uint256 poolId, address validator);
    /// @notice The validator's free locked stake is `available`; `needed` is required.
    error InsufficientBond(uint256 available, uint256 needed);
    /// @notice The bond cannot be withdrawn before `exitAt`, or while `reserved` is still reserved.
    error BondStillLocked(uint64 exitAt, uint256 reserved);
    /// @notice This validator may not judge, dispute or vote on this submission (a party, or not eligible).
    error NotEligible(bytes32 workId, address caller);
    /// @notice Before the assigned window ends only `assigned` may give the first verdict.
    error NotAssigned(bytes32 workId, address assigned);
    /// @notice The assignment draws from the hash of the block after the submission; wait one block.
    error AssignmentNotDrawn(bytes32 workId);
    error WrongCaseState(bytes32 workId, CaseState state);
    /// @notice Too early or too late for this step of the case; `from`..`until` is when it is allowed.
    error OutsidePeriod(bytes32 workId, uint64 from, uint64 until);
    error NotCommitteeMember(bytes32 workId, address caller);
    error AlreadyCommitted(bytes32 workId, address voter);
    error RevealMismatch(bytes32 workId, address voter);
    error CommitteeNotDrawn(bytes32 workId);
    error SubmissionNotPending(bytes32 workId);
    error TransferAmountMismatch(uint256 expected, uint256 received);
    /// @notice Only the ComputePool calls the submission hook.
    error NotComputePool(address caller);
    /// @notice The assignment is already recorded, or its block hash is past the 256-block horizon.
    error AssignmentRecorded(bytes32 workId);
    error AlreadyConcurred(bytes32 workId, address validator);
    /// @notice The fee budget is reclaimable only from a closed pool, from `at` on.
    error FeesNotReclaimable(uint256 poolId, uint64 at);
}
