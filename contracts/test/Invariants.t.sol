// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {StdInvariant} from "forge-std/StdInvariant.sol";
import {DevStakeToken} from "../src/DevStakeToken.sol";
import {StakeManager} from "../src/StakeManager.sol";
import {ComputePool} from "../src/ComputePool.sol";
import {IComputePool} from "../src/IComputePool.sol";

/// Drives random sequences of every state-changing call through real actors and keeps ghost
/// accounting of what was funded, paid and challenged.
contract Handler is Test {
    DevStakeToken internal token;
    StakeManager internal stake;
    ComputePool internal pools;
    address internal owner;
    address internal trainer;
    address internal validator;

    address[] public workers;
    uint256[] public poolIds;
    bytes32[] public workIds;

    uint256 public ghostFunded;
    uint256 public ghostPaid;
    uint256 public ghostRefunded;
    mapping(bytes32 => uint256) public timesPaid;
    mapping(bytes32 => bool) public everRejected;
    /// submissions accepted on-chain per (pool, worker, nonce) and per (pool, worker, step, nonce)
    mapping(bytes32 => uint256) public submissionsOf;
    mapping(bytes32 => uint256) public paidOf;
    mapping(bytes32 => bytes32) internal _keyOf;
    mapping(bytes32 => bytes32) internal _stepKeyOf;
    uint256 internal digestSeq;

    constructor(DevStakeToken t, StakeManager s, ComputePool p, address o, address tr, address v) {
        token = t;
        stake = s;
        pools = p;
        owner = o;
        trainer = tr;
        validator = v;
        for (uint256 i; i < 4; ++i) {
            address w = makeAddr(string(abi.encodePacked("worker", vm.toString(i))));
            workers.push(w);
            vm.prank(w);
            token.approve(address(stake), type(uint256).max);
        }
    }

    function poolCount() external view returns (uint256) {
        return poolIds.length;
    }

    function workCount() external view returns (uint256) {
        return workIds.length;
    }

    function _worker(uint256 seed) internal view returns (address) {
        return workers[seed % workers.length];
    }

    function _poolId(uint256 seed) internal view returns (uint256) {
        return poolIds[seed % poolIds.length];
    }

    function createPool(uint128 minStake, uint128 reward, uint128 slashAmt, uint16 bps, uint32 window, uint32 extraLock)
        external
    {
        if (poolIds.length >= 3) return;
        address[] memory vs = new address[](1);
        vs[0] = validator;
        window = uint32(bound(window, 1, 1 days));
        IComputePool.PoolParams memory p = IComputePool.PoolParams({
            trainer: trainer,
            validators: vs,
            minStake: uint128(bound(minStake, 0, 100 ether)),
            rewardPerSample: uint128(bound(reward, 0, 1 ether)),
            slashAmount: uint128(bound(slashAmt, 1, 200 ether)),
            bountyBps: uint16(bound(bps, 0, 5_000)),
            challengeWindow: window,
            rewardLock: window + uint32(bound(extraLock, 1, 1 days)),
            maxStaleness: 2,
            taskRef: bytes32(0),
            baseCheckpoint: keccak256("base"),
            maxSamplesPerWork: 64,
            spotCheckBps: 10_000
        });
        vm.prank(owner);
        poolIds.push(pools.createPool(p));
    }

    function fund(uint256 poolSeed, uint256 amount) external {
        if (poolIds.length == 0) return;
        amount = bound(amount, 1, 1_000 ether);
        vm.prank(owner);
        try pools.fundPool(_poolId(poolSeed), amount) {
            ghostFunded += amount;
        } catch {}
    }

    function close(uint256 poolSeed) external {
        if (poolIds.length == 0) return;
        uint256 id = _poolId(poolSeed);
        uint256 before = token.balanceOf(owner);
        vm.prank(owner);
        pools.closePool(id);
        ghostRefunded += token.balanceOf(owner) - before;
    }

    function bond(uint256 workerSeed, uint256 amount) external {
        address w = _worker(workerSeed);
        amount = bound(amount, 1, 300 ether);
        vm.prank(owner);
        token.transfer(w, amount);
        vm.prank(w);
        stake.bond(amount);
    }

    function unbond(uint256 workerSeed, uint256 amount) external {
        address w = _worker(workerSeed);
        uint256 bonded = stake.bondedOf(w);
        if (bonded == 0) return;
        vm.prank(w);
        stake.unbond(bound(amount, 1, bonded));
    }

    function withdraw(uint256 workerSeed) external {
        vm.prank(_worker(workerSeed));
        try stake.withdraw() {} catch {}
    }

    function join(uint256 workerSeed, uint256 poolSeed) external {
        if (poolIds.length == 0) return;
        vm.prank(_worker(workerSeed));
        try pools.joinPool(_poolId(poolSeed)) {} catch {}
    }

    function publish(uint256 poolSeed) external {
        if (poolIds.length == 0) return;
        uint256 id = _poolId(poolSeed);
        uint64 latest = pools.getPool(id).latestStep;
        vm.prank(trainer);
        try pools.publishCheckpoint(id, latest + 1, keccak256(abi.encode(id, latest + 1))) {} catch {}
    }

    function submit(uint256 workerSeed, uint256 poolSeed, uint64 stepBack, uint32 n, uint64 nonceSkew) external {
        if (poolIds.length == 0) return;
        uint256 id = _poolId(poolSeed);
        address w = _worker(workerSeed);
        uint64 latest = pools.getPool(id).latestStep;
        uint64 step = latest - uint64(bound(stepBack, 0, latest));
        // mostly the right nonce; sometimes a reused or skipped one, which must be refused
        uint64 next = pools.getMember(id, w).nextNonce;
        uint64 nonce = nonceSkew % 4 == 0 ? uint64(bound(nonceSkew, 0, next + 2)) : next;
        vm.prank(w);
        try pools.submitWork(
            id, step, nonce, keccak256(abi.encode("digest", digestSeq++)), uint32(bound(n, 1, 64))
        ) returns (
            bytes32 workId
        ) {
            assertEq(nonce, next);
            workIds.push(workId);
            bytes32 key = keccak256(abi.encode(id, w, nonce));
            bytes32 stepKey = keccak256(abi.encode(id, w, step, nonce));
            _keyOf[workId] = key;
            _stepKeyOf[workId] = stepKey;
            submissionsOf[key] += 1;
            submissionsOf[stepKey] += 1;
        } catch {}
    }

    function allocate(uint256 workerSeed, uint256 poolSeed, uint256 amount) external {
        if (poolIds.length == 0) return;
        address w = _worker(workerSeed);
        uint256 bonded = stake.bondedOf(w);
        if (bonded == 0) return;
        vm.prank(w);
        pools.allocate(_poolId(poolSeed), bound(amount, 1, bonded));
    }

    function deallocate(uint256 workerSeed, uint256 poolSeed, uint256 amount) external {
        if (poolIds.length == 0) return;
        address w = _worker(workerSeed);
        uint256 id = _poolId(poolSeed);
        uint256 allocation = pools.getMember(id, w).allocation;
        if (allocation == 0) return;
        vm.prank(w);
        try pools.deallocate(id, bound(amount, 1, allocation)) {} catch {}
    }

    function attest(uint256 workSeed) external {
        if (workIds.length == 0) return;
        vm.prank(validator);
        try pools.attest(workIds[workSeed % workIds.length]) {} catch {}
    }

    function challenge(uint256 workSeed) external {
        if (workIds.length == 0) return;
        bytes32 id = workIds[workSeed % workIds.length];
        vm.prank(validator);
        try pools.challenge(id, 1, bytes32(0)) {
            everRejected[id] = true;
        } catch {}
    }

    function expire(uint256 workSeed) external {
        if (workIds.length == 0) return;
        try pools.expireWork(workIds[workSeed % workIds.length]) {} catch {}
    }

    function claim(uint256 workSeed) external {
        if (workIds.length == 0) return;
        bytes32 id = workIds[workSeed % workIds.length];
        IComputePool.WorkStatus s = pools.getWork(id).status;
        address w = pools.getWork(id).worker;
        bytes32[] memory ids = new bytes32[](1);
        ids[0] = id;
        vm.prank(w);
        try pools.claim(ids) returns (uint256 amount) {
            ghostPaid += amount;
            timesPaid[id] += 1;
            paidOf[_keyOf[id]] += 1;
            paidOf[_stepKeyOf[id]] += 1;
            assertEq(uint8(s), uint8(IComputePool.WorkStatus.Accepted));
        } catch {}
    }

    /// Also tries to claim the same work a second time in the same step.
    function claimTwice(uint256 workSeed) external {
        if (workIds.length == 0) return;
        bytes32 id = workIds[workSeed % workIds.length];
        address w = pools.getWork(id).worker;
        bytes32[] memory ids = new bytes32[](2);
        ids[0] = id;
        ids[1] = id;
        vm.prank(w);
        try pools.claim(ids) returns (uint256 amount) {
            ghostPaid += amount;
            timesPaid[id] += 2;
            paidOf[_keyOf[id]] += 2;
        } catch {}
    }

    function keyOf(bytes32 workId) external view returns (bytes32, bytes32) {
        return (_keyOf[workId], _stepKeyOf[workId]);
    }

    function warp(uint32 secs) external {
        vm.warp(block.timestamp + bound(secs, 1, 2 days));
    }
}

contract InvariantsTest is StdInvariant, Test {
    DevStakeToken internal token;
    StakeManager internal stake;
    ComputePool internal pools;
    Handler internal handler;
    address internal treasury = makeAddr("treasury");
    address internal owner = makeAddr("owner");
    address internal validator = makeAddr("validator");

    function setUp() public {
        token = new DevStakeToken(address(this));
        stake = new StakeManager(token, treasury, 1 days, address(this));
        pools = new ComputePool(token, stake);
        stake.grantRole(stake.SLASHER_ROLE(), address(pools));
        handler = new Handler(token, stake, pools, owner, makeAddr("trainer"), validator);
        token.mint(owner, 1e30);
        vm.prank(owner);
        token.approve(address(pools), type(uint256).max);
        handler.createPool(10 ether, 0.1 ether, 50 ether, 2_000, 3600, 3600);
        targetContract(address(handler));
    }

    function _sums() internal view returns (uint256 staked, uint256 budgets, uint256 reserved) {
        for (uint256 i; i < 4; ++i) {
            address w = handler.workers(i);
            (uint256 unbonding,) = stake.unbondingOf(w);
            staked += stake.bondedOf(w) + unbonding + stake.lockedOf(address(pools), w);
        }
        for (uint256 i; i < handler.poolCount(); ++i) {
            IComputePool.PoolView memory v = pools.getPool(handler.poolIds(i));
            budgets += v.budget;
            reserved += v.reserved;
        }
    }

    /// Token balance of the contracts == Σ (free bonded + locked + unbonding) + unspent budgets + owed rewards.
    function invariant_tokenConservation() public view {
        (uint256 staked, uint256 budgets, uint256 reserved) = _sums();
        assertEq(token.balanceOf(address(stake)), staked);
        assertEq(token.balanceOf(address(pools)), budgets + reserved);
    }

    /// Rewards paid + owed never exceed what was funded (refunds come out of the unspent budget).
    function invariant_rewardsWithinFunding() public view {
        (,, uint256 reserved) = _sums();
        assertLe(handler.ghostPaid() + reserved, handler.ghostFunded());
        (, uint256 budgets,) = _sums();
        assertEq(handler.ghostPaid() + reserved + budgets + handler.ghostRefunded(), handler.ghostFunded());
    }

    /// No work is paid twice, and challenged work is never paid.
    function invariant_noDoubleClaimAndNoPaidChallenge() public view {
        for (uint256 i; i < handler.workCount(); ++i) {
            bytes32 id = handler.workIds(i);
            assertLe(handler.timesPaid(id), 1);
            if (handler.everRejected(id)) assertEq(handler.timesPaid(id), 0);
        }
    }

    /// No two submissions — and so no two paid works — share (pool, worker, nonce) or (pool, worker, step, nonce).
    function invariant_noSharedNonce() public view {
        for (uint256 i; i < handler.workCount(); ++i) {
            (bytes32 key, bytes32 stepKey) = handler.keyOf(handler.workIds(i));
            assertEq(handler.submissionsOf(key), 1);
            assertEq(handler.submissionsOf(stepKey), 1);
            assertLe(handler.paidOf(key), 1);
            assertLe(handler.paidOf(stepKey), 1);
        }
    }

    /// In every pool a worker's allocation covers one full slash per open work, the open-work
    /// count is exact, and the allocations of a worker sum to the stake locked for the pool contract.
    function invariant_allocationCoversOpenWork() public view {
        for (uint256 k; k < 4; ++k) {
            address w = handler.workers(k);
            uint256 allocated;
            for (uint256 i; i < handler.poolCount(); ++i) {
                uint256 id = handler.poolIds(i);
                IComputePool.MemberView memory m = pools.getMember(id, w);
                assertGe(m.allocation, uint256(m.openWorks) * pools.getPool(id).params.slashAmount);
                assertEq(m.openWorks, _openWorks(id, w));
                allocated += m.allocation;
            }
            assertEq(allocated, stake.lockedOf(address(pools), w));
        }
    }

    function _openWorks(uint256 poolId, address worker) internal view returns (uint256 open) {
        for (uint256 i; i < handler.workCount(); ++i) {
            IComputePool.WorkView memory v = pools.getWork(handler.workIds(i));
            if (v.poolId != poolId || v.worker != worker) continue;
            if (v.status == IComputePool.WorkStatus.Pending || v.status == IComputePool.WorkStatus.Accepted) ++open;
        }
    }
}
