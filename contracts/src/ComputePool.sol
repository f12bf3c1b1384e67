// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IComputePool} from "./IComputePool.sol";
import {IStakeManager} from "./IStakeManager.sol";

/// @title ComputePool — pools, checkpoints, work submissions, verdicts and rewards
/// @notice A pool owner creates and funds a pool; staked workers join and submit the digest of
/// each rollout file; the pool's validators attest or challenge each submission within the
/// challenge window; a challenge slashes the worker through the StakeManager and voids the
/// reward. A submission reserves its reward from the pool budget, so rewards paid plus owed
/// never exceed what was funded; an accepted reward is claimable once the reward lock passed.
/// @dev A work id is the 32-byte digest of the rollout file's CID, so duplicates are refused
/// by the same storage slot that records the work (one fresh slot per submission).
contract ComputePool is IComputePool, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    struct Pool {
        // slot 0
        address owner;
        uint64 latestStep;
        PoolStatus status;
        uint16 bountyBps;
        // slot 1
        address trainer;
        uint32 challengeWindow;
        uint32 rewardLock;
        uint32 maxStaleness;
        // slot 2
        uint128 minStake;
        uint128 rewardPerSample;
        // slot 3: budget = funded and not reserved; reserved = reserved by pending or accepted, unpaid work
        uint128 budget;
        uint128 reserved;
        // slot 4..6
        uint128 slashAmount;
        bytes32 taskRef;
        bytes32 baseCheckpoint;
    }

    /// @dev Packed into one storage slot.
    struct Work {
        uint32 workerId;
        uint32 poolId;
        uint64 step;
        uint32 nSamples;
        uint40 submittedAt;
        WorkStatus status;
    }

    /// @notice 100 % in basis points.
    uint16 public constant MAX_BPS = 10_000;

    IERC20 public immutable token;
    IStakeManager public immutable stakeManager;

    uint256 public poolCount;
    mapping(uint256 poolId => Pool) private _pools;
    mapping(uint256 poolId => mapping(address => bool)) public isValidator;
    /// @dev Global id of a member worker (0 = not a member).
    mapping(uint256 poolId => mapping(address worker => uint32)) private _memberIds;
    mapping(uint256 poolId => mapping(uint64 step => bytes32)) private _checkpoints;
    mapping(bytes32 workId => Work) private _works;
    mapping(address worker => uint32) public workerIds;
    address[] private _workerAddresses;

    /// @param token_ the ERC-20 in which pools are funded and rewards paid (the stake token)
    /// @param stakeManager_ the StakeManager that grants this contract SLASHER_ROLE
    constructor(IERC20 token_, IStakeManager stakeManager_) {
        if (address(token_) == address(0) || address(stakeManager_) == address(0)) revert ZeroAddress();
        token = token_;
        stakeManager = stakeManager_;
    }

    // ------------------------------------------------------------------ pool owner

    /// @notice Create a pool owned by the caller; returns its id (ids start at 1).
    function createPool(PoolParams calldata p) external returns (uint256 poolId) {
        if (p.trainer == address(0)) revert ZeroAddress();
        if (p.validators.length == 0) revert NoValidators();
        if (p.rewardLock < p.challengeWindow) revert RewardLockBeforeWindowEnd(p.rewardLock, p.challengeWindow);
        if (p.bountyBps > MAX_BPS) revert BountyBpsTooHigh(p.bountyBps, MAX_BPS);
        if (p.challengeWindow == 0) revert ZeroChallengeWindow();
        if (p.baseCheckpoint == bytes32(0)) revert ZeroDigest();
        poolId = ++poolCount;
        if (poolId > type(uint32).max) revert TooManyPools(poolId);
        Pool storage pool = _pools[poolId];
        pool.owner = msg.sender;
        pool.status = PoolStatus.Active;
        pool.bountyBps = p.bountyBps;
        pool.trainer = p.trainer;
        pool.challengeWindow = p.challengeWindow;
        pool.rewardLock = p.rewardLock;
        pool.maxStaleness = p.maxStaleness;
        pool.minStake = p.minStake;
        pool.rewardPerSample = p.rewardPerSample;
        pool.slashAmount = p.slashAmount;
        pool.taskRef = p.taskRef;
        pool.baseCheckpoint = p.baseCheckpoint;
        _checkpoints[poolId][0] = p.baseCheckpoint;
        emit PoolCreated(poolId, msg.sender, p.trainer, p.taskRef, p.baseCheckpoint);
        emit CheckpointPublished(poolId, 0, p.baseCheckpoint);
        for (uint256 i; i < p.validators.length; ++i) {
            address v = p.validators[i];
            if (v == address(0)) revert ZeroAddress();
            isValidator[poolId][v] = true;
            emit ValidatorSet(poolId, v, true);
        }
    }

    /// @notice Add `amount` of the token to the pool's reward budget (owner only; needs approval).
    function fundPool(uint256 poolId, uint256 amount) external nonReentrant {
        Pool storage pool = _activePool(poolId);
        _onlyOwner(poolId, pool);
        if (amount == 0) revert ZeroAmount();
        uint256 budget = uint256(pool.budget) + amount;
        pool.budget = SafeCast.toUint128(budget);
        emit PoolFunded(poolId, msg.sender, amount, budget);
        token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @notice Allow or disallow a validator (owner only).
    function setValidator(uint256 poolId, address validator, bool allowed) external {
        Pool storage pool = _activePool(poolId);
        _onlyOwner(poolId, pool);
        if (validator == address(0)) revert ZeroAddress();
        isValidator[poolId][validator] = allowed;
        emit ValidatorSet(poolId, validator, allowed);
    }

    /// @notice Remove a worker from the pool (owner only). Its submitted work stays judgeable.
    function ejectWorker(uint256 poolId, address worker) external {
        Pool storage pool = _pool(poolId);
        _onlyOwner(poolId, pool);
        if (_memberIds[poolId][worker] == 0) revert NotMember(poolId, worker);
        delete _memberIds[poolId][worker];
        emit WorkerEjected(poolId, worker);
    }

    /// @notice Close the pool (no more submissions) and refund the unreserved budget to the owner.
    /// Callable again on a closed pool to sweep budget released later by challenges and expiries;
    /// rewards already reserved stay claimable by the workers.
    function closePool(uint256 poolId) external nonReentrant {
        Pool storage pool = _pool(poolId);
        _onlyOwner(poolId, pool);
        uint256 refund = pool.budget;
        pool.status = PoolStatus.Closed;
        pool.budget = 0;
        emit PoolClosed(poolId, refund);
        if (refund > 0) token.safeTransfer(msg.sender, refund);
    }

    // ------------------------------------------------------------------ trainer

    /// @notice Publish the manifest digest of the policy at `step` (pool trainer only; steps strictly increase).
    function publishCheckpoint(uint256 poolId, uint64 step, bytes32 manifestDigest) external {
        Pool storage pool = _activePool(poolId);
        if (msg.sender != pool.trainer) revert NotPoolTrainer(poolId, msg.sender);
        if (step <= pool.latestStep) revert StepNotIncreasing(step, pool.latestStep);
        if (manifestDigest == bytes32(0)) revert ZeroDigest();
        pool.latestStep = step;
        _checkpoints[poolId][step] = manifestDigest;
        emit CheckpointPublished(poolId, step, manifestDigest);
    }

    // ------------------------------------------------------------------ workers

    /// @notice Join a pool; the caller needs at least the pool's minimum bonded stake.
    function joinPool(uint256 poolId) external {
        Pool storage pool = _activePool(poolId);
        if (_memberIds[poolId][msg.sender] != 0) revert AlreadyMember(poolId, msg.sender);
        uint256 bonded = stakeManager.bondedOf(msg.sender);
        if (bonded < pool.minStake) revert InsufficientStake(bonded, pool.minStake);
        uint32 id = workerIds[msg.sender];
        if (id == 0) {
            _workerAddresses.push(msg.sender);
            id = uint32(_workerAddresses.length);
            workerIds[msg.sender] = id;
        }
        _memberIds[poolId][msg.sender] = id;
        emit WorkerJoined(poolId, msg.sender, id);
    }

    /// @notice Leave a pool. Submitted work stays judgeable and accepted rewards stay claimable.
    function leavePool(uint256 poolId) external {
        _pool(poolId);
        if (_memberIds[poolId][msg.sender] == 0) revert NotMember(poolId, msg.sender);
        delete _memberIds[poolId][msg.sender];
        emit WorkerLeft(poolId, msg.sender);
    }

    /// @notice Submit the digest of a rollout file of `nSamples` samples generated with the policy of `step`.
    /// Reserves the reward from the pool budget until the work is judged.
    function submitWork(uint256 poolId, uint64 step, bytes32 rolloutDigest, uint32 nSamples) external {
        Pool storage pool = _activePool(poolId);
        uint32 workerId = _memberIds[poolId][msg.sender];
        if (workerId == 0) revert NotMember(poolId, msg.sender);
        if (rolloutDigest == bytes32(0)) revert ZeroDigest();
        if (nSamples == 0) revert ZeroAmount();
        uint64 latest = pool.latestStep;
        if (step > latest || _checkpoints[poolId][step] == bytes32(0)) revert UnknownStep(step);
        if (latest - step > pool.maxStaleness) revert StaleStep(step, latest, pool.maxStaleness);
        Work storage w = _works[rolloutDigest];
        if (w.status != WorkStatus.None) revert DuplicateWork(rolloutDigest);
        uint256 bonded = stakeManager.bondedOf(msg.sender);
        if (bonded < pool.minStake) revert InsufficientStake(bonded, pool.minStake);
        uint256 reward = _rewardOf(nSamples, pool.rewardPerSample);
        uint256 budget = pool.budget;
        if (reward > budget) revert InsufficientBudget(reward, budget);
        // reward ≤ budget < 2^128, so the casts below cannot truncate
        pool.budget = uint128(budget - reward);
        pool.reserved += uint128(reward);
        _works[rolloutDigest] = Work({
            workerId: workerId,
            poolId: uint32(poolId),
            step: step,
            nSamples: nSamples,
            submittedAt: uint40(block.timestamp),
            status: WorkStatus.Pending
        });
        emit WorkSubmitted(poolId, rolloutDigest, msg.sender, step, nSamples);
    }

    /// @notice Claim the rewards of accepted work whose reward lock has passed (caller must be the worker).
    /// @return amount total paid
    function claim(bytes32[] calldata workIds) external nonReentrant returns (uint256 amount) {
        uint32 callerId = workerIds[msg.sender];
        uint64 now_ = uint64(block.timestamp);
        for (uint256 i; i < workIds.length; ++i) {
            bytes32 workId = workIds[i];
            Work storage w = _works[workId];
            if (w.status == WorkStatus.None) revert UnknownWork(workId);
            if (w.workerId != callerId) revert NotWorkOwner(workId, msg.sender);
            if (w.status != WorkStatus.Accepted) revert NotClaimable(workId, w.status);
            Pool storage pool = _pools[w.poolId];
            uint64 unlockAt = uint64(w.submittedAt) + pool.rewardLock;
            if (now_ < unlockAt) revert RewardLocked(workId, unlockAt);
            uint256 reward = _rewardOf(w.nSamples, pool.rewardPerSample);
            _setStatus(pool, w, WorkStatus.Paid, reward);
            amount += reward;
        }
        if (amount == 0) revert ZeroAmount();
        emit RewardsClaimed(msg.sender, amount, workIds.length);
        token.safeTransfer(msg.sender, amount);
    }

    // ------------------------------------------------------------------ validators

    /// @notice Attest a pending submission as valid (pool validator only, within the challenge window).
    function attest(bytes32 workId) external {
        Work storage w = _works[workId];
        WorkStatus status = w.status;
        if (status == WorkStatus.None) revert UnknownWork(workId);
        uint256 poolId = w.poolId;
        if (!isValidator[poolId][msg.sender]) revert NotPoolValidator(poolId, msg.sender);
        if (status != WorkStatus.Pending) revert AlreadyJudged(workId, status);
        Pool storage pool = _pools[poolId];
        if (block.timestamp > uint256(w.submittedAt) + pool.challengeWindow) revert ChallengeWindowClosed(workId);
        _setStatus(pool, w, WorkStatus.Accepted, 0);
        emit WorkAccepted(poolId, workId, msg.sender);
    }

    /// @notice Challenge a pending or attested submission within the challenge window (pool validator
    /// only): the worker is slashed by the pool's slash amount (bounty to the caller) and the reward
    /// is returned to the pool budget.
    /// @param reasonCode why the work is invalid (codes are defined off-chain by the validator software)
    /// @param evidenceDigest digest of the evidence document (on IPFS)
    function challenge(bytes32 workId, uint16 reasonCode, bytes32 evidenceDigest) external nonReentrant {
        Work storage w = _works[workId];
        WorkStatus status = w.status;
        if (status == WorkStatus.None) revert UnknownWork(workId);
        uint256 poolId = w.poolId;
        if (!isValidator[poolId][msg.sender]) revert NotPoolValidator(poolId, msg.sender);
        if (status != WorkStatus.Pending && status != WorkStatus.Accepted) revert AlreadyJudged(workId, status);
        Pool storage pool = _pools[poolId];
        if (block.timestamp > uint256(w.submittedAt) + pool.challengeWindow) revert ChallengeWindowClosed(workId);
        _setStatus(pool, w, WorkStatus.Rejected, _rewardOf(w.nSamples, pool.rewardPerSample));
        address worker = _workerAddresses[w.workerId - 1];
        uint256 slashed = stakeManager.slash(worker, pool.slashAmount, msg.sender, pool.bountyBps);
        emit WorkChallenged(poolId, workId, msg.sender, reasonCode, evidenceDigest, slashed);
    }

    /// @notice Return the reward reservation of a submission that nobody judged within the challenge window.
    function expireWork(bytes32 workId) external {
        Work storage w = _works[workId];
        if (w.status == WorkStatus.None) revert UnknownWork(workId);
        if (w.status != WorkStatus.Pending) revert AlreadyJudged(workId, w.status);
        Pool storage pool = _pools[w.poolId];
        if (block.timestamp <= uint256(w.submittedAt) + pool.challengeWindow) revert ChallengeWindowOpen(workId);
        _setStatus(pool, w, WorkStatus.Expired, _rewardOf(w.nSamples, pool.rewardPerSample));
        emit WorkExpired(w.poolId, workId);
    }

    // ------------------------------------------------------------------ views

    /// @notice The parameters and state of a pool.
    function getPool(uint256 poolId) external view returns (PoolView memory v) {
        Pool storage pool = _pool(poolId);
        v.owner = pool.owner;
        v.trainer = pool.trainer;
        v.status = pool.status;
        v.latestStep = pool.latestStep;
        v.budget = pool.budget;
        v.reserved = pool.reserved;
        v.params = PoolParams({
            trainer: pool.trainer,
            validators: new address[](0),
            minStake: pool.minStake,
            rewardPerSample: pool.rewardPerSample,
            slashAmount: pool.slashAmount,
            bountyBps: pool.bountyBps,
            challengeWindow: pool.challengeWindow,
            rewardLock: pool.rewardLock,
            maxStaleness: pool.maxStaleness,
            taskRef: pool.taskRef,
            baseCheckpoint: pool.baseCheckpoint
        });
    }

    /// @notice The manifest digest published for `step` (zero if none).
    function checkpointAt(uint256 poolId, uint64 step) external view returns (bytes32) {
        return _checkpoints[poolId][step];
    }

    /// @notice Whether `worker` is currently a member of the pool.
    function isMember(uint256 poolId, address worker) external view returns (bool) {
        return _memberIds[poolId][worker] != 0;
    }

    /// @notice One submission, with its worker address and reward.
    function getWork(bytes32 workId) external view returns (WorkView memory v) {
        Work memory w = _works[workId];
        if (w.status == WorkStatus.None) revert UnknownWork(workId);
        v = WorkView({
            worker: _workerAddresses[w.workerId - 1],
            poolId: w.poolId,
            step: w.step,
            nSamples: w.nSamples,
            submittedAt: w.submittedAt,
            status: w.status,
            reward: _rewardOf(w.nSamples, _pools[w.poolId].rewardPerSample)
        });
    }

    // ------------------------------------------------------------------ internal

    function _pool(uint256 poolId) private view returns (Pool storage pool) {
        pool = _pools[poolId];
        if (pool.status == PoolStatus.None) revert UnknownPool(poolId);
    }

    function _activePool(uint256 poolId) private view returns (Pool storage pool) {
        pool = _pool(poolId);
        if (pool.status != PoolStatus.Active) revert PoolNotActive(poolId);
    }

    /// @dev Refuse any caller but the pool's owner.
    function _onlyOwner(uint256 poolId, Pool storage pool) private view {
        if (msg.sender != pool.owner) revert NotPoolOwner(poolId, msg.sender);
    }

    /// @dev The reward of a submission of `nSamples` samples (the formula every path shares).
    /// A uint32 times a uint128 is below 2^160, so the product cannot overflow.
    function _rewardOf(uint32 nSamples, uint128 rewardPerSample) private pure returns (uint256) {
        unchecked {
            return uint256(nSamples) * rewardPerSample;
        }
    }

    /// @dev The one place an existing submission changes status, with the budget bookkeeping of
    /// the transition (a submission is born Pending in `submitWork`, which reserves its reward):
    /// Accepted keeps the reservation; Paid spends it; Rejected and Expired return it to the budget.
    /// `reward` is the submission's reward (≤ reserved ≤ 2^128, so the casts cannot truncate).
    function _setStatus(Pool storage pool, Work storage w, WorkStatus to, uint256 reward) private {
        w.status = to;
        if (to == WorkStatus.Accepted) return;
        pool.reserved -= uint128(reward);
        if (to != WorkStatus.Paid) pool.budget += uint128(reward);
    }
}
