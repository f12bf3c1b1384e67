// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title IComputePool — events, errors and types of proofswarm compute pools
interface IComputePool {
    enum PoolStatus {
        None,
        Active,
        Closed
    }

    /// @dev Pending → Accepted (attest) → Paid (claim). Pending|Accepted → Rejected (challenge,
    /// within the challenge window). Pending → Expired (nobody judged it within the window).
    /// Pending and Accepted work is *open*: it may still be slashed (or, once claimed, closes).
    enum WorkStatus {
        None,
        Pending,
        Accepted,
        Rejected,
        Paid,
        Expired
    }

    /// @notice Parameters of a new pool.
    /// @param trainer the only address that may publish checkpoints
    /// @param validators addresses allowed to attest and challenge
    /// @param minStake stake a worker must have allocated to the pool to join and to submit work
    /// @param rewardPerSample reward in stake-token base units per accepted sample
    /// @param slashAmount stake taken from the worker's allocation per successful challenge (> 0);
    /// every open submission is backed by one full slashAmount of allocation
    /// @param bountyBps share of a slash paid to the challenger, in basis points (≤ MAX_BOUNTY_BPS)
    /// @param challengeWindow seconds after submission during which validators may judge (≤ MAX_CHALLENGE_WINDOW)
    /// @param rewardLock seconds after submission before an accepted reward can be claimed
    /// (> challengeWindow, ≤ MAX_REWARD_LOCK)
    /// @param maxStaleness async level: work on step s is refused once a checkpoint newer than s + maxStaleness exists
    /// @param taskRef reference of the task / dataset (e.g. digest of its spec)
    /// @param baseCheckpoint manifest digest of the step-0 policy
    /// @param maxSamplesPerWork most samples one submission may claim (the run spec's prompts per
    /// submission × group size), which bounds the budget one submission can reserve
    /// @param spotCheckBps q, the fraction of each file's completions validators run the expensive
    /// checks on (prefill, TOPLOC, sampling replay, termination, logprobs), in basis points:
    /// m = ceil(q·n) of n, drawn without replacement from keccak(blockhash(submission block + 1) ‖
    /// workId). 10000 checks every completion. `createPool` requires
    /// `spotCheckBps × slashAmount ≥ (10000 − spotCheckBps) × rewardPerSample × maxSamplesPerWork`
    /// (fabricating work has no positive expected gain; docs/protocol.md)
    struct PoolParams {
        address trainer;
        address[] validators;
        uint128 minStake;
        uint128 rewardPerSample;
        uint128 slashAmount;
        uint16 bountyBps;
        uint32 challengeWindow;
        uint32 rewardLock;
        uint32 maxStaleness;
        bytes32 taskRef;
        bytes32 baseCheckpoint;
        uint32 maxSamplesPerWork;
        uint16 spotCheckBps;
    }

    /// @notice A view of one pool: its state and parameters (`params.validators` is always empty —
    /// the validator set is a mapping: read `isValidator` or replay `ValidatorSet`).
    /// @param owner the pool's creator; funds, closes and administers it
    /// @param trainer the pool's trainer (= `params.trainer`, first so positional readers find it)
    /// @param status Active until the owner closes it
    /// @param latestStep the newest published checkpoint step
    /// @param budget funded stake-token units not reserved by any submission
    /// @param reserved units reserved by pending or accepted, unpaid submissions
    /// @param params the parameters the pool was created with
    /// @param validatorCount how many addresses may attest and challenge now
    /// @param validatorsFrozen whether the owner froze the validator set (`freezeValidators`)
    struct PoolView {
        address owner;
        address trainer;
        PoolStatus status;
        uint64 latestStep;
        uint256 budget;
        uint256 reserved;
        PoolParams params;
        uint32 validatorCount;
        bool validatorsFrozen;
    }

    /// @notice A view of one submission, with its worker address and reward (the rollout digest is
    /// in the `WorkSubmitted` event only).
    struct WorkView {
        address worker;
        uint256 poolId;
        uint64 step;
        uint32 nSamples;
        uint64 submittedAt;
        WorkStatus status;
        uint256 reward;
        uint64 nonce;
        uint64 submittedBlock;
    }

    /// @notice A view of one (pool, worker) record.
    /// @param member whether the worker is currently a member of the pool
    /// @param nextNonce the nonce its next submission in the pool must carry
    /// @param openWorks its Pending or Accepted, unpaid submissions in the pool
    /// @param allocation its stake allocated to the pool (slashable by this pool alone)
    /// @param required the allocation its open work requires: openWorks × slashAmount
    /// @param pinnedStep the step its next submission must name (the pool's latest step when the pin was set)
    /// @param pinnedBlock the block that set the pin (its first join, its previous submission or a skip); the
    /// hash of this block seeds the next submission's sampling (docs/protocol.md, "Sampling rule v3")
    struct MemberView {
        bool member;
        uint64 nextNonce;
        uint32 openWorks;
        uint256 allocation;
        uint256 required;
        uint64 pinnedStep;
        uint64 pinnedBlock;
    }

    /// @notice Pool `poolId` was created by `owner`, with `trainer` publishing its checkpoints.
    event PoolCreated(
        uint256 indexed poolId, address indexed owner, address indexed trainer, bytes32 taskRef, bytes32 baseCheckpoint
    );
    /// @notice `validator` was allowed (`allowed`) or disallowed to attest and challenge in the pool.
    event ValidatorSet(uint256 indexed poolId, address indexed validator, bool allowed);
    /// @notice The owner froze the pool's validator set: it can never change again. `judge` (if not
    /// zero) is told of every submission.
    event ValidatorsFrozen(uint256 indexed poolId, address judge);
    /// @notice `from` added `amount` to the pool's budget; `budget` is the new unreserved budget.
    event PoolFunded(uint256 indexed poolId, address indexed from, uint256 amount, uint256 budget);
    /// @notice The pool was closed (or swept again) and `refunded` went back to the owner.
    event PoolClosed(uint256 indexed poolId, uint256 refunded);
    /// @notice `worker` allocated `amount` more of its stake to the pool; `allocation` is the new total.
    event StakeAllocated(uint256 indexed poolId, address indexed worker, uint256 amount, uint256 allocation);
    /// @notice `worker` took `amount` of its allocation back to its free bonded stake.
    event StakeDeallocated(uint256 indexed poolId, address indexed worker, uint256 amount, uint256 allocation);
    /// @notice `worker` joined the pool; `workerId` is its global id in this contract.
    event WorkerJoined(uint256 indexed poolId, address indexed worker, uint32 workerId);
    /// @notice `worker` left the pool (its submitted work stays judgeable and claimable).
    event WorkerLeft(uint256 indexed poolId, address indexed worker);
    /// @notice The owner removed `worker` from the pool (its submitted work stays judgeable and claimable).
    event WorkerEjected(uint256 indexed poolId, address indexed worker);
    /// @notice The trainer published the policy of `step`; `manifestDigest` is its checkpoint manifest digest.
    event CheckpointPublished(uint256 indexed poolId, uint64 indexed step, bytes32 manifestDigest);
    /// @notice `worker` submitted its `nonce`-th work in the pool: the rollout file of digest
    /// `rolloutDigest`, `nSamples` samples made with the policy of `step`. `workId` is
    /// `keccak256(abi.encode(chainid, pool contract, poolId, worker, nonce))`. `seedBlock` is the block
    /// that pinned `step` for this nonce: its hash seeds the file's sampling.
    event WorkSubmitted(
        uint256 indexed poolId,
        bytes32 indexed workId,
        address indexed worker,
        bytes32 rolloutDigest,
        uint64 step,
        uint64 nonce,
        uint32 nSamples,
        uint64 seedBlock
    );
    /// @notice `worker` gave up its `nonce`-th submission, whose pinned step had gone stale; its next nonce is
    /// pinned to `step` (the latest) in this block.
    event NonceSkipped(uint256 indexed poolId, address indexed worker, uint64 nonce, uint64 step);
    /// @notice `validator` attested the submission as valid.
    event WorkAccepted(uint256 indexed poolId, bytes32 indexed workId, address indexed validator);
    /// @notice `validator` challenged the submission for `reasonCode` with the evidence document
    /// `evidenceDigest`; the worker lost `slashed` and the reward went back to the budget.
    event WorkChallenged(
        uint256 indexed poolId,
        bytes32 indexed workId,
        address indexed validator,
        uint16 reasonCode,
        bytes32 evidenceDigest,
        uint256 slashed
    );
    /// @notice Nobody judged the submission within the challenge window; its reward went back to the budget.
    event WorkExpired(uint256 indexed poolId, bytes32 indexed workId);
    /// @notice `worker` was paid `amount` for the accepted submissions `workIds`.
    event RewardsClaimed(address indexed worker, uint256 amount, bytes32[] workIds);

    /// @notice An address argument that must be set was zero.
    error ZeroAddress();
    /// @notice An amount (funding, sample count, claim total) that must be positive was zero.
    error ZeroAmount();
    /// @notice `createPool` was given an empty validator set.
    error NoValidators();
    /// @notice `createPool` was given a challenge window of 0 or above `max`.
    error ChallengeWindowOutOfRange(uint32 challengeWindow, uint32 max);
    /// @notice `createPool` was given a reward lock not strictly after the challenge window (a
    /// claim could land in the same second as a challenge).
    error RewardLockNotAfterWindow(uint32 rewardLock, uint32 challengeWindow);
    /// @notice `createPool` was given a reward lock above `max`.
    error RewardLockTooLong(uint32 rewardLock, uint32 max);
    /// @notice `createPool` was given a zero slash amount (bad work would cost nothing).
    error ZeroSlashAmount();
    /// @notice `createPool` was given a zero `maxSamplesPerWork`.
    error ZeroMaxSamples();
    /// @notice `createPool` was given a spot-check fraction of 0 or above `maxBps` (10000 = check all).
    error SpotCheckBpsOutOfRange(uint16 spotCheckBps, uint16 maxBps);
    /// @notice `createPool` was given a slash below `minSlash`, the least under which a worker that
    /// fabricates one completion per file has no positive expected gain at the pool's spot-check
    /// fraction: `minSlash = ceil((10000 − spotCheckBps) × rewardPerSample × maxSamplesPerWork / spotCheckBps)`.
    error SlashBelowSpotCheckBound(uint128 slashAmount, uint256 minSlash);
    /// @notice `createPool` was given a bounty share above `maxBps`.
    error BountyBpsTooHigh(uint16 bountyBps, uint16 maxBps);
    /// @notice Pool ids are stored in 32 bits; `poolId` would not fit.
    error TooManyPools(uint256 poolId);
    /// @notice No pool has id `poolId`.
    error UnknownPool(uint256 poolId);
    /// @notice The pool is closed: no funding, validator changes, checkpoints, joins or submissions.
    error PoolNotActive(uint256 poolId);
    /// @notice The pool's validator set is frozen (`freezeValidators`).
    error ValidatorsAreFrozen(uint256 poolId);
    /// @notice Steps are stored in 32 bits; `step` would not fit.
    error TooManySteps(uint64 step);
    /// @notice Only the pool owner may do this.
    error NotPoolOwner(uint256 poolId, address caller);
    /// @notice Only the pool trainer may publish checkpoints.
    error NotPoolTrainer(uint256 poolId, address caller);
    /// @notice Only a validator of the pool may attest or challenge.
    error NotPoolValidator(uint256 poolId, address caller);
    /// @notice `worker` is already a member of the pool.
    error AlreadyMember(uint256 poolId, address worker);
    /// @notice `worker` is not a member of the pool.
    error NotMember(uint256 poolId, address worker);
    /// @notice The worker's allocation to the pool is `allocation`; `required` is needed (to join or
    /// submit: max(minStake, slashAmount × open works after the submission); to deallocate:
    /// slashAmount × open works).
    error InsufficientAllocation(uint256 allocation, uint256 required);
    /// @notice Checkpoints are published contiguously: the next step must be `expected`.
    error StepNotContiguous(uint64 step, uint64 expected);
    /// @notice A submission's nonce must be the worker's next nonce in the pool, `expected`.
    error InvalidNonce(uint64 nonce, uint64 expected);
    /// @notice A submission claims more samples than the pool's `maxSamplesPerWork`.
    error TooManySamples(uint32 nSamples, uint32 maxSamplesPerWork);
    /// @notice The worker and the pool owner may not challenge (no self-challenge, no owner honeypot).
    error ChallengerNotIndependent(bytes32 workId, address challenger);
    /// @notice The token moved `received` where `expected` was transferred: tokens that take a fee
    /// on transfer (or otherwise move a different amount) are refused.
    error TransferAmountMismatch(uint256 expected, uint256 received);
    /// @notice A digest that must be set was zero.
    error ZeroDigest();
    /// @notice No checkpoint was published for `step` in the pool.
    error UnknownStep(uint64 step);
    /// @notice Work on `step` is older than the pool's async level allows.
    error StaleStep(uint64 step, uint64 latestStep, uint32 maxStaleness);
    /// @notice A submission must name the step pinned for its nonce, `pinnedStep` (`getMember`).
    error StepNotPinned(uint64 step, uint64 pinnedStep);
    /// @notice A nonce can be skipped only once its pinned step is stale (`pinnedStep` is still usable).
    error PinNotStale(uint64 pinnedStep, uint64 latestStep);
    /// @notice No submission has this work id.
    error UnknownWork(bytes32 workId);
    /// @notice The submission was judged already (`status`), or is not in a judgeable state.
    error AlreadyJudged(bytes32 workId, WorkStatus status);
    /// @notice The submission's challenge window has closed.
    error ChallengeWindowClosed(bytes32 workId);
    /// @notice The submission's challenge window is still open (it cannot expire yet).
    error ChallengeWindowOpen(bytes32 workId);
    /// @notice The pool's judge has not decided the work yet (it may still after the challenge window).
    error CaseOpen(bytes32 workId);
    /// @notice The reward `needed` exceeds the pool's unreserved `budget`.
    error InsufficientBudget(uint256 needed, uint256 budget);
    /// @notice Only the worker that submitted the work may claim it.
    error NotWorkOwner(bytes32 workId, address caller);
    /// @notice Only accepted submissions can be claimed; this one is `status`.
    error NotClaimable(bytes32 workId, WorkStatus status);
    /// @notice The reward is locked until `unlockAt`.
    error RewardLocked(bytes32 workId, uint64 unlockAt);
}

/// @title IWorkJudge — a validator contract the ComputePool tells of each submission of its pool
interface IWorkJudge {
    /// @notice `worker` submitted `workId` to `poolId` (called by the ComputePool inside `submitWork`).
    function onWorkSubmitted(uint256 poolId, bytes32 workId, address worker) external;
    /// @notice Whether the judge may still decide `workId`: the ComputePool does not expire it meanwhile,
    /// and takes the judge's verdict even after the challenge window.
    function isOpen(bytes32 workId) external view returns (bool);
}
