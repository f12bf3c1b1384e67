// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IStakeManager} from "./IStakeManager.sol";

/// @title StakeManager — bonded stake of proofswarm workers
/// @notice A worker's stake is free bonded (unbondable), locked by a slasher contract (for the
/// pools it allocated to), or unbonding (withdrawable after `unbondingDelay`). Only locked stake
/// is slashable, and only by the slasher that locked it; the slasher (the ComputePool) releases a
/// lock only once no open work in the pool still needs it. So a pool's safety never rests on the
/// unbonding delay or on the admin: a worker cannot unbond or withdraw what backs open work, and
/// lowering the delay frees nothing that is locked. The delay remains (bounded, never 0) for stake
/// that later roles will bond without a lock.
/// The non-bounty part of a slash goes to a treasury (not burned): the stake token may be any
/// ERC-20 without a burn function, and a treasury keeps the funds governable.
/// Tokens whose transfers move a different amount than asked (fee-on-transfer) are refused.
contract StakeManager is IStakeManager, AccessControl, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    /// @notice Role of the pool contracts allowed to lock and slash (granted to contracts only).
    bytes32 public constant SLASHER_ROLE = keccak256("SLASHER_ROLE");
    /// @notice Bounds of the unbonding delay.
    uint64 public constant MIN_UNBONDING_DELAY = 1 hours;
    uint64 public constant MAX_UNBONDING_DELAY = 90 days;

    struct Unbonding {
        uint192 amount;
        uint64 readyAt;
    }

    IERC20 public immutable stakeToken;
    address public treasury;
    uint64 public unbondingDelay;

    mapping(address worker => uint256) private _bonded;
    mapping(address slasher => mapping(address worker => uint256)) private _locked;
    mapping(address worker => Unbonding) private _unbonding;

    /// @param token_ the ERC-20 used as stake
    /// @param treasury_ receives the non-bounty part of every slash
    /// @param unbondingDelay_ seconds between `unbond` and `withdraw`, in [MIN_UNBONDING_DELAY, MAX_UNBONDING_DELAY]
    /// @param admin holds DEFAULT_ADMIN_ROLE (grants SLASHER_ROLE, sets treasury and delay)
    constructor(IERC20 token_, address treasury_, uint64 unbondingDelay_, address admin) {
        if (address(token_) == address(0) || treasury_ == address(0) || admin == address(0)) revert ZeroAddress();
        _checkDelay(unbondingDelay_);
        stakeToken = token_;
        treasury = treasury_;
        unbondingDelay = unbondingDelay_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
    }

    /// @notice Bond `amount` of the stake token (caller must have approved this contract).
    function bond(uint256 amount) external nonReentrant {
        if (amount == 0) revert ZeroAmount();
        uint256 newBonded = _bonded[msg.sender] + amount;
        _bonded[msg.sender] = newBonded;
        emit Bonded(msg.sender, amount, newBonded);
        uint256 before = stakeToken.balanceOf(address(this));
        stakeToken.safeTransferFrom(msg.sender, address(this), amount);
        uint256 received = stakeToken.balanceOf(address(this)) - before;
        if (received != amount) revert TransferAmountMismatch(amount, received);
    }

    /// @notice Start unbonding `amount` of free bonded stake; all unbonding stake of the caller
    /// becomes withdrawable `unbondingDelay` seconds from now (a new unbond restarts the clock).
    function unbond(uint256 amount) external {
        if (amount == 0) revert ZeroAmount();
        uint256 bonded = _bonded[msg.sender];
        if (amount > bonded) revert InsufficientBonded(amount, bonded);
        _bonded[msg.sender] = bonded - amount;
        Unbonding storage u = _unbonding[msg.sender];
        uint256 total = uint256(u.amount) + amount;
        uint64 readyAt = uint64(block.timestamp) + unbondingDelay;
        u.amount = uint192(total);
        u.readyAt = readyAt;
        emit UnbondStarted(msg.sender, amount, total, readyAt);
    }

    /// @notice Withdraw all unbonding stake whose delay has passed.
    function withdraw() external nonReentrant {
        Unbonding memory u = _unbonding[msg.sender];
        if (u.amount == 0) revert NothingUnbonding();
        if (block.timestamp < u.readyAt) revert UnbondingNotReady(u.readyAt);
        delete _unbonding[msg.sender];
        emit Withdrawn(msg.sender, u.amount);
        stakeToken.safeTransfer(msg.sender, u.amount);
    }

    /// @notice Lock `amount` of `worker`'s free bonded stake for the calling slasher (which does
    /// so only on the worker's own request, when it allocates stake to a pool).
    function lock(address worker, uint256 amount) external onlyRole(SLASHER_ROLE) {
        if (amount == 0) revert ZeroAmount();
        uint256 bonded = _bonded[worker];
        if (amount > bonded) revert InsufficientBonded(amount, bonded);
        _bonded[worker] = bonded - amount;
        uint256 locked = _locked[msg.sender][worker] + amount;
        _locked[msg.sender][worker] = locked;
        emit StakeLocked(msg.sender, worker, amount, locked);
    }

    /// @notice Return `amount` of the stake the calling slasher locked for `worker` to its free bonded stake.
    function unlock(address worker, uint256 amount) external onlyRole(SLASHER_ROLE) {
        if (amount == 0) revert ZeroAmount();
        uint256 locked = _locked[msg.sender][worker];
        if (amount > locked) revert InsufficientLocked(amount, locked);
        _locked[msg.sender][worker] = locked - amount;
        _bonded[worker] += amount;
        emit StakeUnlocked(msg.sender, worker, amount, locked - amount);
    }

    /// @notice Slash up to `amount` of the stake the calling slasher locked for `worker`; pay
    /// `bountyBps`/10000 of what was taken to `challenger` and the rest to the treasury.
    /// @return slashed the amount actually taken (less than `amount` if less is locked)
    function slash(address worker, uint256 amount, address challenger, uint16 bountyBps)
        external
        onlyRole(SLASHER_ROLE)
        nonReentrant
        returns (uint256 slashed)
    {
        if (bountyBps > 10_000) revert InvalidBountyBps(bountyBps);
        if (challenger == address(0)) revert ZeroAddress();
        uint256 locked = _locked[msg.sender][worker];
        slashed = amount < locked ? amount : locked;
        _locked[msg.sender][worker] = locked - slashed;
        uint256 bounty = slashed * bountyBps / 10_000;
        emit Slashed(msg.sender, worker, challenger, slashed, bounty);
        if (bounty > 0) stakeToken.safeTransfer(challenger, bounty);
        if (slashed > bounty) stakeToken.safeTransfer(treasury, slashed - bounty);
    }

    /// @notice Change the treasury (admin only).
    function setTreasury(address treasury_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (treasury_ == address(0)) revert ZeroAddress();
        treasury = treasury_;
        emit TreasuryChanged(treasury_);
    }

    /// @notice Change the unbonding delay for future unbonds (admin only; within the bounds).
    /// Locked stake backs open work independently of the delay, so no pool relies on it.
    function setUnbondingDelay(uint64 delay) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _checkDelay(delay);
        unbondingDelay = delay;
        emit UnbondingDelayChanged(delay);
    }

    /// @notice Free bonded stake of `worker` (neither locked nor unbonding).
    function bondedOf(address worker) external view returns (uint256) {
        return _bonded[worker];
    }

    /// @notice Stake of `worker` locked by `slasher` (slashable by it alone).
    function lockedOf(address slasher, address worker) external view returns (uint256) {
        return _locked[slasher][worker];
    }

    /// @notice Unbonding stake of `worker` and when it becomes withdrawable.
    function unbondingOf(address worker) external view returns (uint256 amount, uint64 readyAt) {
        Unbonding memory u = _unbonding[worker];
        return (u.amount, u.readyAt);
    }

    /// @dev SLASHER_ROLE only goes to contracts: a slasher key could lock and take any worker's stake.
    function _grantRole(bytes32 role, address account) internal override returns (bool) {
        if (role == SLASHER_ROLE && account.code.length == 0) revert SlasherNotContract(account);
        return super._grantRole(role, account);
    }

    function _checkDelay(uint64 delay) private pure {
        if (delay < MIN_UNBONDING_DELAY || delay > MAX_UNBONDING_DELAY) {
            revert UnbondingDelayOutOfRange(delay, MIN_UNBONDING_DELAY, MAX_UNBONDING_DELAY);
        }
    }
}
