// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title IStakeManager — events, errors and entry points of the stake registry
/// @notice Workers bond stake here. A slasher contract (SLASHER_ROLE, e.g. the ComputePool)
/// locks part of a worker's bonded stake for itself when the worker allocates it to one of its
/// pools, unlocks it when the worker deallocates, and can slash only what it locked itself:
/// free bonded and unbonding stake are never slashable, and one slasher never reaches stake
/// another slasher locked.
interface IStakeManager {
    /// @notice `worker` bonded `amount` more stake; `bonded` is its new free bonded total.
    event Bonded(address indexed worker, uint256 amount, uint256 bonded);
    /// @notice `worker` moved `amount` from bonded to unbonding, withdrawable at `readyAt`.
    event UnbondStarted(address indexed worker, uint256 amount, uint256 unbonding, uint64 readyAt);
    /// @notice `worker` withdrew `amount` of unbonded stake.
    event Withdrawn(address indexed worker, uint256 amount);
    /// @notice `slasher` locked `amount` of `worker`'s bonded stake; `locked` is its new total lock.
    event StakeLocked(address indexed slasher, address indexed worker, uint256 amount, uint256 locked);
    /// @notice `slasher` returned `amount` of `worker`'s locked stake to its bonded stake.
    event StakeUnlocked(address indexed slasher, address indexed worker, uint256 amount, uint256 locked);
    /// @notice `slasher` took `amount` of `worker`'s stake it had locked; `bounty` went to
    /// `challenger`, the rest to the treasury.
    event Slashed(
        address indexed slasher, address indexed worker, address indexed challenger, uint256 amount, uint256 bounty
    );
    /// @notice The treasury that receives the non-bounty part of slashes changed.
    event TreasuryChanged(address indexed treasury);
    /// @notice The unbonding delay changed (applies to unbonds started afterwards).
    event UnbondingDelayChanged(uint64 delay);

    /// @notice An amount that must be positive was zero.
    error ZeroAmount();
    /// @notice An address that must be set was zero.
    error ZeroAddress();
    /// @notice `requested` exceeds the worker's free bonded stake `bonded`.
    error InsufficientBonded(uint256 requested, uint256 bonded);
    /// @notice `requested` exceeds the stake `locked` by the calling slasher for the worker.
    error InsufficientLocked(uint256 requested, uint256 locked);
    /// @notice The caller has no unbonding stake.
    error NothingUnbonding();
    /// @notice Unbonding stake becomes withdrawable at `readyAt`.
    error UnbondingNotReady(uint64 readyAt);
    /// @notice A bounty share above 100 %.
    error InvalidBountyBps(uint16 bountyBps);
    /// @notice The unbonding delay must lie in [`min`, `max`] seconds.
    error UnbondingDelayOutOfRange(uint64 delay, uint64 min, uint64 max);
    /// @notice SLASHER_ROLE is only granted to contracts (the pool contracts), never to a key.
    error SlasherNotContract(address account);
    /// @notice The token moved `received` where `expected` was transferred: tokens that take a fee
    /// on transfer (or otherwise move a different amount) are refused.
    error TransferAmountMismatch(uint256 expected, uint256 received);

    function bond(uint256 amount) external;
    function unbond(uint256 amount) external;
    function withdraw() external;
    function lock(address worker, uint256 amount) external;
    function unlock(address worker, uint256 amount) external;
    function slash(address worker, uint256 amount, address challenger, uint16 bountyBps)
        external
        returns (uint256 slashed);
    function bondedOf(address worker) external view returns (uint256);
    function lockedOf(address slasher, address worker) external view returns (uint256);
    function unbondingOf(address worker) external view returns (uint256 amount, uint64 readyAt);
}
