// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {IStakeManager} from "../src/IStakeManager.sol";
import {StakeManager} from "../src/StakeManager.sol";
import {BaseTest} from "./Base.t.sol";
import {FeeToken} from "./FeeToken.sol";

contract Dummy {}

contract StakeManagerTest is BaseTest {
    function test_bond_movesTokensAndEmits() public {
        vm.expectEmit(address(stake));
        emit IStakeManager.Bonded(alice, 10 ether, 10 ether);
        vm.prank(alice);
        stake.bond(10 ether);
        assertEq(stake.bondedOf(alice), 10 ether);
        assertEq(token.balanceOf(address(stake)), 10 ether);
    }

    function test_bond_refusesZero() public {
        vm.prank(alice);
        vm.expectRevert(IStakeManager.ZeroAmount.selector);
        stake.bond(0);
    }

    function test_bond_refusesWithoutAllowance() public {
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(IERC20Errors.ERC20InsufficientAllowance.selector, address(stake), 0, 1 ether)
        );
        stake.bond(1 ether);
    }

    function test_unbond_startsDelay() public {
        vm.startPrank(alice);
        stake.bond(10 ether);
        stake.unbond(4 ether);
        vm.stopPrank();
        (uint256 amount, uint64 readyAt) = stake.unbondingOf(alice);
        assertEq(amount, 4 ether);
        assertEq(readyAt, block.timestamp + UNBONDING_DELAY);
        assertEq(stake.bondedOf(alice), 6 ether);
    }

    function test_unbond_refusesMoreThanBonded() public {
        vm.startPrank(alice);
        stake.bond(1 ether);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.InsufficientBonded.selector, 2 ether, 1 ether));
        stake.unbond(2 ether);
        vm.stopPrank();
    }

    function test_unbond_refusesZero() public {
        vm.prank(alice);
        vm.expectRevert(IStakeManager.ZeroAmount.selector);
        stake.unbond(0);
    }

    function test_withdraw_afterDelay() public {
        vm.startPrank(alice);
        stake.bond(10 ether);
        stake.unbond(10 ether);
        vm.warp(block.timestamp + UNBONDING_DELAY);
        uint256 before = token.balanceOf(alice);
        stake.withdraw();
        vm.stopPrank();
        assertEq(token.balanceOf(alice) - before, 10 ether);
        (uint256 amount,) = stake.unbondingOf(alice);
        assertEq(amount, 0);
    }

    function test_withdraw_refusesBeforeDelay() public {
        vm.startPrank(alice);
        stake.bond(10 ether);
        stake.unbond(10 ether);
        uint64 readyAt = uint64(block.timestamp) + UNBONDING_DELAY;
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.UnbondingNotReady.selector, readyAt));
        stake.withdraw();
        vm.stopPrank();
    }

    function test_withdraw_refusesNothing() public {
        vm.prank(alice);
        vm.expectRevert(IStakeManager.NothingUnbonding.selector);
        stake.withdraw();
    }

    function test_slash_takesOnlyWhatTheSlasherLocked() public {
        vm.startPrank(alice);
        stake.bond(100 ether);
        stake.unbond(50 ether); // 50 bonded, 50 unbonding
        vm.stopPrank();
        vm.prank(address(pools));
        stake.lock(alice, 30 ether); // 20 free bonded, 30 locked
        vm.expectEmit(address(stake));
        emit IStakeManager.Slashed(address(pools), alice, validator, 30 ether, 3 ether);
        vm.prank(address(pools));
        uint256 slashed = stake.slash(alice, 50 ether, validator, 1_000);
        assertEq(slashed, 30 ether);
        assertEq(stake.lockedOf(address(pools), alice), 0);
        assertEq(stake.bondedOf(alice), 20 ether);
        (uint256 unbonding,) = stake.unbondingOf(alice);
        assertEq(unbonding, 50 ether);
        assertEq(token.balanceOf(validator), 3 ether);
        assertEq(token.balanceOf(treasury), 27 ether);
    }

    function test_slash_neverReachesAnotherSlashersLock() public {
        address other = address(new Dummy());
        bytes32 role = stake.SLASHER_ROLE();
        vm.prank(admin);
        stake.grantRole(role, other);
        vm.prank(alice);
        stake.bond(100 ether);
        vm.prank(address(pools));
        stake.lock(alice, 60 ether);
        vm.prank(other);
        stake.lock(alice, 10 ether);
        vm.prank(other);
        assertEq(stake.slash(alice, 100 ether, validator, 0), 10 ether);
        assertEq(stake.lockedOf(address(pools), alice), 60 ether);
        assertEq(stake.bondedOf(alice), 30 ether);
    }

    function test_lock_unlock_moveFreeBondedStake() public {
        vm.prank(alice);
        stake.bond(10 ether);
        vm.startPrank(address(pools));
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.InsufficientBonded.selector, 11 ether, 10 ether));
        stake.lock(alice, 11 ether);
        stake.lock(alice, 10 ether);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.InsufficientLocked.selector, 11 ether, 10 ether));
        stake.unlock(alice, 11 ether);
        stake.unlock(alice, 4 ether);
        vm.stopPrank();
        assertEq(stake.lockedOf(address(pools), alice), 6 ether);
        assertEq(stake.bondedOf(alice), 4 ether);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.InsufficientBonded.selector, 5 ether, 4 ether));
        stake.unbond(5 ether); // locked stake cannot be unbonded
    }

    function test_lock_refusesNonSlasher() public {
        bytes32 role = stake.SLASHER_ROLE();
        vm.prank(alice);
        stake.bond(10 ether);
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, stranger, role)
        );
        stake.lock(alice, 1 ether);
    }

    function test_grantRole_slasherOnlyToContracts() public {
        bytes32 role = stake.SLASHER_ROLE();
        vm.prank(admin);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.SlasherNotContract.selector, stranger));
        stake.grantRole(role, stranger);
    }

    function test_bond_refusesFeeOnTransferToken() public {
        FeeToken fee = new FeeToken();
        StakeManager feeStake = new StakeManager(fee, treasury, UNBONDING_DELAY, admin);
        fee.mint(alice, 100 ether);
        vm.startPrank(alice);
        fee.approve(address(feeStake), type(uint256).max);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.TransferAmountMismatch.selector, 100 ether, 99 ether));
        feeStake.bond(100 ether);
        vm.stopPrank();
    }

    function test_slash_capsAtLocked() public {
        vm.prank(alice);
        stake.bond(10 ether);
        vm.startPrank(address(pools));
        stake.lock(alice, 10 ether);
        uint256 slashed = stake.slash(alice, 50 ether, validator, 10_000);
        vm.stopPrank();
        assertEq(slashed, 10 ether);
        assertEq(token.balanceOf(validator), 10 ether);
    }

    function test_slash_refusesUnauthorised() public {
        bytes32 role = stake.SLASHER_ROLE();
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, stranger, role)
        );
        stake.slash(alice, 1, stranger, 0);
    }

    function test_slash_refusesBadBounty() public {
        vm.prank(address(pools));
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.InvalidBountyBps.selector, 10_001));
        stake.slash(alice, 1, validator, 10_001);
    }

    function test_slash_refusesZeroChallenger() public {
        vm.prank(address(pools));
        vm.expectRevert(IStakeManager.ZeroAddress.selector);
        stake.slash(alice, 1, address(0), 0);
    }

    function test_setTreasury_adminOnly() public {
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, stranger, bytes32(0))
        );
        stake.setTreasury(stranger);
        vm.prank(admin);
        stake.setTreasury(stranger);
        assertEq(stake.treasury(), stranger);
    }

    function test_setTreasury_refusesZero() public {
        vm.prank(admin);
        vm.expectRevert(IStakeManager.ZeroAddress.selector);
        stake.setTreasury(address(0));
    }

    function test_setUnbondingDelay_adminOnly() public {
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, stranger, bytes32(0))
        );
        stake.setUnbondingDelay(2 hours);
        vm.prank(admin);
        stake.setUnbondingDelay(2 hours);
        assertEq(stake.unbondingDelay(), 2 hours);
    }

    function test_setUnbondingDelay_refusesZeroAndOutOfRange() public {
        vm.startPrank(admin);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.UnbondingDelayOutOfRange.selector, 0, 1 hours, 90 days));
        stake.setUnbondingDelay(0);
        vm.expectRevert(
            abi.encodeWithSelector(IStakeManager.UnbondingDelayOutOfRange.selector, 90 days + 1, 1 hours, 90 days)
        );
        stake.setUnbondingDelay(90 days + 1);
        vm.stopPrank();
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.UnbondingDelayOutOfRange.selector, 0, 1 hours, 90 days));
        new StakeManager(token, treasury, 0, admin);
    }

    function test_constructor_refusesZeroAddresses() public {
        vm.expectRevert(IStakeManager.ZeroAddress.selector);
        new StakeManager(token, address(0), 1, admin);
    }

    function testFuzz_bondUnbondWithdraw(uint256 bondAmt, uint256 unbondAmt, uint64 waitFor) public {
        bondAmt = bound(bondAmt, 1, 1_000 ether);
        unbondAmt = bound(unbondAmt, 1, bondAmt);
        waitFor = uint64(bound(waitFor, 0, 30 days));
        vm.startPrank(alice);
        stake.bond(bondAmt);
        stake.unbond(unbondAmt);
        (, uint64 readyAt) = stake.unbondingOf(alice);
        vm.warp(block.timestamp + waitFor);
        if (waitFor < UNBONDING_DELAY) {
            vm.expectRevert(abi.encodeWithSelector(IStakeManager.UnbondingNotReady.selector, readyAt));
            stake.withdraw();
        } else {
            stake.withdraw();
            assertEq(token.balanceOf(alice), 1_000 ether - bondAmt + unbondAmt);
        }
        vm.stopPrank();
        assertEq(stake.bondedOf(alice), bondAmt - unbondAmt);
    }

    function testFuzz_slashConservesTokens(
        uint256 bondAmt,
        uint256 lockAmt,
        uint256 unbondAmt,
        uint256 slashAmt,
        uint16 bps
    ) public {
        bondAmt = bound(bondAmt, 1, 1_000 ether);
        lockAmt = bound(lockAmt, 0, bondAmt);
        unbondAmt = bound(unbondAmt, 0, bondAmt - lockAmt);
        slashAmt = bound(slashAmt, 0, 2_000 ether);
        bps = uint16(bound(bps, 0, 10_000));
        vm.startPrank(alice);
        stake.bond(bondAmt);
        if (unbondAmt > 0) stake.unbond(unbondAmt);
        vm.stopPrank();
        vm.startPrank(address(pools));
        if (lockAmt > 0) stake.lock(alice, lockAmt);
        uint256 slashed = stake.slash(alice, slashAmt, validator, bps);
        vm.stopPrank();
        (uint256 unbonding,) = stake.unbondingOf(alice);
        assertEq(slashed, slashAmt < lockAmt ? slashAmt : lockAmt);
        assertEq(unbonding, unbondAmt);
        assertEq(stake.bondedOf(alice), bondAmt - lockAmt - unbondAmt);
        assertEq(stake.bondedOf(alice) + unbonding + stake.lockedOf(address(pools), alice), bondAmt - slashed);
        assertEq(token.balanceOf(address(stake)), bondAmt - slashed);
        assertEq(token.balanceOf(validator) + token.balanceOf(treasury), slashed);
    }
}
