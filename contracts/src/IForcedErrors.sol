// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title IForcedErrors — events, errors and types of the committed hash chains and forced errors of a court pool
/// @notice Rules and numbers: docs/protocol.md R9.25–R9.29 (decision 0009 §1, §2).
interface IForcedErrors {
    /// @notice Whose chain: a validator's draws its audits, a worker's its forced errors.
    enum Role {
        Validator,
        Worker
    }

    /// @notice What the settlement of a file found (`settle`): nothing owed (or not settled yet), a forced error
    /// owed by the worker's revealed chain, or the worker withheld the link that decides it.
    enum Outcome {
        None,
        NotForced,
        Forced,
        Withheld
    }

    /// @notice A pool's forced-error rules, set once by the pool owner (`configure`). Amounts in stake-token base
    /// units, periods in seconds. Bounds: docs/protocol.md R1.17–R1.22 (`BadForcedErrorParams`).
    /// @param forcedBps ρ: the chance, in basis points, that a file owes a forced error (1..MAX_FORCED_BPS)
    /// @param auditBps each validator's chance of being drawn to audit a file (1..10000)
    /// @param epochLength seconds an epoch lasts (one link of every chain per epoch)
    /// @param revealWindow seconds, after the epoch's files have all passed their challenge window, to reveal a link
    /// @param jackpot J: paid from the verification budget to whoever caught a forced error
    /// @param validatorBond stake a validator locks here with its chain (≥ the court's wrongVerdictSlash)
    /// @param workerBond stake a worker locks here with its chain (≥ slashAmount + the largest file's reward)
    /// @param silencePenalty taken from a validator that did not reveal an epoch's link in time
    struct Params {
        uint16 forcedBps;
        uint16 auditBps;
        uint32 epochLength;
        uint32 revealWindow;
        uint96 jackpot;
        uint96 validatorBond;
        uint96 workerBond;
        uint96 silencePenalty;
    }

    /// @notice One committed hash chain: `last` is the head `keccak^N(s)` until the first reveal, then the last
    /// revealed link, which is epoch `lastEpoch`'s; it covers epochs `firstEpoch`..`endEpoch`.
    struct Chain {
        bytes32 last;
        uint32 firstEpoch;
        uint32 lastEpoch;
        uint32 endEpoch;
        uint96 locked;
    }

    /// @notice An epoch's beacon (`recordBeacon`): `value` is the hash of block `anchor`, the block of the epoch's first
    /// `recordBeacon`; zero until recorded (and for good if no anchor's hash was recorded: the epoch's fallback).
    struct Beacon {
        bytes32 value;
        uint64 anchor;
    }

    event ForcedErrorsConfigured(uint256 indexed poolId, Params params, uint64 genesis);
    event BudgetFunded(uint256 indexed poolId, address indexed from, uint256 amount, uint256 budget);
    event ChainCommitted(
        uint256 indexed poolId, Role role, address indexed account, bytes32 head, uint32 firstEpoch, uint32 endEpoch
    );
    /// @notice Epoch `epoch`'s beacon will be the hash of block `anchor` (a block of the epoch, after every chain
    /// covering it was committed).
    event BeaconAnchored(uint256 indexed poolId, uint32 indexed epoch, uint64 anchor);
    event BeaconRecorded(uint256 indexed poolId, uint32 indexed epoch, bytes32 beacon);
    event LinkRevealed(uint256 indexed poolId, Role role, address indexed account, uint32 indexed epoch, bytes32 link);
    /// @notice A file's forced-error settlement: `catcher` (zero: none) was paid `jackpot`, the worker `refund` (its
    /// slash and the file's reward, when a forced error was caught).
    event WorkSettled(
        uint256 indexed poolId, bytes32 indexed workId, Outcome outcome, address catcher, uint256 jackpot, uint256 refund
    );
    /// @notice `account` lost `amount` of its stake locked here (`why`: 1 judged a forced error valid, 2 a drawn
    /// auditor let it stand, 3 the worker's forced error was accepted (omitted, or nobody caught it), 4 the worker
    /// withheld its link, 5 a validator withheld its link).
    event Penalized(uint256 indexed poolId, bytes32 indexed workId, address indexed account, uint8 why, uint256 amount);
    event BondWithdrawn(uint256 indexed poolId, Role role, address indexed account, uint256 amount);
    event Credited(address indexed to, uint256 amount);
    event Withdrawn(address indexed to, uint256 amount);

    error ZeroAmount();
    /// @notice The court does not judge pool `poolId` (not configured there).
    error UnknownPool(uint256 poolId);
    error NotPoolOwner(uint256 poolId, address caller);
    error AlreadyConfigured(uint256 poolId);
    error NotConfigured(uint256 poolId);
    /// @notice `configure` parameters break rule `rule`: 1 1 ≤ forcedBps ≤ MAX_FORCED_BPS; 2 1 ≤ auditBps ≤ 10000;
    /// 3 the court's minPeriod ≤ epochLength, revealWindow ≤ MAX_PERIOD; 4 validatorBond ≥ the court's
    /// wrongVerdictSlash and workerBond ≥ slashAmount + the largest file's reward; 5 0 < 4 × silencePenalty ≤
    /// wrongVerdictSlash; 6 0 < jackpot and forcedBps × jackpot ≤ 10000 × the largest file's reward (ρ·J ≤ R).
    error BadForcedErrorParams(uint8 rule);
    /// @notice Only a registered validator of the pool's court (Validator) or a member of the pool (Worker).
    error NotParticipant(uint256 poolId, Role role, address account);
    /// @notice A chain's length must be 1..MAX_CHAIN_LENGTH, its head non-zero, and the previous chain settled (`settledBy`).
    error BadChain(uint256 poolId, address account);
    /// @notice A link for `epoch` is revealed in `from`..`until` only.
    error OutsideRevealWindow(uint32 epoch, uint64 from, uint64 until);
    /// @notice The link does not hash to the chain's last revealed link (or the epoch is outside the chain).
    error BadLink(uint32 epoch);
    /// @notice The link of `epoch` is not revealed: nothing about that epoch can be computed yet.
    error NotRevealed(address account, uint32 epoch);
    /// @notice The beacon of `epoch` is recorded already: it is never replaced.
    error BeaconAlreadyRecorded(uint32 epoch);
    /// @notice The beacon of `epoch` is not settled yet: the epoch has not begun, or it is still recordable (the
    /// epoch not over, or its anchor's hash still readable) — nothing drawn with it can be computed.
    error BeaconPending(uint32 epoch);
    /// @notice The beacon of `epoch` can no longer be anchored: the epoch is over and no anchor's hash is readable
    /// (the epoch's draws use the fallback beacon, zero).
    error BeaconMissed(uint32 epoch);
    /// @notice The court's case is not final (or voided): nothing to settle.
    error CaseNotFinal(bytes32 workId);
    error AlreadySettled(bytes32 workId);
    /// @notice The address given is not the court's validator at that index of the case.
    error WrongParty(bytes32 workId, address given);
    /// @notice This auditor is not chargeable for this file (not drawn, not of the case's set, a party, or the file
    /// is not an accepted undisputed forced error), or was charged already.
    error NotChargeable(bytes32 workId, address auditor);
    /// @notice The validator revealed that epoch's link, or its reveal window is still open, or it was charged.
    error NotSilent(address account, uint32 epoch);
    error BondStillLocked(uint64 until);
}
