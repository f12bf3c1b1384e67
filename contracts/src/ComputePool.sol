// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IComputePool, IWorkJudge} from "./IComputePool.sol";
import {IStakeManager} from "./IStakeManager.sol";

/// @title ComputePool — pools, stake allocations, checkpoints, work submissions, verdicts and rewards
/// @notice A pool owner creates and funds a pool; workers allocate part of their bonded stake to
/// it, join, and submit the digest of each rollout file; the pool's validators attest or challenge
/// each submission within the challenge window; a challenge slashes the worker's allocation to
/// this pool and voids the reward. A submission reserves its reward from the pool budget, so
/// rewards paid plus owed never exceed what was funded; an accepted reward is claimable once the
/// reward lock, strictly after the window, has passed. See docs/protocol.md for the rules and why
/// honest play is each party's best response.
/// @dev Stake rule: every open (Pending or Accepted, unpaid) submission of a worker in a pool is
/// backed by one full `slashAmount` of its allocation there — `allocation ≥ slashAmount × openWorks`
/// holds at all times; submitting needs it after the increment, deallocating keeps it, and a
/// challenge removes one slashAmount and one open work together. The allocation is stake the
/// StakeManager locked for this contract; only this pool's challenges can take it.
/// Nonce rule: a worker's submissions in a pool carry nonces 0, 1, 2, … in order (the next one is
/// in its member record), and the work id is derived from (chain, contract, pool, worker, nonce):
/// no one else can take a worker's id, no two submissions share one, and off-chain the prompts
/// are derived from (pool seed, worker, nonce), so a worker cannot skip or regrind an assignment.
/// Pin rule: the step each nonce must name is fixed before its file can be made — the pool's latest step
/// at the worker's first join, then at each of its submissions — and the hash of that pinning block seeds
/// the file's sampling off-chain, so a worker holds one valid file per nonce: it cannot choose among steps
/// or time its previous submission to pick one. A pin that went stale is left only by giving up the nonce
/// (`skipNonce`).
/// Spot-check rule: validators run the expensive checks on a random fraction `spotCheckBps` of
/// each file's completions; `createPool` refuses a slash too small for that fraction (`_checkIncentives`).
contract ComputePool is IComputePool, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    /// @notice 100 % in basis points.
    uint16 public constant MAX_BPS = 10_000;
    /// @notice Cap on the challenger's share of a slash: a worker challenging itself through a
    /// validator it controls still loses at least half of the slash.
    uint16 public constant MAX_BOUNTY_BPS = 5_000;
    /// @notice Bounds on the windows (they bound how long a worker's allocation can stay locked).
    uint32 public constant MAX_CHALLENGE_WINDOW = 30 days;
    uint32 public constant MAX_REWARD_LOCK = 60 days;

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
        // slot 4
        uint128 slashAmount;
        uint32 maxSamplesPerWork;
        uint16 spotCheckBps;
        uint32 validatorCount;
        bool validatorsFrozen;
        // slot 5, 6
        bytes32 taskRef;
        bytes32 baseCheckpoint;
    }

    /// @dev One (pool, worker) record in one slot; it outlives membership (leave/rejoin keeps the
    /// nonce counter, the open-work count and the allocation).
    struct Member {
        bool member;
        uint40 nextNonce;
        uint32 openWorks;
        uint128 allocation;
    }

    /// @dev Packed into one storage slot. The rollout digest is in the WorkSubmitted event only.
    /// Steps fit 32 bits (`publishCheckpoint` refuses more), nonces 40 bits (the member counter's width).
    struct Work {
        uint32 workerId;
        uint32 poolId;
        uint32 step;
        uint32 nSamples;
        uint40 submittedAt;
        WorkStatus status;
        uint40 nonce;
        uint40 submittedBlock;
    }

    /// @dev The step a (pool, worker)'s next nonce must name and the block that fixed it (0: never pinned).
    struct Pin {
        uint32 step;
        uint40 blockNumber;
    }

    IERC20 public immutable token;
    IStakeManager public immutable stakeManager;

    uint256 public poolCount;
    mapping(uint256 poolId => Pool) private _pools;
    mapping(uint256 poolId => mapping(address => bool)) public isValidator;
    mapping(uint256 poolId => mapping(address worker => Member)) private _members;
    mapping(uint256 poolId => mapping(uint64 step => bytes32)) private _checkpoints;
    mapping(bytes32 workId => Work) private _works;
    mapping(uint256 poolId => mapping(address worker => Pin)) private _pins;
    /// @notice The validator contract told of each submission of the pool (zero: none).
    mapping(uint256 poolId => address) public judgeOf;
    /// @notice Global id of a worker (0 = never joined a pool).
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
    /// Refuses parameters under which honest play is not every party's best response (see
    /// `_checkIncentives` and docs/protocol.md).
    function createPool(PoolParams calldata p) external returns (uint256 poolId) {
        if (p.trainer == address(0)) revert ZeroAddress();
        if (p.validators.length == 0) revert NoValidators();
        if (p.baseCheckpoint == bytes32(0)) revert ZeroDigest();
        _checkIncentives(p);
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
        pool.maxSamplesPerWork = p.maxSamplesPerWork;
        pool.spotCheckBps = p.spotCheckBps;
        pool.taskRef = p.taskRef;
        pool.baseCheckpoint = p.baseCheckpoint;
        _checkpoints[poolId][0] = p.baseCheckpoint;
        emit PoolCreated(poolId, msg.sender, p.trainer, p.taskRef, p.baseCheckpoint);
        emit CheckpointPublished(poolId, 0, p.baseCheckpoint);
        for (uint256 i; i < p.validators.length; ++i) {
            _setValidator(poolId, pool, p.validators[i], true);
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
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(msg.sender, address(this), amount);
        uint256 received = token.balanceOf(address(this)) - before;
        if (received != amount) revert TransferAmountMismatch(amount, received);
    }

    /// @notice Allow or disallow a validator (owner only; refused once the set is frozen).
    function setValidator(uint256 poolId, address validator, bool allowed) external {
        Pool storage pool = _activePool(poolId);
        _onlyOwner(poolId, pool);
        if (pool.validatorsFrozen) revert ValidatorsAreFrozen(poolId);
        _setValidator(poolId, pool, validator, allowed);
    }

    /// @notice Freeze the validator set for good (owner only), optionally naming `judge`, one of the
    /// validators, as the contract told of every later submission (`IWorkJudge.onWorkSubmitted`). A pool
    /// judged by a ValidatorCourt freezes its set to the court, so its owner can neither add a validator
    /// of its own that bypasses the court nor remove the court to let honest work expire and sweep its reward.
    function freezeValidators(uint256 poolId, address judge) external {
        Pool storage pool = _activePool(poolId);
        _onlyOwner(poolId, pool);
        if (pool.validatorsFrozen) revert ValidatorsAreFrozen(poolId);
        if (judge != address(0)) {
            if (!isValidator[poolId][judge]) revert NotPoolValidator(poolId, judge);
            judgeOf[poolId] = judge;
        }
        pool.validatorsFrozen = true;
        emit ValidatorsFrozen(poolId, judge);
    }

    /// @notice Remove a worker from the pool (owner only). Its submitted work stays judgeable.
    function ejectWorker(uint256 poolId, address worker) external {
        Pool storage pool = _pool(poolId);
        _onlyOwner(poolId, pool);
        Member storage m = _members[poolId][worker];
        if (!m.member) revert NotMember(poolId, worker);
        m.member = false;
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

    /// @notice Publish the manifest digest of the policy at `step` (pool trainer only). Steps are
    /// contiguous (`step == latestStep + 1`), so a trainer can neither skip steps nor jump to the
    /// end of the step range, and every step up to the latest has a checkpoint.
    function publishCheckpoint(uint256 poolId, uint64 step, bytes32 manifestDigest) external {
        Pool storage pool = _activePool(poolId);
        if (msg.sender != pool.trainer) revert NotPoolTrainer(poolId, msg.sender);
        uint64 expected = pool.latestStep + 1;
        if (step != expected) revert StepNotContiguous(step, expected);
        if (step > type(uint32).max) revert TooManySteps(step);
        if (manifestDigest == bytes32(0)) revert ZeroDigest();
        pool.latestStep = step;
        _checkpoints[poolId][step] = manifestDigest;
        emit CheckpointPublished(poolId, step, manifestDigest);
    }

    // ------------------------------------------------------------------ workers

    /// @notice Allocate `amount` of the caller's free bonded stake to the pool: the StakeManager
    /// locks it for this contract and only this pool's challenges can slash it.
    function allocate(uint256 poolId, uint256 amount) external {
        _activePool(poolId);
        if (amount == 0) revert ZeroAmount();
        Member storage m = _members[poolId][msg.sender];
        uint256 allocation = uint256(m.allocation) + amount;
        m.allocation = SafeCast.toUint128(allocation);
        emit StakeAllocated(poolId, msg.sender, amount, allocation);
        stakeManager.lock(msg.sender, amount);
    }

    /// @notice Return `amount` of the caller's allocation to its free bonded stake; what its open
    /// work in the pool requires (slashAmount × open works) stays allocated.
    function deallocate(uint256 poolId, uint256 amount) external {
        Pool storage pool = _pool(poolId);
        if (amount == 0) revert ZeroAmount();
        Member storage m = _members[poolId][msg.sender];
        uint256 allocation = m.allocation;
        uint256 required = uint256(m.openWorks) * pool.slashAmount;
        if (amount > allocation || allocation - amount < required) {
            revert InsufficientAllocation(allocation, required + amount);
        }
        m.allocation = uint128(allocation - amount);
        emit StakeDeallocated(poolId, msg.sender, amount, allocation - amount);
        stakeManager.unlock(msg.sender, amount);
    }

    /// @notice Join a pool; the caller needs at least the pool's minimum stake allocated to it.
    function joinPool(uint256 poolId) external {
        Pool storage pool = _activePool(poolId);
        Member storage m = _members[poolId][msg.sender];
        if (m.member) revert AlreadyMember(poolId, msg.sender);
        if (m.allocation < pool.minStake) revert InsufficientAllocation(m.allocation, pool.minStake);
        uint32 id = workerIds[msg.sender];
        if (id == 0) {
            _workerAddresses.push(msg.sender);
            id = uint32(_workerAddresses.length);
            workerIds[msg.sender] = id;
        }
        m.member = true;
        if (_pins[poolId][msg.sender].blockNumber == 0) _pin(poolId, pool.latestStep);
        emit WorkerJoined(poolId, msg.sender, id);
    }

    /// @notice Give up the caller's next nonce, whose pinned step has gone stale (a worker that stopped for
    /// longer than the async level); the nonce after it is pinned to the latest step in this block. A nonce
    /// whose step is still usable cannot be skipped, so no assignment is dropped for being disliked.
    function skipNonce(uint256 poolId) external {
        Pool storage pool = _activePool(poolId);
        Member storage m = _members[poolId][msg.sender];
        if (!m.member) revert NotMember(poolId, msg.sender);
        uint64 pinned = _pins[poolId][msg.sender].step;
        uint64 latest = pool.latestStep;
        if (latest - pinned <= pool.maxStaleness) revert PinNotStale(pinned, latest);
        uint40 nonce = m.nextNonce;
        m.nextNonce = nonce + 1;
        _pin(poolId, latest);
        emit NonceSkipped(poolId, msg.sender, nonce, latest);
    }

    /// @notice Leave a pool. Submitted work stays judgeable, accepted rewards stay claimable and
    /// the allocation stays until deallocated.
    function leavePool(uint256 poolId) external {
        _pool(poolId);
        Member storage m = _members[poolId][msg.sender];
        if (!m.member) revert NotMember(poolId, msg.sender);
        m.member = false;
        emit WorkerLeft(poolId, msg.sender);
    }

    /// @notice Submit the digest of a rollout file of `nSamples` samples generated with the policy
    /// of `step`, as the caller's `nonce`-th submission in the pool. Reserves the reward from the
    /// pool budget until the work is judged.
    /// @param nonce must equal the caller's next nonce in the pool (`getMember(...).nextNonce`):
    /// nonces are used once each and in order, so none is reused and none can be skipped.
    /// @param rolloutDigest digest of the rollout file's CID; the file's header names (chain id,
    /// this contract, poolId, worker, step, nonce) and validators check it equals this record
    /// @return workId keccak256(abi.encode(block.chainid, address(this), poolId, worker, nonce))
    function submitWork(uint256 poolId, uint64 step, uint64 nonce, bytes32 rolloutDigest, uint32 nSamples)
        external
        returns (bytes32 workId)
    {
        Pool storage pool = _activePool(poolId);
        Member memory m = _members[poolId][msg.sender];
        if (!m.member) revert NotMember(poolId, msg.sender);
        if (nonce != m.nextNonce) revert InvalidNonce(nonce, m.nextNonce);
        if (rolloutDigest == bytes32(0)) revert ZeroDigest();
        if (nSamples == 0) revert ZeroAmount();
        if (nSamples > pool.maxSamplesPerWork) revert TooManySamples(nSamples, pool.maxSamplesPerWork);
        uint64 latest = _checkStep(pool, poolId, step);
        {
            uint256 required = uint256(m.openWorks + 1) * pool.slashAmount;
            if (required < pool.minStake) required = pool.minStake;
            if (m.allocation < required) revert InsufficientAllocation(m.allocation, required);
            uint256 reward = _rewardOf(nSamples, pool.rewardPerSample);
            uint256 budget = pool.budget;
            if (reward > budget) revert InsufficientBudget(reward, budget);
            // reward ≤ budget < 2^128, so the casts below cannot truncate
            pool.budget = uint128(budget - reward);
            pool.reserved += uint128(reward);
        }
        _members[poolId][msg.sender] =
            Member({member: true, nextNonce: m.nextNonce + 1, openWorks: m.openWorks + 1, allocation: m.allocation});
        workId = keccak256(abi.encode(block.chainid, address(this), poolId, msg.sender, nonce));
        _works[workId] = Work({
            workerId: workerIds[msg.sender],
            poolId: uint32(poolId),
            step: uint32(step), // step ≤ latestStep < 2^32
            nSamples: nSamples,
            submittedAt: uint40(block.timestamp),
            status: WorkStatus.Pending,
            nonce: m.nextNonce,
            submittedBlock: uint40(block.number)
        });
        _announce(poolId, workId, rolloutDigest, step, nSamples, latest);
        address judge = judgeOf[poolId];
        if (judge != address(0)) IWorkJudge(judge).onWorkSubmitted(poolId, workId, msg.sender);
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
            uint256 poolId = w.poolId;
            Pool storage pool = _pools[poolId];
            uint64 unlockAt = uint64(w.submittedAt) + pool.rewardLock;
            if (now_ < unlockAt) revert RewardLocked(workId, unlockAt);
            uint256 reward = _rewardOf(w.nSamples, pool.rewardPerSample);
            _setStatus(pool, _members[poolId][msg.sender], w, WorkStatus.Paid, reward);
            amount += reward;
        }
        if (amount == 0) revert ZeroAmount();
        emit RewardsClaimed(msg.sender, amount, workIds);
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
        _checkWindow(poolId, pool, w, workId);
        // Accepted keeps the work open: the hook touches neither a member record nor the budget
        _setStatus(pool, _members[poolId][address(0)], w, WorkStatus.Accepted, 0);
        emit WorkAccepted(poolId, workId, msg.sender);
    }

    /// @notice Challenge a pending or attested submission within the challenge window (pool
    /// validator only, never the worker itself nor the pool owner): the worker's allocation to the
    /// pool is slashed by the pool's slash amount (bounty to the caller) and the reward is returned
    /// to the pool budget.
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
        _checkWindow(poolId, pool, w, workId);
        address worker = _workerAddresses[w.workerId - 1];
        if (msg.sender == worker || msg.sender == pool.owner) revert ChallengerNotIndependent(workId, msg.sender);
        Member storage m = _members[poolId][worker];
        _setStatus(pool, m, w, WorkStatus.Rejected, _rewardOf(w.nSamples, pool.rewardPerSample));
        // allocation ≥ slashAmount × (openWorks + 1) held before this work closed: the slash is whole
        uint128 slashAmount = pool.slashAmount;
        m.allocation -= slashAmount;
        uint256 slashed = stakeManager.slash(worker, slashAmount, msg.sender, pool.bountyBps);
        emit WorkChallenged(poolId, workId, msg.sender, reasonCode, evidenceDigest, slashed);
    }

    /// @notice Return the reward reservation of a submission that nobody judged within the challenge window
    /// (in a judged pool: and whose judge no longer has the case open).
    function expireWork(bytes32 workId) external {
        Work storage w = _works[workId];
        if (w.status == WorkStatus.None) revert UnknownWork(workId);
        if (w.status != WorkStatus.Pending) revert AlreadyJudged(workId, w.status);
        uint256 poolId = w.poolId;
        Pool storage pool = _pools[poolId];
        if (block.timestamp <= uint256(w.submittedAt) + pool.challengeWindow) revert ChallengeWindowOpen(workId);
        address judge = judgeOf[poolId];
        if (judge != address(0) && IWorkJudge(judge).isOpen(workId)) revert CaseOpen(workId);
        address worker = _workerAddresses[w.workerId - 1];
        _setStatus(pool, _members[poolId][worker], w, WorkStatus.Expired, _rewardOf(w.nSamples, pool.rewardPerSample));
        emit WorkExpired(poolId, workId);
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
            baseCheckpoint: pool.baseCheckpoint,
            maxSamplesPerWork: pool.maxSamplesPerWork,
            spotCheckBps: pool.spotCheckBps
        });
        v.validatorCount = pool.validatorCount;
        v.validatorsFrozen = pool.validatorsFrozen;
    }

    /// @notice The manifest digest published for `step` (zero if none).
    function checkpointAt(uint256 poolId, uint64 step) external view returns (bytes32) {
        return _checkpoints[poolId][step];
    }

    /// @notice Whether `worker` is currently a member of the pool.
    function isMember(uint256 poolId, address worker) external view returns (bool) {
        return _members[poolId][worker].member;
    }

    /// @notice The (pool, worker) record: membership, next nonce, open work and allocation.
    function getMember(uint256 poolId, address worker) external view returns (MemberView memory v) {
        Member memory m = _members[poolId][worker];
        v = MemberView({
            member: m.member,
            nextNonce: m.nextNonce,
            openWorks: m.openWorks,
            allocation: m.allocation,
            required: uint256(m.openWorks) * _pools[poolId].slashAmount,
            pinnedStep: _pins[poolId][worker].step,
            pinnedBlock: _pins[poolId][worker].blockNumber
        });
    }

    /// @notice The id of `worker`'s `nonce`-th submission in the pool.
    function workIdOf(uint256 poolId, address worker, uint64 nonce) external view returns (bytes32) {
        return keccak256(abi.encode(block.chainid, address(this), poolId, worker, nonce));
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
            reward: _rewardOf(w.nSamples, _pools[w.poolId].rewardPerSample),
            nonce: w.nonce,
            submittedBlock: w.submittedBlock
        });
    }

    // ------------------------------------------------------------------ internal

    function _pool(uint256 poolId) private view returns (Pool storage pool) {
        pool = _pools[poolId];
        if (pool.status == PoolStatus.None) revert UnknownPool(poolId);
    }

    /// @dev Fix the caller's next nonce in the pool to `step`, seeded by this block (steps fit 32 bits).
    function _pin(uint256 poolId, uint64 step) private {
        _pins[poolId][msg.sender] = Pin({step: uint32(step), blockNumber: uint40(block.number)});
    }

    /// @dev The pool's latest step, once `step` is known, pinned for the caller's next nonce and not stale.
    function _checkStep(Pool storage pool, uint256 poolId, uint64 step) private view returns (uint64 latest) {
        latest = pool.latestStep;
        if (step > latest) revert UnknownStep(step); // steps are contiguous: every step ≤ latest exists
        uint64 pinnedStep = _pins[poolId][msg.sender].step;
        if (step != pinnedStep) revert StepNotPinned(step, pinnedStep);
        if (latest - step > pool.maxStaleness) revert StaleStep(step, latest, pool.maxStaleness);
    }

    /// @dev Emit the caller's submission with the block of its nonce's pin, then pin its next nonce to the
    /// latest step in this block.
    function _announce(uint256 poolId, bytes32 workId, bytes32 rolloutDigest, uint64 step, uint32 nSamples,
        uint64 latest) private {
        Pin memory pin = _pins[poolId][msg.sender];
        uint64 nonce = _works[workId].nonce;
        emit WorkSubmitted(poolId, workId, msg.sender, rolloutDigest, step, nonce, nSamples, pin.blockNumber);
        _pin(poolId, latest);
    }

    function _activePool(uint256 poolId) private view returns (Pool storage pool) {
        pool = _pool(poolId);
        if (pool.status != PoolStatus.Active) revert PoolNotActive(poolId);
    }

    /// @dev Allow or disallow `validator`, keeping the pool's count of allowed validators.
    function _setValidator(uint256 poolId, Pool storage pool, address validator, bool allowed) private {
        if (validator == address(0)) revert ZeroAddress();
        if (isValidator[poolId][validator] != allowed) {
            isValidator[poolId][validator] = allowed;
            if (allowed) pool.validatorCount += 1;
            else pool.validatorCount -= 1;
        }
        emit ValidatorSet(poolId, validator, allowed);
    }

    /// @dev Refuse any caller but the pool's owner.
    function _onlyOwner(uint256 poolId, Pool storage pool) private view {
        if (msg.sender != pool.owner) revert NotPoolOwner(poolId, msg.sender);
    }

    /// @dev Parameter bounds of a new pool, and the spot-check incentive bound.
    /// Spot checks: validators run the expensive checks on m = ceil(q·n) of a file's n completions
    /// (q = spotCheckBps / 10000), drawn without replacement after submission. A file with one
    /// fabricated completion is caught with the hypergeometric probability P(n) = m/n ≥ q, for
    /// every n. Undetected it earns at most R = rewardPerSample × maxSamplesPerWork; detected it
    /// loses S = slashAmount (and the reward). Fabrication has no positive expected gain, for
    /// every n ≤ maxSamplesPerWork, when q·S ≥ (1 − q)·R, since then
    /// P(n)·S ≥ q·S ≥ (1 − q)·R ≥ (1 − P(n))·R(n). In integers (× 10000):
    ///     spotCheckBps × S ≥ (10000 − spotCheckBps) × rewardPerSample × maxSamplesPerWork.
    /// Fabricating k > 1 completions is caught with probability 1 − C(n−k, m)/C(n, m) ≥ m/n, so
    /// one fabricated completion per file is the cheater's best case. Operands: 14 bits × 128 bits
    /// and 14 bits × 128 bits × 32 bits, far below 2^256.
    function _checkIncentives(PoolParams calldata p) private pure {
        if (p.challengeWindow == 0 || p.challengeWindow > MAX_CHALLENGE_WINDOW) {
            revert ChallengeWindowOutOfRange(p.challengeWindow, MAX_CHALLENGE_WINDOW);
        }
        if (p.rewardLock <= p.challengeWindow) revert RewardLockNotAfterWindow(p.rewardLock, p.challengeWindow);
        if (p.rewardLock > MAX_REWARD_LOCK) revert RewardLockTooLong(p.rewardLock, MAX_REWARD_LOCK);
        if (p.bountyBps > MAX_BOUNTY_BPS) revert BountyBpsTooHigh(p.bountyBps, MAX_BOUNTY_BPS);
        if (p.slashAmount == 0) revert ZeroSlashAmount();
        if (p.maxSamplesPerWork == 0) revert ZeroMaxSamples();
        uint256 q = p.spotCheckBps;
        if (q == 0 || q > MAX_BPS) revert SpotCheckBpsOutOfRange(p.spotCheckBps, MAX_BPS);
        uint256 gainIfMissed = (MAX_BPS - q) * uint256(p.rewardPerSample) * p.maxSamplesPerWork;
        if (q * p.slashAmount < gainIfMissed) {
            revert SlashBelowSpotCheckBound(p.slashAmount, (gainIfMissed + q - 1) / q);
        }
    }

    /// @dev Validators judge within the challenge window; the pool's judge (a court) also after it, so that
    /// every case it opened settles — its own rules bound when (`IWorkJudge.isOpen`) — but only work still
    /// Pending: an attested submission past the window is never challenged (its worker's payment is due).
    function _checkWindow(uint256 poolId, Pool storage pool, Work storage w, bytes32 workId) private view {
        if (block.timestamp <= uint256(w.submittedAt) + pool.challengeWindow) return;
        if (msg.sender != judgeOf[poolId] || w.status != WorkStatus.Pending) revert ChallengeWindowClosed(workId);
    }

    /// @dev The reward of a submission of `nSamples` samples (the formula every path shares).
    /// A uint32 times a uint128 is below 2^160, so the product cannot overflow.
    function _rewardOf(uint32 nSamples, uint128 rewardPerSample) private pure returns (uint256) {
        unchecked {
            return uint256(nSamples) * rewardPerSample;
        }
    }

    /// @dev The one place an existing submission changes status, with the bookkeeping of the
    /// transition (a submission is born Pending in `submitWork`, which reserves its reward and
    /// counts it open). Accepted keeps it open and changes nothing else (`m` and `reward` unused).
    /// Closing it — Paid spends the reservation, Rejected and Expired return it to the budget —
    /// drops the worker's open-work count `m.openWorks` in the pool by one. `reward` is the
    /// submission's reward (≤ reserved < 2^128, so the casts cannot truncate).
    function _setStatus(Pool storage pool, Member storage m, Work storage w, WorkStatus to, uint256 reward) private {
        w.status = to;
        if (to == WorkStatus.Accepted) return;
        m.openWorks -= 1;
        pool.reserved -= uint128(reward);
        if (to != WorkStatus.Paid) pool.budget += uint128(reward);
    }
}
