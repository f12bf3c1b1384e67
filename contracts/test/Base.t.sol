// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {DevStakeToken} from "../src/DevStakeToken.sol";
import {StakeManager} from "../src/StakeManager.sol";
import {ComputePool} from "../src/ComputePool.sol";
import {IComputePool} from "../src/IComputePool.sol";

/// Shared deployment and actors for the unit, fuzz and invariant tests.
abstract contract BaseTest is Test {
    DevStakeToken internal token;
    StakeManager internal stake;
    ComputePool internal pools;

    address internal admin = makeAddr("admin");
    address internal treasury = makeAddr("treasury");
    address internal owner = makeAddr("owner");
    address internal trainer = makeAddr("trainer");
    address internal validator = makeAddr("validator");
    address internal alice = makeAddr("alice");
    address internal bob = makeAddr("bob");
    address internal stranger = makeAddr("stranger");

    uint64 internal constant UNBONDING_DELAY = 7 days;
    uint128 internal constant MIN_STAKE = 100 ether;
    uint128 internal constant REWARD_PER_SAMPLE = 1 ether;
    uint128 internal constant SLASH = 50 ether;
    uint16 internal constant BOUNTY_BPS = 2_000;
    uint32 internal constant WINDOW = 1 hours;
    uint32 internal constant LOCK = 2 hours;
    uint32 internal constant STALENESS = 2;
    uint32 internal constant MAX_SAMPLES = 2_000;
    bytes32 internal constant BASE_CKPT = keccak256("base");
    bytes32 internal constant TASK = keccak256("task");

    function setUp() public virtual {
        token = new DevStakeToken(admin);
        stake = new StakeManager(token, treasury, UNBONDING_DELAY, admin);
        pools = new ComputePool(token, stake);
        vm.startPrank(admin);
        stake.grantRole(stake.SLASHER_ROLE(), address(pools));
        token.mint(owner, 1_000_000 ether);
        token.mint(alice, 1_000 ether);
        token.mint(bob, 1_000 ether);
        vm.stopPrank();
        vm.prank(owner);
        token.approve(address(pools), type(uint256).max);
        vm.prank(alice);
        token.approve(address(stake), type(uint256).max);
        vm.prank(bob);
        token.approve(address(stake), type(uint256).max);
    }

    function _params() internal view returns (IComputePool.PoolParams memory p) {
        address[] memory vs = new address[](1);
        vs[0] = validator;
        p = IComputePool.PoolParams({
            trainer: trainer,
            validators: vs,
            minStake: MIN_STAKE,
            rewardPerSample: REWARD_PER_SAMPLE,
            slashAmount: SLASH,
            bountyBps: BOUNTY_BPS,
            challengeWindow: WINDOW,
            rewardLock: LOCK,
            maxStaleness: STALENESS,
            taskRef: TASK,
            baseCheckpoint: BASE_CKPT,
            maxSamplesPerWork: MAX_SAMPLES,
            spotCheckBps: 10_000
        });
    }

    function _createFundedPool(uint256 budget) internal returns (uint256 poolId) {
        vm.startPrank(owner);
        poolId = pools.createPool(_params());
        if (budget > 0) pools.fundPool(poolId, budget);
        vm.stopPrank();
    }

    /// Bond `amount`, allocate all of it to the pool and join.
    function _bondAndJoin(address worker, uint256 poolId, uint256 amount) internal {
        vm.startPrank(worker);
        stake.bond(amount);
        pools.allocate(poolId, amount);
        pools.joinPool(poolId);
        vm.stopPrank();
    }

    /// Submit with the worker's next nonce; returns the work id.
    function _submit(address worker, uint256 poolId, uint64 step, bytes32 digest, uint32 n)
        internal
        returns (bytes32 workId)
    {
        uint64 nonce = pools.getMember(poolId, worker).nextNonce;
        vm.prank(worker);
        workId = pools.submitWork(poolId, step, nonce, digest, n);
    }

    function _ids(bytes32 id) internal pure returns (bytes32[] memory ids) {
        ids = new bytes32[](1);
        ids[0] = id;
    }

    function _status(bytes32 workId) internal view returns (IComputePool.WorkStatus) {
        return pools.getWork(workId).status;
    }
}
