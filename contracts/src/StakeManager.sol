// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IStakeManager} from "./IStakeManager.sol";

/// @title StakeManager — bonded stake of proofswarm workers
/// @notice Workers bond the stake token; unbonding takes `unbondingDelay` seconds before a
/// withdrawal, so a worker cannot escape a slash by leaving right after submitting bad work.
/// Contracts with SLASHER_ROLE (the ComputePool) slash bonded stake first, then unbonding stake.
/// The non-bounty part of a slash goes to a treasury (not burned): the stake token may be any
/// ERC-20 without a burn function, and a treasury keeps the funds governable (e.g. to refund
/// pool owners or pay validators) where sending to a dead address would only hide them.
contract StakeManager is IStakeManager, AccessControl, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    /// @notice Role of the pool contracts allowed to slash.
    bytes32 public constant SLASHER_ROLE = keccak256("SLASHER_ROLE");

    struct Unbonding {
        uint192 amount;
        uint64 readyAt;
    }

    IERC20 public immutable stakeToken;
    address public treasury;
    uint64 public unbondingDelay;

    mapping(address worker => uint256) private _bonded;
    mapping(address worker => Unbonding) private _unbonding;

    /// @param token_ the ERC-20 used as stake
    /// @param treasury_ receives the non-bounty part of every slash
    /// @param unbondingDelay_ seconds between `unbond` and `withdraw`
    /// @param admin holds DEFAULT_ADMIN_ROLE (grants SLASHER_ROLE, sets treasury and delay)
    constructor(IERC20 token_, address treasury_, uint64 unbondingDelay_, address admin) {
        if (address(token_) == address(0) || treasury_ == address(0) || admin == address(0)) revert ZeroAddress();
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
        stakeToken.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @notice Start unbonding `amount`; all unbonding stake of the caller becomes withdrawable
    /// `unbondingDelay` seconds from now (a new unbond restarts the clock for the whole amount).
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

    /// @notice Slash up to `amount` from `worker` (bonded first, then unbonding); pay
    /// `bountyBps`/10000 of what was taken to `challenger` and the rest to the treasury.
    /// @return slashed the amount actually taken (less than `amount` if the worker has less)
    function slash(address worker, uint256 amount, address challenger, uint16 bountyBps)
        external
        onlyRole(SLASHER_ROLE)
        nonReentrant
        returns (uint256 slashed)
    {
        if (bountyBps > 10_000) revert InvalidBountyBps(bountyBps);
        if (challenger == address(0)) revert ZeroAddress();
        uint256 bonded = _bonded[worker];
        uint256 fromBonded = amount < bonded ? amount : bonded;
        _bonded[worker] = bonded - fromBonded;
        uint256 rest = amount - fromBonded;
        uint256 fromUnbonding;
        if (rest > 0) {
            Unbonding storage u = _unbonding[worker];
            fromUnbonding = rest < u.amount ? rest : u.amount;
            u.amount -= uint192(fromUnbonding);
        }
        slashed = fromBonded + fromUnbonding;
        uint256 bounty = slashed * bountyBps / 10_000;
        emit Slashed(worker, challenger, slashed, fromBonded, bounty);
        if (bounty > 0) stakeToken.safeTransfer(challenger, bounty);
        if (slashed > bounty) stakeToken.safeTransfer(treasury, slashed - bounty);
    }

    /// @notice Change the treasury (admin only).
    function setTreasury(address treasury_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (treasury_ == address(0)) revert ZeroAddress();
        treasury = treasury_;
        emit TreasuryChanged(treasury_);
    }

    /// @notice Change the unbonding delay for future unbonds (admin only).
    function setUnbondingDelay(uint64 delay) external onlyRole(DEFAULT_ADMIN_ROLE) {
        unbondingDelay = delay;
        emit UnbondingDelayChanged(delay);
    }

    /// @notice Bonded stake of `worker`.
    function bondedOf(address worker) external view returns (uint256) {
        return _bonded[worker];
    }

    /// @notice Unbonding stake of `worker` and when it becomes withdrawable.
    function unbondingOf(address worker) external view returns (uint256 amount, uint64 readyAt) {
        Unbonding memory u = _unbonding[worker];
        return (u.amount, u.readyAt);
    }
}
