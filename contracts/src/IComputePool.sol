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
    /// @param minStake bonded stake a member needs to submit work
    /// @param rewardPerSample reward in stake-token base units per accepted sample
    /// @param slashAmount stake taken from a worker per successful challenge
    /// @param bountyBps share of a slash paid to the challenger, in basis points
    /// @param challengeWindow seconds after submission during which validators may judge
    /// @param rewardLock seconds after submission before an accepted reward can be claimed (≥ challengeWindow)
    /// @param maxStaleness async level: work on step s is refused once a checkpoint newer than s + maxStaleness exists
    /// @param taskRef reference of the task / dataset (e.g. digest of its spec)
    /// @param baseCheckpoint manifest digest of the step-0 policy
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
    }

    event PoolCreated(
        uint256 indexed poolId, address indexed owner, address indexed trainer, bytes32 taskRef, bytes32 baseCheckpoint
    );
    event ValidatorSet(uint256 indexed poolId, address indexed validator, bool allowed);
    event PoolFunded(uint256 indexed poolId, address indexed from, uint256 amount, uint256 budget);
    event PoolClosed(uint256 indexed poolId, uint256 refunded);
    event WorkerJoined(uint256 indexed poolId, address indexed worker, uint32 workerId);
    event WorkerLeft(uint256 indexed poolId, address indexed worker);
    event WorkerEjected(uint256 indexed poolId, address indexed worker);
    event CheckpointPublished(uint256 indexed poolId, uint64 indexed step, bytes32 manifestDigest);
    event WorkSubmitted(
        uint256 indexed poolId, bytes32 indexed workId, address indexed worker, uint64 step, uint32 nSamples
    );
    event WorkAccepted(uint256 indexed poolId, bytes32 indexed workId, address indexed validator);
    event WorkChallenged(
        uint256 indexed poolId,
        bytes32 indexed workId,
        address indexed validator,
        uint16 reasonCode,
        bytes32 evidenceDigest,
        uint256 slashed
    );
    event WorkExpired(uint256 indexed poolId, bytes32 indexed workId);
    event RewardsClaimed(address indexed worker, uint256 amount, uint256 works);

    error ZeroAddress();
    error ZeroAmount();
    error InvalidParams(string reason);
    error UnknownPool(uint256 poolId);
    error PoolNotActive(uint256 poolId);
    error NotPoolOwner(uint256 poolId, address caller);
    error NotPoolTrainer(uint256 poolId, address caller);
    error NotPoolValidator(uint256 poolId, address caller);
    error AlreadyMember(uint256 poolId, address worker);
    error NotMember(uint256 poolId, address worker);
    error InsufficientStake(uint256 bonded, uint256 required);
    error StepNotIncreasing(uint64 step, uint64 latestStep);
    error ZeroDigest();
    error UnknownStep(uint64 step);
    error StaleStep(uint64 step, uint64 latestStep, uint32 maxStaleness);
    error DuplicateWork(bytes32 workId);
    error UnknownWork(bytes32 workId);
    error AlreadyJudged(bytes32 workId, WorkStatus status);
    error ChallengeWindowClosed(bytes32 workId);
    error ChallengeWindowOpen(bytes32 workId);
    error InsufficientBudget(uint256 needed, uint256 budget);
    error NotWorkOwner(bytes32 workId, address caller);
    error NotClaimable(bytes32 workId, WorkStatus status);
    error RewardLocked(bytes32 workId, uint64 unlockAt);
}
