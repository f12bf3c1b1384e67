// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title IStakeManager — events, errors and entry points of the stake registry
/// @notice Workers bond stake here; pool contracts holding SLASHER_ROLE slash it.
interface IStakeManager {
    /// @notice `worker` bonded `amount` more stake; `bonded` is the new bonded total.
    event Bonded(address indexed worker, uint256 amount, uint256 bonded);
    /// @notice `worker` moved `amount` from bonded to unbonding, withdrawable at `readyAt`.
    event UnbondStarted(address indexed worker, uint256 amount, uint256 unbonding, uint64 readyAt);
    /// @notice `worker` withdrew `amount` of unbonded stake.
    event Withdrawn(address indexed worker, uint256 amount);
    /// @notice `worker` lost `amount` (`fromBonded` + the rest from unbonding); `bounty` went to `challenger`, the rest to the treasury.
    event Slashed(
        address indexed worker, address indexed challenger, uint256 amount, uint256 fromBonded, uint256 bounty
    );
    /// @notice The treasury that receives the non-bounty part of slashes changed.
    event TreasuryChanged(address indexed treasury);
    /// @notice The unbonding delay changed (applies to unbonds started afterwards).
    event UnbondingDelayChanged(uint64 delay);

    error ZeroAmount();
    error ZeroAddress();
    error InsufficientBonded(uint256 requested, uint256 bonded);
    error NothingUnbonding();
    error UnbondingNotReady(uint64 readyAt);
    error InvalidBountyBps(uint16 bountyBps);

    function bond(uint256 amount) external;
    function unbond(uint256 amount) external;
    function withdraw() external;
    function slash(address worker, uint256 amount, address challenger, uint16 bountyBps)
        external
        returns (uint256 slashed);
    function bondedOf(address worker) external view returns (uint256);
    function unbondingOf(address worker) external view returns (uint256 amount, uint64 readyAt);
}
