// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IComputePool} from "../src/IComputePool.sol";
import {ComputePool} from "../src/ComputePool.sol";
import {IStakeManager} from "../src/IStakeManager.sol";
import {StakeManager} from "../src/StakeManager.sol";
import {BaseTest} from "./Base.t.sol";
import {FeeToken} from "./FeeToken.sol";

/// The attacks of issue 12 (items 1–9), written as the specification: each one fails.
contract LedgerAttacksTest is BaseTest {
    uint256 internal poolId;
    address internal mallory = makeAddr("mallory");
    address internal puppet = makeAddr("puppet"); // a validator mallory controls
    bytes32 internal constant BAD = keccak256("bad rollouts");

    function setUp() public override {
        super.setUp();
        poolId = _createFundedPool(1_000 ether);
        _bondAndJoin(alice, poolId, MIN_STAKE);
        vm.prank(admin);
        token.mint(mallory, 1_000 ether);
        vm.prank(mallory);
        token.approve(address(pools), type(uint256).max);
    }

    /// A pool of mallory's own with a validator she controls.
    function _malloryPool(uint128 slashAmount, uint16 bountyBps) internal returns (uint256 id) {
        IComputePool.PoolParams memory p = _params();
        address[] memory vs = new address[](1);
        vs[0] = puppet;
        p.validators = vs;
        p.minStake = 0;
        p.slashAmount = slashAmount;
        p.bountyBps = bountyBps;
        vm.startPrank(mallory);
        id = pools.createPool(p);
        pools.fundPool(id, 10 ether);
        vm.stopPrank();
    }

    // ------------------------------------------------------------ 1. escape through a pool of one's own

    function test_ownPoolCannotTakeStakeAllocatedToAnotherPool() public {
        bytes32 bad = _submit(alice, poolId, 0, BAD, 10); // bad work in the honest pool
        uint256 q = _malloryPool(1 ether, 5_000);
        vm.startPrank(alice);
        stake.bond(1 ether);
        pools.allocate(q, 1 ether);
        pools.joinPool(q);
        bytes32 dummy = pools.submitWork(q, 0, 0, keccak256("dummy"), 1);
        vm.stopPrank();
        vm.prank(puppet);
        pools.challenge(dummy, 1, bytes32(0)); // takes alice's allocation to q, nothing else
        assertEq(stake.lockedOf(address(pools), alice), MIN_STAKE);
        vm.prank(validator);
        pools.challenge(bad, 1, bytes32(0));
        assertEq(pools.getMember(poolId, alice).allocation, MIN_STAKE - SLASH); // the honest slash is whole
        assertEq(token.balanceOf(treasury), SLASH - SLASH * BOUNTY_BPS / 10_000 + 0.5 ether);
    }

    function test_createPool_refusesBountyAboveHalf() public {
        IComputePool.PoolParams memory p = _params();
        p.bountyBps = 5_001;
        vm.expectRevert(abi.encodeWithSelector(IComputePool.BountyBpsTooHigh.selector, 5_001, 5_000));
        pools.createPool(p);
    }

    function test_createPool_refusesZeroSlash() public {
        IComputePool.PoolParams memory p = _params();
        p.slashAmount = 0;
        vm.expectRevert(IComputePool.ZeroSlashAmount.selector);
        pools.createPool(p);
    }

    function test_challenge_refusesTheWorkerItself() public {
        vm.prank(owner);
        pools.setValidator(poolId, alice, true);
        bytes32 w = _submit(alice, poolId, 0, BAD, 1);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IComputePool.ChallengerNotIndependent.selector, w, alice));
        pools.challenge(w, 1, bytes32(0));
    }

    function test_challenge_refusesThePoolOwner() public {
        vm.prank(owner);
        pools.setValidator(poolId, owner, true);
        bytes32 w = _submit(alice, poolId, 0, BAD, 1);
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IComputePool.ChallengerNotIndependent.selector, w, owner));
        pools.challenge(w, 1, bytes32(0));
    }

    // ------------------------------------------------------------ 2. one stake behind every pool and submission

    function test_everyPoolSlashesItsOwnAllocationInFull() public {
        uint256[3] memory ids = [poolId, _createFundedPool(100 ether), _createFundedPool(100 ether)];
        vm.startPrank(alice);
        stake.bond(2 * MIN_STAKE);
        pools.allocate(ids[1], MIN_STAKE);
        pools.joinPool(ids[1]);
        pools.allocate(ids[2], MIN_STAKE);
        pools.joinPool(ids[2]);
        vm.stopPrank();
        bytes32[3] memory works;
        for (uint256 i; i < 3; ++i) {
            works[i] = _submit(alice, ids[i], 0, BAD, 1);
        }
        for (uint256 i; i < 3; ++i) {
            vm.expectEmit(address(pools));
            emit IComputePool.WorkChallenged(ids[i], works[i], validator, 1, bytes32(0), SLASH);
            vm.prank(validator);
            pools.challenge(works[i], 1, bytes32(0));
        }
        assertEq(stake.lockedOf(address(pools), alice), 3 * (MIN_STAKE - SLASH));
    }

    function test_eachOpenSubmissionNeedsOneFullSlashOfAllocation() public {
        // alice allocated MIN_STAKE = 2 × SLASH: two open works, not three
        _submit(alice, poolId, 0, BAD, 1);
        bytes32 second = _submit(alice, poolId, 0, BAD, 1);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IComputePool.InsufficientAllocation.selector, MIN_STAKE, 3 * SLASH));
        pools.submitWork(poolId, 0, 2, BAD, 1);
        vm.prank(validator);
        pools.challenge(second, 1, bytes32(0));
        assertEq(pools.getMember(poolId, alice).allocation, SLASH); // = what the one open work requires
        assertEq(pools.getMember(poolId, alice).required, SLASH);
    }

    // ------------------------------------------------------------ 3. windows vs unbonding delay

    function test_stakeBackingOpenWorkCannotLeave() public {
        bytes32 w = _submit(alice, poolId, 0, BAD, 1);
        vm.startPrank(alice);
        vm.expectRevert(abi.encodeWithSelector(IComputePool.InsufficientAllocation.selector, MIN_STAKE, MIN_STAKE + 1));
        pools.deallocate(poolId, MIN_STAKE - SLASH + 1);
        pools.deallocate(poolId, MIN_STAKE - SLASH); // what the open work does not need
        // the freed part is bonded again; the rest is locked, not bonded, and cannot be unbonded
        vm.expectRevert(
            abi.encodeWithSelector(IStakeManager.InsufficientBonded.selector, MIN_STAKE - SLASH + 1, MIN_STAKE - SLASH)
        );
        stake.unbond(MIN_STAKE - SLASH + 1);
        vm.stopPrank();
        vm.prank(admin);
        stake.setUnbondingDelay(1 hours); // lowering the delay frees nothing that is locked
        vm.warp(block.timestamp + WINDOW);
        vm.prank(validator);
        pools.challenge(w, 1, bytes32(0)); // the last second of the window still slashes in full
        assertEq(stake.lockedOf(address(pools), alice), 0);
    }

    function test_allocationFreesOnceTheWorkCloses() public {
        bytes32 w = _submit(alice, poolId, 0, BAD, 1);
        vm.warp(block.timestamp + WINDOW + 1);
        pools.expireWork(w);
        vm.prank(alice);
        pools.deallocate(poolId, MIN_STAKE);
        assertEq(stake.bondedOf(alice), MIN_STAKE);
    }

    function test_createPool_refusesUnboundedWindows() public {
        IComputePool.PoolParams memory p = _params();
        p.challengeWindow = 30 days + 1;
        p.rewardLock = 31 days;
        vm.expectRevert(abi.encodeWithSelector(IComputePool.ChallengeWindowOutOfRange.selector, 30 days + 1, 30 days));
        pools.createPool(p);
        p = _params();
        p.rewardLock = 60 days + 1;
        vm.expectRevert(abi.encodeWithSelector(IComputePool.RewardLockTooLong.selector, 60 days + 1, 60 days));
        pools.createPool(p);
    }

    // ------------------------------------------------------------ 4. claim and challenge in the same second

    function test_createPool_refusesLockEqualToWindow() public {
        IComputePool.PoolParams memory p = _params();
        p.rewardLock = WINDOW;
        vm.expectRevert(abi.encodeWithSelector(IComputePool.RewardLockNotAfterWindow.selector, WINDOW, WINDOW));
        pools.createPool(p);
    }

    function testFuzz_claimableOnlyAfterTheLastChallengeSecond(uint32 extra, uint32 at) public {
        IComputePool.PoolParams memory p = _params();
        p.rewardLock = WINDOW + uint32(bound(extra, 1, 1 days));
        vm.startPrank(owner);
        uint256 id = pools.createPool(p);
        pools.fundPool(id, 10 ether);
        vm.stopPrank();
        _bondAndJoin(bob, id, MIN_STAKE);
        bytes32 w = _submit(bob, id, 0, BAD, 1);
        vm.prank(validator);
        pools.attest(w);
        uint256 t0 = block.timestamp;
        vm.warp(t0 + bound(at, 0, 2 days));
        bool canChallenge = block.timestamp <= t0 + WINDOW;
        bool canClaim = block.timestamp >= t0 + p.rewardLock;
        assertFalse(canChallenge && canClaim);
        vm.prank(bob);
        if (!canClaim) {
            vm.expectRevert(abi.encodeWithSelector(IComputePool.RewardLocked.selector, w, t0 + p.rewardLock));
        }
        pools.claim(_ids(w));
    }

    // ------------------------------------------------------------ 5. fee-on-transfer tokens

    function test_fundPool_refusesFeeOnTransferToken() public {
        FeeToken fee = new FeeToken();
        StakeManager feeStake = new StakeManager(fee, treasury, UNBONDING_DELAY, admin);
        ComputePool feePools = new ComputePool(fee, feeStake);
        fee.mint(owner, 100 ether);
        vm.startPrank(owner);
        fee.approve(address(feePools), type(uint256).max);
        uint256 id = feePools.createPool(_params());
        vm.expectRevert(abi.encodeWithSelector(IComputePool.TransferAmountMismatch.selector, 100 ether, 99 ether));
        feePools.fundPool(id, 100 ether);
        vm.stopPrank();
    }

    // ------------------------------------------------------------ 6. RewardsClaimed names the works

    function test_claim_eventListsTheWorkIds() public {
        bytes32 a = _submit(alice, poolId, 0, BAD, 2);
        bytes32 b = _submit(alice, poolId, 0, keccak256("other"), 3);
        vm.startPrank(validator);
        pools.attest(a);
        pools.attest(b);
        vm.stopPrank();
        vm.warp(block.timestamp + LOCK);
        bytes32[] memory ids = new bytes32[](2);
        (ids[0], ids[1]) = (a, b);
        vm.expectEmit(address(pools));
        emit IComputePool.RewardsClaimed(alice, 5 ether, ids);
        vm.prank(alice);
        pools.claim(ids);
        assertEq(pools.getMember(poolId, alice).openWorks, 0);
    }

    // ------------------------------------------------------------ 7. nonces: no reuse, no grinding

    function test_submitWork_refusesReusedAndSkippedNonces() public {
        _submit(alice, poolId, 0, BAD, 1); // nonce 0
        vm.startPrank(alice);
        vm.expectRevert(abi.encodeWithSelector(IComputePool.InvalidNonce.selector, 0, 1));
        pools.submitWork(poolId, 0, 0, keccak256("same completions, new digest"), 1);
        vm.expectRevert(abi.encodeWithSelector(IComputePool.InvalidNonce.selector, 2, 1));
        pools.submitWork(poolId, 0, 2, keccak256("skipping a disliked assignment"), 1);
        pools.leavePool(poolId);
        pools.joinPool(poolId);
        vm.expectRevert(abi.encodeWithSelector(IComputePool.InvalidNonce.selector, 0, 1));
        pools.submitWork(poolId, 0, 0, keccak256("after rejoining"), 1); // the counter survives membership
        vm.stopPrank();
    }

    function testFuzz_onlyTheNextNonceIsAccepted(uint64 nonce) public {
        _submit(alice, poolId, 0, BAD, 1);
        vm.prank(alice);
        if (nonce != 1) vm.expectRevert(abi.encodeWithSelector(IComputePool.InvalidNonce.selector, nonce, 1));
        pools.submitWork(poolId, 0, nonce, BAD, 1);
    }

    // ------------------------------------------------------------ 8. squatting and collisions

    function test_copiedDigestInAnotherPoolDoesNotBlockTheVictim() public {
        uint256 q = _malloryPool(1 ether, 0);
        vm.startPrank(mallory);
        token.approve(address(stake), type(uint256).max);
        stake.bond(1 ether);
        pools.allocate(q, 1 ether);
        pools.joinPool(q);
        bytes32 squat = pools.submitWork(q, 0, 0, BAD, 1); // the victim's digest, seen in the mempool
        vm.stopPrank();
        bytes32 own = _submit(alice, poolId, 0, BAD, 1);
        assertTrue(own != squat);
        assertEq(pools.getWork(own).worker, alice);
    }

    function test_sameFileInTwoPoolsOfTheSameWorkerIsTwoWorks() public {
        uint256 second = _createFundedPool(100 ether);
        _bondAndJoin(alice, second, MIN_STAKE);
        bytes32 a = _submit(alice, poolId, 0, BAD, 1);
        bytes32 b = _submit(alice, second, 0, BAD, 1);
        assertTrue(a != b);
        assertEq(a, pools.workIdOf(poolId, alice, 0));
        assertEq(b, pools.workIdOf(second, alice, 0));
    }

    // ------------------------------------------------------------ 9. inflated sample counts

    function test_inflatedSampleCountIsRefused() public {
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IComputePool.TooManySamples.selector, type(uint32).max, MAX_SAMPLES));
        pools.submitWork(poolId, 0, 0, BAD, type(uint32).max);
    }

    function test_reservationsAreBackedByAllocation() public {
        // a worker with one slash of allocation can reserve for one open submission only
        uint256 id = _createFundedPool(100_000 ether);
        vm.startPrank(bob);
        stake.bond(MIN_STAKE);
        pools.allocate(id, MIN_STAKE);
        pools.joinPool(id);
        pools.submitWork(id, 0, 0, BAD, MAX_SAMPLES);
        pools.submitWork(id, 0, 1, BAD, MAX_SAMPLES);
        vm.expectRevert(abi.encodeWithSelector(IComputePool.InsufficientAllocation.selector, MIN_STAKE, 3 * SLASH));
        pools.submitWork(id, 0, 2, BAD, MAX_SAMPLES);
        vm.stopPrank();
        assertEq(pools.getPool(id).reserved, 2 * uint256(MAX_SAMPLES) * REWARD_PER_SAMPLE);
    }

    // ------------------------------------------------------------ fuzz: deallocation keeps what open work requires

    function testFuzz_deallocateKeepsWhatOpenWorkRequires(uint8 open, uint256 amount) public {
        open = uint8(bound(open, 0, 2));
        for (uint256 i; i < open; ++i) {
            _submit(alice, poolId, 0, BAD, 1);
        }
        amount = bound(amount, 1, MIN_STAKE);
        vm.prank(alice);
        if (MIN_STAKE - amount < uint256(open) * SLASH) {
            vm.expectRevert(abi.encodeWithSelector(IComputePool.InsufficientAllocation.selector, MIN_STAKE,
                                                   uint256(open) * SLASH + amount));
        }
        pools.deallocate(poolId, amount);
        IComputePool.MemberView memory m = pools.getMember(poolId, alice);
        assertGe(m.allocation, m.required);
    }
}
