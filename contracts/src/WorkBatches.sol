// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {IComputePool} from "./IComputePool.sol";
import {ComputePool} from "./ComputePool.sol";
import {IStakeManager} from "./IStakeManager.sol";
import {IWorkBatches} from "./IWorkBatches.sol";

/// @title WorkBatches — submissions signed off-chain and settled in batches (decision 0009 §3)
/// @notice Beside a ComputePool, reading its public state; a slasher of its own (a worker's bond is locked here).
/// A worker signs a run of its consecutive files at once, EIP-712 `Run(pool, epoch, firstCounter, count,
/// leavesRoot)` over the Merkle root of its leaves (rollout digest, step, samples); anyone posts a batch: the Merkle
/// root of up to MAX_BATCH signed runs (each run node commits to its signature), its list's IPFS digest and its count
/// — one transaction, one slot. A batch is accepted optimistically when the pool's challenge window after its posting
/// closes; within it a listed validator challenges one leaf with its proofs in its run and its run in the batch
/// (final, as in a permissioned pool: the leaf is voided, the run's signer slashed, the validator takes the bounty).
/// Two signed runs that give one (worker, epoch, counter) different leaves are a fraud proof anyone submits. The
/// worker then claims consecutive leaves of one of its runs by one range proof (one signature checked a claim),
/// paid `rewardPerSample × samples` each from a budget the pool funds here; counters are paid in order, once (one
/// cursor slot per worker and pool).
/// Court pools are refused: their route is decision 0009 §3's next step. Every external call (the token, the stake
/// manager) comes after the state it depends on is written, so a reentrant call finds it settled. Rules: docs/protocol.md R3.7–R3.13, R1.23–R1.25.
contract WorkBatches is IWorkBatches {
    using SafeERC20 for IERC20;

    /// @notice Most runs a batch may hold (R3.8): bounds a proof's depth (10) and a batch's posting.
    uint16 public constant MAX_BATCH = 1_024;
    /// @notice Most leaves a worker may be paid per epoch (R1.24), and a run may hold (R3.7).
    uint32 public constant MAX_LEAVES = 4_096;
    /// @notice Shortest and longest epoch (R1.23).
    uint32 public constant MIN_EPOCH = 1 minutes;
    uint32 public constant MAX_EPOCH = 7 days;
    /// @notice How long after retirement (and the last window) workers keep to claim before the owner reclaims.
    uint32 public constant CLAIM_GRACE = 30 days;
    bytes32 public constant RUN_TYPEHASH =
        keccak256("Run(uint256 poolId,uint32 epoch,uint32 firstCounter,uint32 count,bytes32 leavesRoot)");
    uint256 private constant VOID = 1 << 64;
    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");

    /// @dev A pool's rules, with the ComputePool parameters a claim reads copied at `configure` (they never change).
    /// The first slot holds all a claim reads, the second what a post reads (times as uint48 seconds, `maxLeaves` ≤
    /// MAX_LEAVES a uint16).
    struct Pool {
        uint48 genesis;
        uint32 challengeWindow;
        uint32 maxSamples;
        uint16 maxLeaves;
        uint128 rewardPerSample;
        address owner;
        uint16 bountyBps;
        uint32 epochLength;
        uint48 retiredAt;
        uint128 slashAmount;
        uint128 workerBond;
    }

    ComputePool public immutable pools;
    IStakeManager public immutable stakeManager;
    IERC20 public immutable token;
    uint256 private immutable _deployChainId;
    bytes32 private immutable _deployDomain;

    mapping(uint256 poolId => Pool) private _pools;
    /// @notice What pays claims; funded by anyone (the pool's owner), reclaimed by the owner after retirement.
    mapping(uint256 poolId => uint256) public budget;
    /// @notice Epoch e's beacon (R3.9): the hash of the block before its `openEpoch`; seeds its leaves' sampling.
    mapping(uint256 poolId => mapping(uint32 epoch => bytes32)) public beaconOf;
    /// @dev A batch's posting time, with bit 64 set once voided (0: not posted).
    mapping(bytes32 batchId => uint256) private _batches;
    mapping(uint256 poolId => mapping(address worker => Bond)) private _bonds;
    /// @dev The next counter a worker's claim must start at: (epoch + 1) << 32 | counter (0: nothing claimed).
    mapping(uint256 poolId => mapping(address worker => uint64)) private _cursor;
    /// @dev Voided counters, 256 a slot: (pool, worker, epoch) → counter / 256 → bits.
    mapping(bytes32 key => mapping(uint256 word => uint256)) private _void;

    constructor(ComputePool pools_) {
        pools = pools_;
        stakeManager = pools_.stakeManager();
        token = pools_.token();
        _deployChainId = block.chainid;
        _deployDomain = _buildDomain();
    }

    // ------------------------------------------------------------------ pool owner

    /// @notice Set a permissioned pool's batch rules (its owner, once); epoch 0 begins now.
    function configure(uint256 poolId, Params calldata p) external {
        if (_pools[poolId].genesis != 0) revert AlreadyConfigured(poolId);
        IComputePool.PoolView memory v = pools.getPool(poolId);
        if (v.owner == address(0)) revert NotConfigured(poolId);
        if (msg.sender != v.owner) revert NotPoolOwner(poolId, msg.sender);
        _notCourt(poolId);
        check(p, v.params);
        _pools[poolId] = Pool({
            owner: v.owner,
            challengeWindow: v.params.challengeWindow,
            maxSamples: v.params.maxSamplesPerWork,
            bountyBps: v.params.bountyBps,
            rewardPerSample: v.params.rewardPerSample,
            slashAmount: v.params.slashAmount,
            genesis: uint48(block.timestamp),
            retiredAt: 0,
            epochLength: p.epochLength,
            maxLeaves: uint16(p.maxLeaves), // ≤ MAX_LEAVES (`check`)
            workerBond: p.workerBond
        });
        emit BatchesConfigured(poolId, p, uint64(block.timestamp));
    }

    /// @notice Revert `BadBatchParams(rule)` unless `p` meets R1.23–R1.25 for a pool with parameters `pool`.
    function check(Params calldata p, IComputePool.PoolParams memory pool) public pure {
        if (p.epochLength < MIN_EPOCH || p.epochLength > MAX_EPOCH) revert BadBatchParams(1);
        if (p.maxLeaves == 0 || p.maxLeaves > MAX_LEAVES) revert BadBatchParams(2);
        // every leaf that may be open at once is backed by one slash: an epoch's leaves are posted until the next
        // epoch's end and challenged for a window after
        uint256 open = 2 + (uint256(pool.challengeWindow) + p.epochLength - 1) / p.epochLength;
        if (p.workerBond < uint256(pool.slashAmount) * p.maxLeaves * open) revert BadBatchParams(3);
    }

    /// @notice Add `amount` to the pool's claim budget (anyone; needs approval).
    function fund(uint256 poolId, uint256 amount) external {
        _configured(poolId);
        if (amount == 0) revert ZeroAmount();
        uint256 total = budget[poolId] + amount;
        budget[poolId] = total;
        emit BudgetFunded(poolId, msg.sender, amount, total);
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(msg.sender, address(this), amount);
        // a token that moves another amount (a fee on transfer) would leave the budget unbacked
        if (token.balanceOf(address(this)) - before != amount) revert TransferAmountMismatch(amount);
    }

    /// @notice Stop new batches (owner); the budget left is reclaimable `CLAIM_GRACE` after the last window.
    function retire(uint256 poolId) external {
        Pool storage pool = _configured(poolId);
        if (msg.sender != pool.owner) revert NotPoolOwner(poolId, msg.sender);
        if (pool.retiredAt != 0) revert PoolRetiredAlready(poolId);
        pool.retiredAt = uint48(block.timestamp);
        emit PoolRetired(poolId, uint64(block.timestamp));
    }

    /// @notice Take the budget left back (owner), once retired and past the claim grace.
    function reclaim(uint256 poolId) external {
        Pool storage pool = _configured(poolId);
        if (msg.sender != pool.owner) revert NotPoolOwner(poolId, msg.sender);
        uint64 at = pool.retiredAt == 0 ? 0 : uint64(pool.retiredAt) + pool.challengeWindow + CLAIM_GRACE;
        if (at == 0 || block.timestamp <= at) revert NotRetired(poolId, at);
        uint256 amount = budget[poolId];
        if (amount == 0) revert ZeroAmount();
        budget[poolId] = 0;
        emit BudgetReclaimed(poolId, amount);
        token.safeTransfer(msg.sender, amount);
    }

    // ------------------------------------------------------------------ workers' bonds

    /// @notice Lock what the caller's stake here lacks of the pool's `workerBond` (a member of the pool; a slashed
    /// bond is topped up so). A new bond covers leaves from the next epoch on; a bond after an exit only once the old
    /// one is unlocked.
    function lockBond(uint256 poolId) external {
        Pool storage pool = _configured(poolId);
        if (!pools.isMember(poolId, msg.sender)) revert NotMember(poolId, msg.sender);
        Bond storage bond = _bonds[poolId][msg.sender];
        if (!bond.bonded || bond.lastEpoch != type(uint32).max) {
            if (bond.locked != 0) revert BondStillLocked(_unlockAt(pool, bond.lastEpoch));
            bond.bonded = true;
            // from the next epoch: a leaf posted before the bond existed was never at risk in its window
            bond.firstEpoch = epochOf(poolId, block.timestamp) + 1;
            bond.lastEpoch = type(uint32).max;
        }
        if (bond.locked >= pool.workerBond) revert ZeroAmount();
        uint128 more = pool.workerBond - bond.locked;
        bond.locked = pool.workerBond;
        emit BondLocked(poolId, msg.sender, more, bond.firstEpoch);
        stakeManager.lock(msg.sender, more);
    }

    /// @notice Stop counting the caller's leaves after the current epoch; its bond unlocks once they are all past
    /// their windows (`unlockBond`).
    function requestExit(uint256 poolId) external {
        _configured(poolId);
        Bond storage bond = _bonds[poolId][msg.sender];
        if (!bond.bonded || bond.lastEpoch != type(uint32).max) revert ExitAlreadyRequested();
        uint32 last = epochOf(poolId, block.timestamp);
        bond.lastEpoch = last;
        emit ExitRequested(poolId, msg.sender, last);
    }

    /// @notice Return the caller's bond after its exit, once its last epoch's batches are all past their windows.
    function unlockBond(uint256 poolId) external {
        Pool storage pool = _configured(poolId);
        Bond storage bond = _bonds[poolId][msg.sender];
        if (bond.lastEpoch == type(uint32).max) revert BondStillLocked(type(uint64).max);
        uint64 at = _unlockAt(pool, bond.lastEpoch);
        if (block.timestamp <= at) revert BondStillLocked(at);
        uint128 amount = bond.locked;
        if (amount == 0) revert ZeroAmount();
        bond.locked = 0;
        emit BondUnlocked(poolId, msg.sender, amount);
        stakeManager.unlock(msg.sender, amount);
    }

    // ------------------------------------------------------------------ batches

    /// @notice Record the current epoch's beacon (anyone, once an epoch; R3.9): leaves of an epoch are posted
    /// only after it, so no worker knew its seeds before signing up.
    function openEpoch(uint256 poolId) external {
        _configured(poolId);
        uint32 epoch = epochOf(poolId, block.timestamp);
        if (beaconOf[poolId][epoch] != 0) return;
        bytes32 beacon = blockhash(block.number - 1);
        beaconOf[poolId][epoch] = beacon;
        emit EpochOpened(poolId, epoch, beacon);
    }

    /// @notice Post a batch (anyone, R3.8–R3.9): the root of `b.count` signed runs of epoch `b.epoch` and its list.
    function postBatch(BatchRef calldata b) external returns (bytes32 batchId) {
        Pool storage pool = _configured(b.poolId);
        if (b.count == 0 || b.count > MAX_BATCH || b.root == 0 || b.listDigest == 0) revert BadBatch();
        uint32 current = epochOf(b.poolId, block.timestamp);
        if (
            (b.epoch != current && b.epoch + 1 != current) || beaconOf[b.poolId][b.epoch] == 0 || pool.retiredAt != 0
        ) revert EpochNotPostable(b.epoch);
        batchId = batchIdOf(b);
        if (_batches[batchId] != 0) revert BatchExists(batchId);
        _batches[batchId] = block.timestamp;
        emit BatchPosted(b.poolId, batchId, b.epoch, b.root, b.count, b.listDigest, msg.sender);
    }

    /// @notice Void a batch whose list is unavailable (a listed validator, within the batch's window, R3.10):
    /// none of its leaves is paid from it; its runs may be posted again.
    function voidBatch(BatchRef calldata b) external {
        Pool storage pool = _configured(b.poolId);
        _checkValidator(b.poolId, pool, address(0));
        bytes32 batchId = _openBatch(b, pool);
        _batches[batchId] |= VOID;
        emit BatchVoided(b.poolId, batchId, msg.sender);
    }

    /// @notice Challenge one leaf of a batch within its window (a listed validator of a permissioned pool, R3.10):
    /// the run `x.run` signed by `worker` at `position` of the batch (`batchProof`), its leaf of counter `counter`
    /// (`x.proof` in the run). Final: the counter is voided (never paid) and the worker loses `slashAmount` of its
    /// bond, `bountyBps` of it to the caller.
    function challenge(
        BatchRef calldata b,
        uint256 position,
        bytes32[] calldata batchProof,
        address worker,
        uint32 counter,
        RunLeaf calldata x,
        uint16 reasonCode,
        bytes32 evidenceDigest
    ) external {
        Pool storage pool = _configured(b.poolId);
        _checkValidator(b.poolId, pool, worker);
        _openBatch(b, pool);
        _checkRunInBatch(b, position, batchProof, x.run, worker);
        _checkLeaf(x, counter);
        _voidLeaf(b.poolId, pool, worker, b.epoch, counter, false, reasonCode, evidenceDigest);
    }

    /// @notice Prove that `worker` signed two runs of one pool and epoch that give counter `counter` different
    /// leaves (anyone but the worker, R3.11; the runs need not be posted): the counter is voided and the worker loses
    /// `slashAmount`, the bounty share to the caller.
    function proveDuplicate(
        uint256 poolId,
        address worker,
        uint32 epoch,
        uint32 counter,
        RunLeaf calldata a,
        RunLeaf calldata b
    ) external {
        Pool storage pool = _configured(poolId);
        if (msg.sender == worker) revert ChallengerNotIndependent(msg.sender);
        if (leafHash(a.leaf) == leafHash(b.leaf)) revert NotDuplicate();
        _checkLeaf(a, counter);
        _checkLeaf(b, counter);
        _checkSignature(_runDigestOf(poolId, epoch, a.run), a.run, worker);
        _checkSignature(_runDigestOf(poolId, epoch, b.run), b.run, worker);
        _voidLeaf(poolId, pool, worker, epoch, counter, true, 0, bytes32(0));
    }

    /// @notice Claim the caller's leaves of counters `first`..`first + leaves.length − 1` of its run `run`, at
    /// `position` of batch `b` (`batchProof`), with one range proof in the run (`runProof`; R3.11–R3.12). The
    /// batch's window must be over; the counters run on from the caller's last claim in the epoch (counters in
    /// between voided), below `maxLeaves`, none voided. Pays `rewardPerSample × Σ samples` from the budget.
    function claim(
        BatchRef calldata b,
        uint256 position,
        bytes32[] calldata batchProof,
        SignedRun calldata run,
        uint32 first,
        LeafBody[] calldata leaves,
        bytes32[] calldata runProof
    ) external returns (uint256 amount) {
        Pool storage pool = _configured(b.poolId);
        _notCourt(b.poolId);
        if (leaves.length == 0) revert ZeroAmount();
        _acceptedBatch(b, pool);
        _checkRunInBatch(b, position, batchProof, run, msg.sender);
        amount = _claimedSamples(b, run, first, leaves, runProof, pool) * pool.rewardPerSample;
        uint32 n = uint32(leaves.length);
        _cursor[b.poolId][msg.sender] = (uint64(b.epoch) + 1) << 32 | uint64(first + n);
        _pay(b.poolId, amount);
        emit LeavesClaimed(b.poolId, msg.sender, b.epoch, first, n, amount);
        token.safeTransfer(msg.sender, amount);
    }

    // ------------------------------------------------------------------ views

    /// @notice The EIP-712 digest a worker signs for a run (this contract's domain: chain id and address).
    function runDigest(uint256 poolId, uint32 epoch, uint32 firstCounter, uint32 count, bytes32 leavesRoot)
        public
        view
        returns (bytes32)
    {
        bytes32 structHash = keccak256(abi.encode(RUN_TYPEHASH, poolId, epoch, firstCounter, count, leavesRoot));
        return keccak256(abi.encodePacked(hex"1901", domainSeparator(), structHash));
    }

    /// @notice A leaf's hash in its run's tree: 96 bytes hashed, never an inner node's 64.
    function leafHash(LeafBody calldata leaf) public pure returns (bytes32) {
        return keccak256(abi.encode(leaf));
    }

    /// @notice The EIP-712 domain separator: name "proofswarm WorkBatches", version "1", this chain, this contract
    /// (recomputed if the chain id changed since deployment, as after a fork).
    function domainSeparator() public view returns (bytes32) {
        return block.chainid == _deployChainId ? _deployDomain : _buildDomain();
    }

    /// @notice A batch's id: the hash of its five fields.
    function batchIdOf(BatchRef calldata b) public pure returns (bytes32) {
        return keccak256(abi.encode(b));
    }

    /// @notice When a batch was posted (0: never) and whether it was voided.
    function batchOf(bytes32 batchId) external view returns (uint64 postedAt, bool voided) {
        uint256 rec = _batches[batchId];
        return (uint64(rec), rec & VOID != 0);
    }

    function getParams(uint256 poolId) external view returns (Params memory) {
        Pool storage pool = _configured(poolId);
        return Params({epochLength: pool.epochLength, maxLeaves: pool.maxLeaves, workerBond: pool.workerBond});
    }

    function genesisOf(uint256 poolId) external view returns (uint64) {
        return uint64(_pools[poolId].genesis);
    }

    function getBond(uint256 poolId, address worker) external view returns (Bond memory) {
        return _bonds[poolId][worker];
    }

    /// @notice The epoch and counter the worker's next claim in the pool starts from (nothing claimed: 0, 0).
    function nextClaim(uint256 poolId, address worker) external view returns (uint32 epoch, uint32 counter) {
        uint64 c = _cursor[poolId][worker];
        return c == 0 ? (0, 0) : (uint32(c >> 32) - 1, uint32(c));
    }

    function isVoid(uint256 poolId, address worker, uint32 epoch, uint32 counter) external view returns (bool) {
        return _isVoid(_voidKey(poolId, worker, epoch), counter);
    }

    /// @notice The epoch of time `t` in the pool (epoch 0 begins at its `configure`).
    function epochOf(uint256 poolId, uint256 t) public view returns (uint32) {
        Pool storage pool = _configured(poolId);
        return t <= pool.genesis ? 0 : uint32((t - pool.genesis) / pool.epochLength);
    }

    // ------------------------------------------------------------------ internal

    /// @dev The caller is a member bonded for the batch's epoch and its claim of `n` leaves from `first` runs on
    /// from its cursor below `maxLeaves` (R3.11–R3.12); returns its void key for the epoch.
    function _checkClaimant(BatchRef calldata b, uint32 first, uint256 n, uint32 maxLeaves)
        private
        view
        returns (bytes32 key)
    {
        if (!pools.isMember(b.poolId, msg.sender)) revert NotMember(b.poolId, msg.sender);
        Bond storage bond = _bonds[b.poolId][msg.sender];
        if (!bond.bonded || b.epoch < bond.firstEpoch || b.epoch > bond.lastEpoch) revert NotBonded(msg.sender, b.epoch);
        key = _voidKey(b.poolId, msg.sender, b.epoch);
        if (uint256(first) + n > maxLeaves) revert NotPayable(maxLeaves);
        _advance(b.poolId, b.epoch, first, key);
    }

    /// @dev Take `amount` from the pool's budget (`InsufficientBudget` if it holds less).
    function _pay(uint256 poolId, uint256 amount) private {
        uint256 left = budget[poolId];
        if (amount > left) revert InsufficientBudget(amount, left);
        budget[poolId] = left - amount;
    }

    /// @dev The claimed leaves lie in the run, their counters are the caller's next (R3.11) and payable, and they
    /// hash to the run's root; returns their samples.
    function _claimedSamples(
        BatchRef calldata b,
        SignedRun calldata run,
        uint32 first,
        LeafBody[] calldata leaves,
        bytes32[] calldata runProof,
        Pool storage pool
    ) private view returns (uint256 samples) {
        if (first < run.firstCounter || uint256(first) + leaves.length > uint256(run.firstCounter) + run.count) {
            revert BadRun(run.firstCounter, run.count);
        }
        bytes32 key = _checkClaimant(b, first, leaves.length, pool.maxLeaves);
        bytes32[] memory hashes;
        (hashes, samples) = _leafHashes(first, key, leaves, pool.maxSamples);
        if (_root(hashes, first - run.firstCounter, run.count, runProof) != run.leavesRoot) revert BadProof();
    }

    /// @dev The claimed leaves' hashes and their samples: each counter not voided, `0 < samples ≤ maxSamples`.
    function _leafHashes(uint32 first, bytes32 key, LeafBody[] calldata leaves, uint32 maxSamples)
        private
        view
        returns (bytes32[] memory hashes, uint256 samples)
    {
        uint256 n = leaves.length;
        hashes = new bytes32[](n);
        uint256 wordAt = type(uint256).max;
        uint256 word;
        for (uint256 i; i < n; ++i) {
            uint32 counter = first + uint32(i);
            if (counter >> 8 != wordAt) {
                wordAt = counter >> 8;
                word = _void[key][wordAt];
            }
            if (word & (1 << (counter & 0xff)) != 0) revert NotPayable(counter);
            LeafBody calldata leaf = leaves[i];
            uint32 s = leaf.samples;
            if (s == 0 || s > maxSamples) revert BadSamples(counter, s);
            samples += s;
            hashes[i] = _leafHashOf(leaf);
        }
    }

    /// @dev `leafHash`, hashing the leaf's 96 calldata bytes in place once its fields are read (a dirty `step` or
    /// `samples` word reverts there), so the bytes hashed are `abi.encode(leaf)`.
    function _leafHashOf(LeafBody calldata leaf) private pure returns (bytes32 h) {
        leaf.step;
        assembly ("memory-safe") {
            let ptr := mload(0x40)
            calldatacopy(ptr, leaf, 0x60)
            h := keccak256(ptr, 0x60)
        }
    }

    /// @dev The batch exists, is not void and its window is over (R3.10).
    function _acceptedBatch(BatchRef calldata b, Pool storage pool) private view {
        bytes32 batchId = batchIdOf(b);
        uint256 rec = _batches[batchId];
        if (rec == 0) revert UnknownBatch(batchId);
        if (rec & VOID != 0) revert BatchIsVoid(batchId);
        uint64 closes = uint64(rec) + pool.challengeWindow;
        if (block.timestamp <= closes) revert WindowOpen(batchId, closes);
    }

    /// @dev The run is `worker`'s and its node — its digest and signature, 96 bytes hashed (never an inner node's
    /// 64) — is at `position` of the batch.
    function _checkRunInBatch(
        BatchRef calldata b,
        uint256 position,
        bytes32[] calldata proof,
        SignedRun calldata run,
        address worker
    ) private view {
        bytes32 digest = _runDigestOf(b.poolId, b.epoch, run);
        _checkSignature(digest, run, worker);
        bytes32[] memory nodes = new bytes32[](1);
        nodes[0] = keccak256(abi.encode(digest, run.r, run.vs));
        if (position >= b.count || _root(nodes, position, b.count, proof) != b.root) revert BadProof();
    }

    /// @dev The leaf of counter `counter` lies in its run and its proof hashes to the run's root.
    function _checkLeaf(RunLeaf calldata x, uint32 counter) private pure {
        if (counter < x.run.firstCounter || counter - x.run.firstCounter >= x.run.count) {
            revert BadRun(x.run.firstCounter, x.run.count);
        }
        bytes32[] memory nodes = new bytes32[](1);
        nodes[0] = leafHash(x.leaf);
        if (_root(nodes, counter - x.run.firstCounter, x.run.count, x.proof) != x.run.leavesRoot) revert BadProof();
    }

    /// @dev The run's digest, once its size is within 1..MAX_LEAVES (R3.7).
    function _runDigestOf(uint256 poolId, uint32 epoch, SignedRun calldata run) private view returns (bytes32) {
        if (run.count == 0 || run.count > MAX_LEAVES) revert BadRun(run.firstCounter, run.count);
        return runDigest(poolId, epoch, run.firstCounter, run.count, run.leavesRoot);
    }

    function _checkSignature(bytes32 digest, SignedRun calldata run, address worker) private pure {
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, run.r, run.vs);
        if (err != ECDSA.RecoverError.NoError || signer != worker || worker == address(0)) {
            revert BadSignature(run.firstCounter);
        }
    }

    /// @dev The root of a positional tree of `count` leaves (padded with zeros to a power of two) from the nodes at
    /// positions `lo`..`lo + nodes.length − 1` and, level by level, the left then right siblings the range lacks.
    function _root(bytes32[] memory nodes, uint256 lo, uint256 count, bytes32[] calldata proof)
        private
        pure
        returns (bytes32)
    {
        uint256 n = nodes.length;
        uint256 p;
        for (uint256 width = 1; width < count; width <<= 1) {
            (n, p) = _level(nodes, n, lo, proof, p);
            lo >>= 1;
        }
        // `_level` reads past the proof's end only on a proof too short: refused here
        if (n != 1 || p != proof.length) revert BadProof();
        return nodes[0];
    }

    /// @dev Hash one level in place: the range `lo`..`lo + n − 1` of nodes[0..n), with its left sibling (lo odd) and
    /// its right sibling (the range ends on a left child) taken from `proof` at `p`, becomes its parents; returns their
    /// count and the next proof index. Memory-safe: it writes nodes[0..m) with m ≤ n only, and hashes in scratch space.
    function _level(bytes32[] memory nodes, uint256 n, uint256 lo, bytes32[] calldata proof, uint256 p)
        private
        pure
        returns (uint256 m, uint256)
    {
        uint256 left = lo & 1;
        m = ((lo + n + 1) >> 1) - (lo >> 1);
        assembly ("memory-safe") {
            let base := add(nodes, 0x20)
            for { let k := 0 } lt(k, m) { k := add(k, 1) } {
                let a := sub(add(shl(1, k), 1), left) // the right child's index in nodes
                switch a
                case 0 {
                    mstore(0x00, calldataload(add(proof.offset, shl(5, p))))
                    p := add(p, 1)
                }
                default { mstore(0x00, mload(add(base, shl(5, sub(a, 1))))) }
                switch lt(a, n)
                case 1 { mstore(0x20, mload(add(base, shl(5, a)))) }
                default {
                    mstore(0x20, calldataload(add(proof.offset, shl(5, p))))
                    p := add(p, 1)
                }
                mstore(add(base, shl(5, k)), keccak256(0x00, 0x40))
            }
        }
        return (m, p);
    }

    /// @dev Check a claim starting at `first` runs on from the worker's cursor (R3.11): same epoch, the counters
    /// in between voided; a later epoch, counters from 0 voided; an earlier epoch, never.
    function _advance(uint256 poolId, uint32 epoch, uint32 first, bytes32 key) private view {
        uint64 c = _cursor[poolId][msg.sender];
        uint32 expected;
        if (c != 0) {
            uint32 at = uint32(c >> 32) - 1;
            if (epoch < at) revert NotNextCounter(epoch, first, type(uint32).max);
            if (epoch == at) expected = uint32(c);
        }
        if (first < expected) revert NotNextCounter(epoch, first, expected);
        for (uint32 k = expected; k < first; ++k) {
            if (!_isVoid(key, k)) revert NotNextCounter(epoch, first, k);
        }
    }

    function _voidLeaf(
        uint256 poolId,
        Pool storage pool,
        address worker,
        uint32 epoch,
        uint32 counter,
        bool duplicate,
        uint16 reasonCode,
        bytes32 evidenceDigest
    ) private {
        bytes32 key = _voidKey(poolId, worker, epoch);
        if (_isVoid(key, counter)) revert AlreadyVoided(counter);
        _void[key][counter >> 8] |= 1 << (counter & 0xff);
        Bond storage bond = _bonds[poolId][worker];
        uint256 taken = pool.slashAmount < bond.locked ? pool.slashAmount : bond.locked;
        bond.locked -= uint128(taken);
        emit LeafVoided(poolId, worker, epoch, counter, msg.sender, duplicate, reasonCode, evidenceDigest, taken);
        if (taken != 0) stakeManager.slash(worker, taken, msg.sender, pool.bountyBps);
    }

    /// @dev The batch's id, once it exists, is not void and its window is open.
    function _openBatch(BatchRef calldata b, Pool storage pool) private view returns (bytes32 batchId) {
        batchId = batchIdOf(b);
        uint256 rec = _batches[batchId];
        if (rec == 0) revert UnknownBatch(batchId);
        if (rec & VOID != 0) revert BatchIsVoid(batchId);
        if (block.timestamp > uint64(rec) + pool.challengeWindow) revert WindowClosed(batchId);
    }

    /// @dev A listed validator of a permissioned pool, neither `worker` nor the pool's owner.
    function _checkValidator(uint256 poolId, Pool storage pool, address worker) private view {
        _notCourt(poolId);
        if (!pools.isValidator(poolId, msg.sender)) revert NotPoolValidator(poolId, msg.sender);
        if (msg.sender == worker || msg.sender == pool.owner) revert ChallengerNotIndependent(msg.sender);
    }

    function _notCourt(uint256 poolId) private view {
        if (pools.judgeOf(poolId) != address(0)) revert CourtPoolNotSupported(poolId);
    }

    /// @dev When a bond whose last epoch is `last` unlocks: that epoch's batches are posted by the next epoch's end.
    function _unlockAt(Pool storage pool, uint32 last) private view returns (uint64) {
        return uint64(pool.genesis) + (uint64(last) + 2) * pool.epochLength + pool.challengeWindow;
    }

    function _voidKey(uint256 poolId, address worker, uint32 epoch) private pure returns (bytes32) {
        return keccak256(abi.encode(poolId, worker, epoch));
    }

    function _isVoid(bytes32 key, uint32 counter) private view returns (bool) {
        return _void[key][counter >> 8] & (1 << (counter & 0xff)) != 0;
    }

    function _buildDomain() private view returns (bytes32) {
        return keccak256(
            abi.encode(DOMAIN_TYPEHASH, keccak256("proofswarm WorkBatches"), keccak256("1"), block.chainid, address(this))
        );
    }

    function _configured(uint256 poolId) private view returns (Pool storage pool) {
        pool = _pools[poolId];
        if (pool.genesis == 0) revert NotConfigured(poolId);
    }
}
