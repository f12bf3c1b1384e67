// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IComputePool} from "../src/IComputePool.sol";
import {IWorkBatches} from "../src/IWorkBatches.sol";
import {WorkBatches} from "../src/WorkBatches.sol";
import {Test} from "forge-std/Test.sol";
import {BaseTest} from "./Base.t.sol";
import {FeeToken} from "./FeeToken.sol";
import {StakeManager} from "../src/StakeManager.sol";
import {ComputePool} from "../src/ComputePool.sol";

/// Positional Merkle trees as WorkBatches hashes them, and its range proofs.
abstract contract BatchTrees is Test {
    /// The root of a positional tree of `leaves` padded with zeros to a power of two.
    function _rootOf(bytes32[] memory leaves) internal pure returns (bytes32) {
        bytes32[] memory level = _padded(leaves);
        while (level.length > 1) level = _up(level);
        return level[0];
    }

    /// The siblings a range `lo`..`lo + n − 1` lacks, level by level, left then right (WorkBatches._root's order).
    function _proof(bytes32[] memory leaves, uint256 lo, uint256 n) internal pure returns (bytes32[] memory proof) {
        bytes32[] memory level = _padded(leaves);
        bytes32[] memory buf = new bytes32[](64);
        uint256 p;
        while (level.length > 1) {
            uint256 hi = lo + n;
            if (lo & 1 == 1) buf[p++] = level[lo - 1];
            if (hi & 1 == 1) buf[p++] = level[hi];
            uint256 newLo = lo >> 1;
            n = (hi + 1) / 2 - newLo;
            lo = newLo;
            level = _up(level);
        }
        proof = new bytes32[](p);
        for (uint256 i; i < p; ++i) {
            proof[i] = buf[i];
        }
    }

    function _padded(bytes32[] memory leaves) internal pure returns (bytes32[] memory level) {
        uint256 size = 1;
        while (size < leaves.length) size <<= 1;
        level = new bytes32[](size);
        for (uint256 i; i < leaves.length; ++i) {
            level[i] = leaves[i];
        }
    }

    function _up(bytes32[] memory level) internal pure returns (bytes32[] memory up) {
        up = new bytes32[](level.length / 2);
        for (uint256 i; i < up.length; ++i) {
            up[i] = keccak256(abi.encodePacked(level[2 * i], level[2 * i + 1]));
        }
    }
}

/// Batched settlement in a permissioned pool (decision 0009 §3; docs/protocol.md R3.7–R3.13, R1.23–R1.25):
/// signed leaves, batches, optimistic acceptance, challenges, duplicate-counter fraud proofs and range-proof claims.
abstract contract BatchesBase is BaseTest, BatchTrees {
    WorkBatches internal wb;
    uint256 internal poolId;
    address internal w1;
    uint256 internal k1;
    address internal w2;
    uint256 internal k2;

    uint32 internal constant EPOCH = 1 hours;
    uint32 internal constant MAX_LEAVES = 64;
    // one slash for each of maxLeaves × (2 + ⌈window / epoch⌉) leaves that may be open at once (R1.25)
    uint128 internal constant W_BOND = SLASH * MAX_LEAVES * 3;
    uint256 internal constant FUNDED = 10_000 ether;

    function setUp() public virtual override {
        super.setUp();
        (w1, k1) = makeAddrAndKey("w1");
        (w2, k2) = makeAddrAndKey("w2");
        poolId = _createFundedPool(0);
        wb = new WorkBatches(pools);
        vm.startPrank(admin);
        stake.grantRole(stake.SLASHER_ROLE(), address(wb));
        token.mint(w1, 20_000 ether);
        token.mint(w2, 20_000 ether);
        vm.stopPrank();
        vm.startPrank(owner);
        wb.configure(poolId, _batchParams());
        token.approve(address(wb), type(uint256).max);
        wb.fund(poolId, FUNDED);
        vm.stopPrank();
        _member(w1);
        _member(w2);
        // a bond covers leaves from the epoch after its lock: the tests' leaves are of epoch 1
        vm.warp(wb.genesisOf(poolId) + EPOCH);
        wb.openEpoch(poolId);
    }

    function _batchParams() internal pure returns (IWorkBatches.Params memory) {
        return IWorkBatches.Params({epochLength: EPOCH, maxLeaves: MAX_LEAVES, workerBond: W_BOND});
    }

    /// Bond, allocate MIN_STAKE, join the pool and lock the batch bond.
    function _member(address w) internal {
        vm.startPrank(w);
        token.approve(address(stake), type(uint256).max);
        stake.bond(MIN_STAKE + W_BOND);
        pools.allocate(poolId, MIN_STAKE);
        pools.joinPool(poolId);
        wb.lockBond(poolId);
        vm.stopPrank();
    }

    // ---------------------------------------------------------------- leaves and trees

    function _sign(uint256 key, bytes32 digest) internal pure returns (bytes32 r, bytes32 vs) {
        (uint8 v, bytes32 r_, bytes32 s) = vm.sign(key, digest);
        r = r_;
        vs = bytes32(uint256(s) | (uint256(v - 27) << 255));
    }

    function _body(uint256 key, address w, uint256 pool, uint32 epoch, uint32 counter, uint32 samples)
        internal
        view
        returns (IWorkBatches.LeafBody memory l)
    {
        l.rolloutDigest = keccak256(abi.encode("file", w, pool, epoch, counter));
        l.step = 0;
        l.samples = samples;
        (l.r, l.vs) = _sign(key, wb.leafDigest(pool, epoch, counter, w, l.rolloutDigest, l.step, l.samples));
    }

    function _node(address w, uint32 epoch, uint32 counter, IWorkBatches.LeafBody memory l)
        internal
        view
        returns (bytes32)
    {
        bytes32 d = wb.leafDigest(poolId, epoch, counter, w, l.rolloutDigest, l.step, l.samples);
        return keccak256(abi.encode(d, l.r, l.vs));
    }

    // ---------------------------------------------------------------- a standard batch

    /// A batch of `n1` leaves of w1 (counters from `c1`) then `n2` of w2 (from `c2`), epoch `epoch`, 5 samples each.
    struct Batch {
        IWorkBatches.BatchRef ref;
        IWorkBatches.LeafBody[] bodies;
        bytes32[] nodes;
    }

    function _batch(uint32 epoch, uint32 c1, uint256 n1, uint32 c2, uint256 n2, bytes32 salt)
        internal
        view
        returns (Batch memory b)
    {
        uint256 n = n1 + n2;
        b.bodies = new IWorkBatches.LeafBody[](n);
        b.nodes = new bytes32[](n);
        for (uint256 i; i < n; ++i) {
            (address w, uint256 k, uint32 c) = i < n1 ? (w1, k1, c1 + uint32(i)) : (w2, k2, c2 + uint32(i - n1));
            b.bodies[i] = _body(k, w, poolId, epoch, c, 5);
            b.nodes[i] = _node(w, epoch, c, b.bodies[i]);
        }
        b.ref = IWorkBatches.BatchRef({
            poolId: poolId, epoch: epoch, count: uint16(n), root: _rootOf(b.nodes), listDigest: keccak256(abi.encode(salt))
        });
    }

    function _post(Batch memory b) internal returns (bytes32 id) {
        vm.prank(stranger);
        id = wb.postBatch(b.ref);
    }

    function _slice(IWorkBatches.LeafBody[] memory a, uint256 from, uint256 n)
        internal
        pure
        returns (IWorkBatches.LeafBody[] memory s)
    {
        s = new IWorkBatches.LeafBody[](n);
        for (uint256 i; i < n; ++i) {
            s[i] = a[from + i];
        }
    }

    /// `w` claims leaves `from`..`from + n − 1` of the batch (positions), counters from `first`.
    function _claim(address w, Batch memory b, uint32 first, uint256 from, uint256 n) internal returns (uint256) {
        vm.prank(w);
        return wb.claim(b.ref, first, from, _slice(b.bodies, from, n), _proof(b.nodes, from, n));
    }

    function _pastWindow() internal {
        vm.warp(block.timestamp + WINDOW + 1);
    }
}

contract WorkBatchesTest is BatchesBase {
    // ---------------------------------------------------------------- the path where nobody disputes

    /// Two workers' leaves in one batch are accepted once its window closes; each claims its run by one range
    /// proof and is paid rewardPerSample × samples from the budget.
    function test_acceptedAfterTheWindowAndClaimedByOneRangeProofEach() public {
        Batch memory b = _batch(1, 0, 5, 0, 3, "a");
        _post(b);
        _pastWindow();
        uint256 before1 = token.balanceOf(w1);
        assertEq(_claim(w1, b, 0, 0, 5), 25 ether);
        assertEq(_claim(w2, b, 0, 5, 3), 15 ether);
        assertEq(token.balanceOf(w1) - before1, 25 ether);
        assertEq(wb.budget(poolId), FUNDED - 40 ether);
        (uint32 e, uint32 c) = wb.nextClaim(poolId, w1);
        assertEq(e, 1);
        assertEq(c, 5);
    }

    /// A worker claims its run in two parts, and a later batch of the same epoch from where it stopped.
    function test_claimsRunOnAcrossBatches() public {
        Batch memory b = _batch(1, 0, 6, 0, 0, "a");
        _post(b);
        Batch memory b2 = _batch(1, 6, 3, 0, 0, "b");
        _post(b2);
        _pastWindow();
        _claim(w1, b, 0, 0, 2);
        _claim(w1, b, 2, 2, 4);
        assertEq(_claim(w1, b2, 6, 0, 3), 15 ether);
    }

    function test_aClaimBeforeTheWindowClosesIsRefused() public {
        Batch memory b = _batch(1, 0, 4, 0, 0, "a");
        bytes32 id = _post(b);
        vm.warp(block.timestamp + WINDOW);
        bytes32[] memory proof = _proof(b.nodes, 0, 4);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.WindowOpen.selector, id, uint64(block.timestamp)));
        wb.claim(b.ref, 0, 0, b.bodies, proof);
    }

    /// No counter is paid twice: not by the same claim again, nor from another batch holding the same leaves.
    function test_aLeafIsNeverPaidTwice() public {
        Batch memory b = _batch(1, 0, 4, 0, 0, "a");
        _post(b);
        Batch memory again = _batch(1, 0, 4, 0, 0, "b"); // the same leaves, another list digest
        _post(again);
        _pastWindow();
        _claim(w1, b, 0, 0, 4);
        bytes32[] memory proof = _proof(b.nodes, 0, 4);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotNextCounter.selector, 1, 0, 4));
        wb.claim(b.ref, 0, 0, b.bodies, proof);
        proof = _proof(again.nodes, 2, 2);
        IWorkBatches.LeafBody[] memory tail = _slice(again.bodies, 2, 2);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotNextCounter.selector, 1, 2, 4));
        wb.claim(again.ref, 2, 2, tail, proof);
    }

    /// Counters are paid in order (R3.11): a claim that skips an unvoided counter, or goes back to an epoch before
    /// one already claimed, is refused.
    function test_aGapOrAnEarlierEpochIsRefused() public {
        Batch memory b = _batch(1, 0, 4, 0, 0, "a");
        _post(b);
        _pastWindow();
        bytes32[] memory proof = _proof(b.nodes, 1, 3);
        IWorkBatches.LeafBody[] memory tail = _slice(b.bodies, 1, 3);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotNextCounter.selector, 1, 1, 0));
        wb.claim(b.ref, 1, 1, tail, proof);

        vm.warp(wb.genesisOf(poolId) + 2 * EPOCH);
        wb.openEpoch(poolId);
        Batch memory later = _batch(2, 0, 2, 0, 0, "b");
        _post(later);
        _pastWindow();
        _claim(w1, later, 0, 0, 2);
        proof = _proof(b.nodes, 0, 4);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotNextCounter.selector, 1, 0, type(uint32).max));
        wb.claim(b.ref, 0, 0, b.bodies, proof);
    }

    // ---------------------------------------------------------------- refusals of bad claims

    /// A tampered sibling, a wrong position, changed samples or a wrong counter do not hash to the root.
    function test_aBadProofIsRefused() public {
        Batch memory b = _batch(1, 0, 4, 0, 4, "a");
        _post(b);
        _pastWindow();
        bytes32[] memory proof = _proof(b.nodes, 0, 4);
        proof[0] = bytes32(uint256(proof[0]) ^ 1);
        vm.prank(w1);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.claim(b.ref, 0, 0, _slice(b.bodies, 0, 4), proof);

        proof = _proof(b.nodes, 0, 2);
        IWorkBatches.LeafBody[] memory two = _slice(b.bodies, 0, 2);
        vm.prank(w1);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.claim(b.ref, 0, 2, two, proof); // the right leaves at the wrong positions

        vm.prank(w1);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.claim(b.ref, 0, 0, two, _proof(b.nodes, 0, 3)); // a proof of another range

        two[1].samples = 6; // a claim for more samples than signed: the signature no longer matches
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 1));
        wb.claim(b.ref, 0, 0, two, _proof(b.nodes, 0, 2));

        // a run past the batch's count
        two[1].samples = 5;
        vm.prank(w1);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.claim(b.ref, 0, 7, two, _proof(b.nodes, 6, 2));
    }

    /// Another worker's leaves, a leaf signed by another key, or for another deployment (another domain).
    function test_aBadOrForeignSignatureIsRefused() public {
        Batch memory b = _batch(1, 0, 2, 0, 2, "a");
        _post(b);
        _pastWindow();
        // w1 claims w2's leaves: they are w2's signatures, not w1's
        IWorkBatches.LeafBody[] memory theirs = _slice(b.bodies, 2, 2);
        bytes32[] memory proof = _proof(b.nodes, 2, 2);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));
        wb.claim(b.ref, 0, 2, theirs, proof);

        // a leaf signed for another WorkBatches deployment on this chain
        WorkBatches other = new WorkBatches(pools);
        IWorkBatches.LeafBody[] memory one = new IWorkBatches.LeafBody[](1);
        one[0] = b.bodies[0];
        (one[0].r, one[0].vs) =
            _sign(k1, other.leafDigest(poolId, 1, 0, w1, one[0].rolloutDigest, one[0].step, one[0].samples));
        bytes32[] memory nodes = new bytes32[](1);
        nodes[0] = keccak256(
            abi.encode(wb.leafDigest(poolId, 1, 0, w1, one[0].rolloutDigest, 0, 5), one[0].r, one[0].vs)
        );
        IWorkBatches.BatchRef memory ref = IWorkBatches.BatchRef(poolId, 1, 1, nodes[0], keccak256("x"));
        vm.prank(w1);
        wb.postBatch(ref);
        _pastWindow();
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));
        wb.claim(ref, 0, 0, one, new bytes32[](0));
    }

    /// A leaf signed for another pool, another epoch or another chain does not verify here.
    function test_aLeafOfAnotherPoolEpochOrChainIsRefused() public {
        IWorkBatches.LeafBody[] memory one = new IWorkBatches.LeafBody[](1);
        bytes32 digest = keccak256("file");
        bytes32[3] memory foreign = [
            wb.leafDigest(poolId + 1, 1, 0, w1, digest, 0, 5), // another pool
            wb.leafDigest(poolId, 2, 0, w1, digest, 0, 5), // another epoch
            bytes32(0)
        ];
        uint256 chain = block.chainid;
        vm.chainId(chain + 1);
        foreign[2] = wb.leafDigest(poolId, 1, 0, w1, digest, 0, 5); // another chain
        vm.chainId(chain);
        for (uint256 i; i < 3; ++i) {
            one[0] = IWorkBatches.LeafBody(digest, 0, 5, 0, 0);
            (one[0].r, one[0].vs) = _sign(k1, foreign[i]);
            bytes32 node = keccak256(abi.encode(wb.leafDigest(poolId, 1, 0, w1, digest, 0, 5), one[0].r, one[0].vs));
            IWorkBatches.BatchRef memory ref =
                IWorkBatches.BatchRef(poolId, 1, 1, node, keccak256(abi.encode("list", i)));
            wb.postBatch(ref);
            vm.warp(block.timestamp + WINDOW + 1);
            vm.prank(w1);
            vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));
            wb.claim(ref, 0, 0, one, new bytes32[](0));
            vm.warp(block.timestamp - WINDOW - 1);
        }
    }

    /// Leaves of an address that is not a member of the pool, or a member without a bond here, are not paid.
    function test_nonMembersLeavesAreNotPaid() public {
        (address outsider, uint256 ko) = makeAddrAndKey("outsider");
        IWorkBatches.LeafBody[] memory one = new IWorkBatches.LeafBody[](1);
        one[0] = _body(ko, outsider, poolId, 1, 0, 5);
        bytes32 node = keccak256(
            abi.encode(wb.leafDigest(poolId, 1, 0, outsider, one[0].rolloutDigest, 0, 5), one[0].r, one[0].vs)
        );
        IWorkBatches.BatchRef memory ref = IWorkBatches.BatchRef(poolId, 1, 1, node, keccak256("l"));
        wb.postBatch(ref);
        _pastWindow();
        vm.prank(outsider);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotMember.selector, poolId, outsider));
        wb.claim(ref, 0, 0, one, new bytes32[](0));

        // a member that never locked a bond here
        vm.prank(admin);
        token.mint(outsider, 1_000 ether);
        vm.startPrank(outsider);
        token.approve(address(stake), type(uint256).max);
        stake.bond(MIN_STAKE);
        pools.allocate(poolId, MIN_STAKE);
        pools.joinPool(poolId);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotBonded.selector, outsider, 1));
        wb.claim(ref, 0, 0, one, new bytes32[](0));
        vm.stopPrank();

        // a member ejected by the owner is not paid either
        vm.prank(owner);
        pools.ejectWorker(poolId, w1);
        Batch memory b = _batch(1, 0, 1, 0, 0, "e");
        _post(b);
        _pastWindow();
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotMember.selector, poolId, w1));
        wb.claim(b.ref, 0, 0, b.bodies, _proof(b.nodes, 0, 1));
    }

    function test_budgetExhaustionRefusesTheClaimUntilFunded() public {
        Batch memory b = _batch(1, 0, 4, 0, 0, "a");
        _post(b);
        _pastWindow();
        assertEq(wb.budget(poolId), FUNDED);
        Batch memory big = _batch(1, 4, 60, 0, 0, "big"); // 60 × 5 samples = 300 tokens
        _post(big);
        _pastWindow();
        _claim(w1, b, 0, 0, 4);
        // the owner takes what is left back after retiring; then a budget smaller than a claim refuses it
        vm.prank(owner);
        wb.retire(poolId);
        vm.warp(block.timestamp + WINDOW + wb.CLAIM_GRACE() + 1);
        vm.prank(owner);
        wb.reclaim(poolId);
        vm.prank(owner);
        wb.fund(poolId, 100 ether);
        bytes32[] memory proof = _proof(big.nodes, 0, 60);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.InsufficientBudget.selector, 300 ether, 100 ether));
        wb.claim(big.ref, 4, 0, big.bodies, proof);
        assertEq(_claim(w1, big, 4, 0, 20), 100 ether);
        assertEq(wb.budget(poolId), 0);
    }

    // ---------------------------------------------------------------- disputes

    /// A validator challenges one leaf inside the window: final, the worker loses slashAmount (the validator its
    /// bounty share), the leaf is never paid, and the worker's other leaves are (its claim skips the voided counter).
    function test_aChallengeInsideTheWindowExcludesTheLeafAndSettlesExactly() public {
        Batch memory b = _batch(1, 0, 4, 0, 2, "a");
        _post(b);
        uint256 vBefore = token.balanceOf(validator);
        uint256 tBefore = token.balanceOf(treasury);
        vm.prank(validator);
        wb.challenge(b.ref, w1, 1, 1, b.bodies[1], _proof(b.nodes, 1, 1), 7, keccak256("evidence"));
        assertEq(wb.getBond(poolId, w1).locked, W_BOND - SLASH);
        assertEq(stake.lockedOf(address(wb), w1), W_BOND - SLASH);
        assertEq(token.balanceOf(validator) - vBefore, SLASH * BOUNTY_BPS / 10_000);
        assertEq(token.balanceOf(treasury) - tBefore, SLASH - SLASH * BOUNTY_BPS / 10_000);
        assertTrue(wb.isVoid(poolId, w1, 1, 1));
        // the same leaf again, or the same counter by a duplicate proof: once only
        vm.prank(validator);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.AlreadyVoided.selector, 1));
        wb.challenge(b.ref, w1, 1, 1, b.bodies[1], _proof(b.nodes, 1, 1), 7, keccak256("evidence"));

        _pastWindow();
        bytes32[] memory proof = _proof(b.nodes, 0, 4);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotPayable.selector, 1));
        wb.claim(b.ref, 0, 0, _slice(b.bodies, 0, 4), proof);
        assertEq(_claim(w1, b, 0, 0, 1), 5 ether);
        assertEq(_claim(w1, b, 2, 2, 2), 10 ether); // counter 1 is skipped: it is void
        assertEq(_claim(w2, b, 0, 4, 2), 10 ether);
        assertEq(wb.budget(poolId), FUNDED - 25 ether);
    }

    function test_challengesOutsideTheRulesAreRefused() public {
        Batch memory b = _batch(1, 0, 2, 0, 0, "a");
        _post(b);
        bytes32[] memory proof = _proof(b.nodes, 0, 1);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotPoolValidator.selector, poolId, stranger));
        wb.challenge(b.ref, w1, 0, 0, b.bodies[0], proof, 1, 0);
        // a leaf the worker never signed: a validator cannot slash it for one
        IWorkBatches.LeafBody memory forged =
            IWorkBatches.LeafBody(keccak256("forged"), 0, 5, b.bodies[0].r, b.bodies[0].vs);
        vm.prank(validator);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));
        wb.challenge(b.ref, w1, 0, 0, forged, proof, 1, 0);
        // the right leaf at the wrong position
        vm.prank(validator);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.challenge(b.ref, w1, 0, 1, b.bodies[0], _proof(b.nodes, 1, 1), 1, 0);
        // the owner may not challenge (a validator of its own pool)
        vm.prank(owner);
        pools.setValidator(poolId, owner, true);
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.ChallengerNotIndependent.selector, owner));
        wb.challenge(b.ref, w1, 0, 0, b.bodies[0], proof, 1, 0);
        // after the window
        _pastWindow();
        bytes32 id = wb.batchIdOf(b.ref);
        vm.prank(validator);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.WindowClosed.selector, id));
        wb.challenge(b.ref, w1, 0, 0, b.bodies[0], proof, 1, 0);
    }

    /// Two different signed leaves with one (worker, epoch, counter): anyone but the worker proves it; the worker
    /// loses slashAmount (the prover the bounty share) and the counter is never paid.
    function test_aDuplicateCounterIsAFraudProofThatSlashes() public {
        IWorkBatches.LeafBody memory a = _body(k1, w1, poolId, 0, 3, 5);
        IWorkBatches.LeafBody memory b = _body(k1, w1, poolId, 0, 3, 6);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.ChallengerNotIndependent.selector, w1));
        wb.proveDuplicate(poolId, w1, 0, 3, a, b);
        vm.prank(stranger);
        vm.expectRevert(IWorkBatches.NotDuplicate.selector);
        wb.proveDuplicate(poolId, w1, 0, 3, a, a);
        IWorkBatches.LeafBody memory other = _body(k2, w2, poolId, 0, 3, 6);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 3));
        wb.proveDuplicate(poolId, w1, 0, 3, a, other);

        uint256 before = token.balanceOf(stranger);
        vm.prank(stranger);
        wb.proveDuplicate(poolId, w1, 0, 3, a, b);
        assertEq(wb.getBond(poolId, w1).locked, W_BOND - SLASH);
        assertEq(token.balanceOf(stranger) - before, SLASH * BOUNTY_BPS / 10_000);
        assertTrue(wb.isVoid(poolId, w1, 0, 3));
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.AlreadyVoided.selector, 3));
        wb.proveDuplicate(poolId, w1, 0, 3, a, b);
    }

    /// A validator voids a batch whose list is unavailable: nothing is paid from it; its leaves, posted again, are.
    function test_aVoidedBatchPaysNothing() public {
        Batch memory b = _batch(1, 0, 2, 0, 0, "a");
        bytes32 id = _post(b);
        vm.prank(validator);
        wb.voidBatch(b.ref);
        Batch memory again = _batch(1, 0, 2, 0, 0, "b");
        _post(again);
        _pastWindow();
        bytes32[] memory proof = _proof(b.nodes, 0, 2);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BatchIsVoid.selector, id));
        wb.claim(b.ref, 0, 0, b.bodies, proof);
        assertEq(_claim(w1, again, 0, 0, 2), 10 ether);
    }

    // ---------------------------------------------------------------- posting, parameters, bonds

    function test_postingRules() public {
        Batch memory b = _batch(1, 0, 2, 0, 0, "a");
        IWorkBatches.BatchRef memory r =
            IWorkBatches.BatchRef(b.ref.poolId, b.ref.epoch, 0, b.ref.root, b.ref.listDigest);
        vm.expectRevert(IWorkBatches.BadBatch.selector);
        wb.postBatch(r);
        r.count = wb.MAX_BATCH() + 1;
        vm.expectRevert(IWorkBatches.BadBatch.selector);
        wb.postBatch(r);
        r.count = 2;
        r.listDigest = 0;
        vm.expectRevert(IWorkBatches.BadBatch.selector);
        wb.postBatch(r);
        r.listDigest = b.ref.listDigest;
        r.epoch = 2; // not begun
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.EpochNotPostable.selector, 2));
        wb.postBatch(r);
        bytes32 id = _post(b);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BatchExists.selector, id));
        wb.postBatch(b.ref);
        // epoch 2 without its beacon, then epoch 1 two epochs late
        vm.warp(wb.genesisOf(poolId) + 2 * EPOCH);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.EpochNotPostable.selector, 2));
        wb.postBatch(r);
        wb.openEpoch(poolId);
        wb.postBatch(r);
        vm.warp(wb.genesisOf(poolId) + 3 * EPOCH);
        Batch memory late = _batch(1, 2, 1, 0, 0, "late");
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.EpochNotPostable.selector, 1));
        wb.postBatch(late.ref);
        // a worker posts its own batch: nobody's permission needed
        wb.openEpoch(poolId);
        Batch memory own = _batch(3, 0, 1, 0, 0, "own");
        vm.prank(w1);
        wb.postBatch(own.ref);
    }

    /// Each bound refused on its side (R1.23–R1.25), a second configure, a stranger, a court pool.
    function test_abusiveParamsAreRefused() public {
        uint256 pool2 = _createFundedPool(0);
        IWorkBatches.Params memory p = _batchParams();
        IComputePool.PoolParams memory pp = _params();
        p.epochLength = 59;
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadBatchParams.selector, 1));
        wb.check(p, pp);
        p.epochLength = 7 days + 1;
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadBatchParams.selector, 1));
        wb.check(p, pp);
        p = _batchParams();
        p.maxLeaves = 0;
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadBatchParams.selector, 2));
        wb.check(p, pp);
        p.maxLeaves = wb.MAX_LEAVES() + 1;
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadBatchParams.selector, 2));
        wb.check(p, pp);
        p = _batchParams();
        p.workerBond = W_BOND - 1;
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadBatchParams.selector, 3));
        wb.check(p, pp);
        // a window twice the epoch: four epochs' leaves may be open at once
        p.epochLength = WINDOW / 2;
        p.workerBond = SLASH * MAX_LEAVES * 4 - 1;
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadBatchParams.selector, 3));
        wb.check(p, pp);
        p.workerBond += 1;
        wb.check(p, pp);

        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotPoolOwner.selector, pool2, stranger));
        wb.configure(pool2, _batchParams());
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.AlreadyConfigured.selector, poolId));
        wb.configure(poolId, _batchParams());
    }

    /// A court pool (frozen to a judge) is refused at configure; one frozen after configure refuses posts' claims
    /// and challenges (its route through the court is the next step).
    function test_courtPoolsAreRefused() public {
        uint256 pool2 = _createFundedPool(0);
        vm.prank(owner);
        pools.freezeValidators(pool2, validator);
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.CourtPoolNotSupported.selector, pool2));
        wb.configure(pool2, _batchParams());

        Batch memory b = _batch(1, 0, 1, 0, 0, "a");
        _post(b);
        vm.prank(owner);
        pools.freezeValidators(poolId, validator);
        bytes32[] memory proof = _proof(b.nodes, 0, 1);
        vm.prank(validator);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.CourtPoolNotSupported.selector, poolId));
        wb.challenge(b.ref, w1, 0, 0, b.bodies[0], proof, 1, 0);
        _pastWindow();
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.CourtPoolNotSupported.selector, poolId));
        wb.claim(b.ref, 0, 0, b.bodies, proof);
    }

    /// A bond unlocks only once its last epoch's batches are past their windows; leaves after the exit are not paid.
    function test_bondExitWaitsForTheLastWindow() public {
        vm.prank(w1);
        wb.requestExit(poolId);
        uint64 at = wb.genesisOf(poolId) + 3 * EPOCH + WINDOW; // its last epoch is 1: batches of it until 2's end
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BondStillLocked.selector, at));
        wb.unlockBond(poolId);
        vm.warp(wb.genesisOf(poolId) + 2 * EPOCH);
        wb.openEpoch(poolId);
        Batch memory b = _batch(2, 0, 1, 0, 0, "a");
        _post(b);
        _pastWindow();
        bytes32[] memory proof = _proof(b.nodes, 0, 1);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotBonded.selector, w1, 2));
        wb.claim(b.ref, 0, 0, b.bodies, proof);
        vm.warp(at + 1);
        vm.prank(w1);
        wb.unlockBond(poolId);
        assertEq(stake.lockedOf(address(wb), w1), 0);
        assertEq(stake.bondedOf(w1), W_BOND);
    }

    /// A bond covers leaves from the epoch after its lock: a leaf posted before it was never at risk in its window.
    function test_aLeafOfTheBondsOwnEpochIsNotPaid() public {
        (address late, uint256 kl) = makeAddrAndKey("late");
        vm.prank(admin);
        token.mint(late, 20_000 ether);
        _member(late);
        IWorkBatches.LeafBody[] memory one = new IWorkBatches.LeafBody[](1);
        one[0] = _body(kl, late, poolId, 1, 0, 5);
        bytes32 node = keccak256(
            abi.encode(wb.leafDigest(poolId, 1, 0, late, one[0].rolloutDigest, 0, 5), one[0].r, one[0].vs)
        );
        IWorkBatches.BatchRef memory ref = IWorkBatches.BatchRef(poolId, 1, 1, node, keccak256("l"));
        wb.postBatch(ref);
        _pastWindow();
        vm.prank(late);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotBonded.selector, late, 1));
        wb.claim(ref, 0, 0, one, new bytes32[](0));
        assertEq(wb.getBond(poolId, late).firstEpoch, 2);
    }

    /// The owner reclaims the budget only after retiring and the claim grace; no batch is posted after retirement.
    function test_budgetIsReclaimedOnlyAfterTheGrace() public {
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotRetired.selector, poolId, 0));
        wb.reclaim(poolId);
        vm.prank(owner);
        wb.retire(poolId);
        Batch memory b = _batch(1, 0, 1, 0, 0, "a");
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.EpochNotPostable.selector, 1));
        wb.postBatch(b.ref);
        uint64 at = uint64(block.timestamp) + WINDOW + wb.CLAIM_GRACE();
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotRetired.selector, poolId, at));
        wb.reclaim(poolId);
        vm.warp(at + 1);
        uint256 before = token.balanceOf(owner);
        vm.prank(owner);
        wb.reclaim(poolId);
        assertEq(token.balanceOf(owner) - before, FUNDED);
    }

    /// A token that moves another amount than asked (a fee on transfer) cannot fund a budget it would not back.
    function test_fundRefusesAFeeOnTransferToken() public {
        FeeToken fee = new FeeToken();
        ComputePool feePools = new ComputePool(fee, new StakeManager(fee, treasury, UNBONDING_DELAY, admin));
        WorkBatches feeBatches = new WorkBatches(feePools);
        fee.mint(owner, 100 ether);
        vm.startPrank(owner);
        uint256 id = feePools.createPool(_params());
        feeBatches.configure(id, _batchParams());
        fee.approve(address(feeBatches), type(uint256).max);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.TransferAmountMismatch.selector, 100 ether));
        feeBatches.fund(id, 100 ether);
        vm.stopPrank();
    }

    /// A range proof of every run of a 13-leaf batch (odd levels, padding) verifies, at every position.
    function test_everyRangeOfAnOddBatchVerifies() public {
        Batch memory b = _batch(1, 0, 13, 0, 0, "odd");
        _post(b);
        _pastWindow();
        uint32 next;
        uint256[5] memory runs = [uint256(1), 4, 3, 2, 3];
        for (uint256 i; i < runs.length; ++i) {
            _claim(w1, b, next, next, runs[i]);
            next += uint32(runs[i]);
        }
        assertEq(next, 13);
        assertEq(wb.budget(poolId), FUNDED - 65 ether);
    }
}
