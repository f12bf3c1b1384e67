// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title IWorkBatches — events, errors and types of batched settlement (decision 0009 §3)
/// @notice Rules and numbers: docs/protocol.md R3.7–R3.13, bounds R1.23–R1.25.
interface IWorkBatches {
    /// @notice A pool's batch rules, set once by its owner (`configure`). Bounds: R1.23–R1.25 (`BadBatchParams`).
    /// @param epochLength seconds an epoch lasts (counters restart at 0 each epoch)
    /// @param maxLeaves most leaves a worker may have paid per epoch (its counters run 0..maxLeaves − 1)
    /// @param workerBond stake a worker locks here: one `slashAmount` for every leaf that may be open at once
    struct Params {
        uint32 epochLength;
        uint32 maxLeaves;
        uint128 workerBond;
    }

    /// @notice A posted batch, as a claim or a challenge names it: its id is the hash of these five fields.
    /// @param count how many signed runs the batch holds (each run holds its worker's consecutive leaves)
    /// @param root the Merkle root of the batch's `count` run nodes (R3.8)
    /// @param listDigest the IPFS digest of the batch's list (each run's fields, signature and leaves)
    struct BatchRef {
        uint256 poolId;
        uint32 epoch;
        uint16 count;
        bytes32 root;
        bytes32 listDigest;
    }

    /// @notice A leaf's own fields (one file); its pool, epoch and worker come from its run, its counter from its
    /// index in the run. Its hash in the run's tree is `keccak(abi.encode(rolloutDigest, step, samples))`.
    struct LeafBody {
        bytes32 rolloutDigest;
        uint64 step;
        uint32 samples;
    }

    /// @notice A run of consecutive leaves (counters `firstCounter`..`firstCounter + count − 1`) and its worker's
    /// EIP-712 signature of `Run(poolId, epoch, firstCounter, count, leavesRoot)` (compact, EIP-2098: `r`, `vs`);
    /// its pool and epoch come from the call. `leavesRoot` is the positional Merkle root of its leaves' hashes.
    struct SignedRun {
        uint32 firstCounter;
        uint32 count;
        bytes32 leavesRoot;
        bytes32 r;
        bytes32 vs;
    }

    /// @notice One leaf inside a signed run, with the proof of its hash to the run's `leavesRoot`.
    struct RunLeaf {
        SignedRun run;
        LeafBody leaf;
        bytes32[] proof;
    }

    /// @notice A worker's stake locked here; once `bonded`, its leaves of epochs `firstEpoch`..`lastEpoch` count
    /// (`lastEpoch` = 2^32 − 1 until it requests its exit).
    struct Bond {
        uint128 locked;
        uint32 firstEpoch;
        uint32 lastEpoch;
        bool bonded;
    }

    event BatchesConfigured(uint256 indexed poolId, Params params, uint64 genesis);
    event BudgetFunded(uint256 indexed poolId, address indexed from, uint256 amount, uint256 budget);
    event EpochOpened(uint256 indexed poolId, uint32 indexed epoch, bytes32 beacon);
    event BatchPosted(
        uint256 indexed poolId,
        bytes32 indexed batchId,
        uint32 indexed epoch,
        bytes32 root,
        uint16 count,
        bytes32 listDigest,
        address poster
    );
    /// @notice A validator voided the batch (its list is unavailable): none of its leaves is paid from it.
    event BatchVoided(uint256 indexed poolId, bytes32 indexed batchId, address indexed validator);
    event BondLocked(uint256 indexed poolId, address indexed worker, uint256 amount, uint32 firstEpoch);
    event ExitRequested(uint256 indexed poolId, address indexed worker, uint32 lastEpoch);
    event BondUnlocked(uint256 indexed poolId, address indexed worker, uint256 amount);
    /// @notice `worker` was paid `amount` for its leaves `first`..`first + n − 1` of `epoch`.
    event LeavesClaimed(
        uint256 indexed poolId, address indexed worker, uint32 indexed epoch, uint32 first, uint32 n, uint256 amount
    );
    /// @notice The leaf (worker, epoch, counter) is excluded from claims and the worker lost `slashed`:
    /// `duplicate` for two signed runs that give the counter different leaves (anyone), else a validator's challenge.
    event LeafVoided(
        uint256 indexed poolId,
        address indexed worker,
        uint32 indexed epoch,
        uint32 counter,
        address by,
        bool duplicate,
        uint16 reasonCode,
        bytes32 evidenceDigest,
        uint256 slashed
    );
    event PoolRetired(uint256 indexed poolId, uint64 at);
    event BudgetReclaimed(uint256 indexed poolId, uint256 amount);

    /// @notice `configure` was given parameters breaking rule `rule` (docs/protocol.md §1.4: rule 1 = R1.23, …).
    error BadBatchParams(uint8 rule);
    error AlreadyConfigured(uint256 poolId);
    error NotConfigured(uint256 poolId);
    error NotPoolOwner(uint256 poolId, address caller);
    /// @notice A pool judged by a court: its batches need the court route (decision 0009 §3), not built yet.
    error CourtPoolNotSupported(uint256 poolId);
    error ZeroAmount();
    /// @notice The token moved another amount than `amount` (fee-on-transfer tokens are refused).
    error TransferAmountMismatch(uint256 amount);
    error NotMember(uint256 poolId, address worker);
    /// @notice R3.8: a batch holds 1..MAX_BATCH runs and names a root and a list.
    error BadBatch();
    /// @notice R3.9: a batch of epoch `epoch` is posted in that epoch or the next, after its beacon, before retirement.
    error EpochNotPostable(uint32 epoch);
    error BatchExists(bytes32 batchId);
    error UnknownBatch(bytes32 batchId);
    error BatchIsVoid(bytes32 batchId);
    /// @notice R3.10: the batch's dispute window (the pool's challenge window after its posting) is still open.
    error WindowOpen(bytes32 batchId, uint64 closesAt);
    /// @notice The batch's dispute window has closed.
    error WindowClosed(bytes32 batchId);
    /// @notice The leaves and proof do not hash to the run's root, or the run's node to the batch's root, at the
    /// positions given.
    error BadProof();
    /// @notice The run's signature is not its worker's.
    error BadSignature(uint32 firstCounter);
    /// @notice R3.7: a run holds 1..MAX_LEAVES leaves; the counters named lie inside it.
    error BadRun(uint32 firstCounter, uint32 count);
    /// @notice R3.11: claims run the counters of an epoch in order: this one must start at `expected` (counters in
    /// between voided), an earlier epoch is closed once a later one is claimed.
    error NotNextCounter(uint32 epoch, uint32 first, uint32 expected);
    /// @notice R3.11: the counter is at or above the pool's `maxLeaves`, or voided.
    error NotPayable(uint32 counter);
    /// @notice R3.5 as for a single file: `0 < samples ≤ maxSamplesPerWork`.
    error BadSamples(uint32 counter, uint32 samples);
    /// @notice R3.12: the worker's bond does not cover the leaf's epoch.
    error NotBonded(address worker, uint32 epoch);
    error InsufficientBudget(uint256 needed, uint256 budget);
    error AlreadyVoided(uint32 counter);
    /// @notice Two signed runs that give the counter the same leaf.
    error NotDuplicate();
    error NotPoolValidator(uint256 poolId, address caller);
    /// @notice The worker and the pool owner may not challenge.
    error ChallengerNotIndependent(address challenger);
    error BondStillLocked(uint64 until);
    error ExitAlreadyRequested();
    error PoolRetiredAlready(uint256 poolId);
    error NotRetired(uint256 poolId, uint64 reclaimableAt);
}
