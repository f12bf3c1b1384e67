// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {IStakeManager} from "../src/IStakeManager.sol";
import {StakeManager} from "../src/StakeManager.sol";
import {BaseTest} from "./Base.t.sol";

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

    function test_slash_bondedFirstThenUnbonding() public {
        vm.startPrank(alice);
        stake.bond(100 ether);
        stake.unbond(70 ether); // 30 bonded, 70 unbonding
        vm.stopPrank();
        vm.prank(address(pools));
        uint256 slashed = stake.slash(alice, 50 ether, validator, 1_000);
        assertEq(slashed, 50 ether);
        assertEq(stake.bondedOf(alice), 0);
        (uint256 unbonding,) = stake.unbondingOf(alice);
        assertEq(unbonding, 50 ether);
        assertEq(token.balanceOf(validator), 5 ether);
        assertEq(token.balanceOf(treasury), 45 ether);
    }

    function test_slash_capsAtAvailable() public {
        vm.prank(alice);
        stake.bond(10 ether);
        vm.prank(address(pools));
        uint256 slashed = stake.slash(alice, 50 ether, validator, 10_000);
        assertEq(slashed, 10 ether);
        assertEq(token.balanceOf(validator), 10 ether);
    }

    function test_slash_refusesUnauthorised() public {
        bytes32 role = stake.SLASHER_ROLE();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, stranger, role));
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
        stake.setUnbondingDelay(1);
        vm.prank(admin);
        stake.setUnbondingDelay(1);
        assertEq(stake.unbondingDelay(), 1);
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
        vm.warp(block.timestamp + waitFor);
        if (waitFor < UNBONDING_DELAY) {
            vm.expectRevert();
            stake.withdraw();
        } else {
            stake.withdraw();
            assertEq(token.balanceOf(alice), 1_000 ether - bondAmt + unbondAmt);
        }
        vm.stopPrank();
        assertEq(stake.bondedOf(alice), bondAmt - unbondAmt);
    }

    function testFuzz_slashConservesTokens(uint256 bondAmt, uint256 unbondAmt, uint256 slashAmt, uint16 bps)
        public
    {
        bondAmt = bound(bondAmt, 1, 1_000 ether);
        unbondAmt = bound(unbondAmt, 0, bondAmt);
        slashAmt = bound(slashAmt, 0, 2_000 ether);
        bps = uint16(bound(bps, 0, 10_000));
        vm.startPrank(alice);
        stake.bond(bondAmt);
        if (unbondAmt > 0) stake.unbond(unbondAmt);
        vm.stopPrank();
        vm.prank(address(pools));
        uint256 slashed = stake.slash(alice, slashAmt, validator, bps);
        (uint256 unbonding,) = stake.unbondingOf(alice);
        assertEq(slashed, slashAmt < bondAmt ? slashAmt : bondAmt);
        assertEq(stake.bondedOf(alice) + unbonding, bondAmt - slashed);
        assertEq(token.balanceOf(address(stake)), bondAmt - slashed);
        assertEq(token.balanceOf(validator) + token.balanceOf(treasury), slashed);
    }
}
