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
/// signed runs, batches, optimistic acceptance, challenges, duplicate-counter fraud proofs and range-proof claims.
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

    // ---------------------------------------------------------------- leaves, runs and trees

    function _sign(uint256 key, bytes32 digest) internal pure returns (bytes32 r, bytes32 vs) {
        (uint8 v, bytes32 r_, bytes32 s) = vm.sign(key, digest);
        r = r_;
        vs = bytes32(uint256(s) | (uint256(v - 27) << 255));
    }

    /// A run as a test holds it: its worker, its signed fields and its leaves with their hashes.
    struct Run {
        address w;
        IWorkBatches.SignedRun signed;
        IWorkBatches.LeafBody[] leaves;
        bytes32[] hashes;
    }

    /// `w`'s leaves of counters `first`..`first + n − 1` of `epoch`, `samples` each, contents tagged by `salt`.
    function _leaves(address w, uint32 epoch, uint32 first, uint256 n, uint32 samples, bytes32 salt)
        internal
        pure
        returns (IWorkBatches.LeafBody[] memory l)
    {
        l = new IWorkBatches.LeafBody[](n);
        for (uint256 i; i < n; ++i) {
            l[i] = IWorkBatches.LeafBody(keccak256(abi.encode("file", w, epoch, first + i, salt)), 0, samples);
        }
    }

    /// The run of `leaves` from counter `first` of `epoch`, signed with `key` for the pool.
    function _run(uint256 key, uint32 epoch, uint32 first, IWorkBatches.LeafBody[] memory leaves)
        internal
        view
        returns (Run memory r)
    {
        r.w = vm.addr(key);
        r.leaves = leaves;
        r.hashes = new bytes32[](leaves.length);
        for (uint256 i; i < leaves.length; ++i) {
            r.hashes[i] = keccak256(abi.encode(leaves[i]));
        }
        r.signed.firstCounter = first;
        r.signed.count = uint32(leaves.length);
        r.signed.leavesRoot = _rootOf(r.hashes);
        (r.signed.r, r.signed.vs) =
            _sign(key, wb.runDigest(poolId, epoch, first, r.signed.count, r.signed.leavesRoot));
    }

    function _nodeOf(uint32 epoch, IWorkBatches.SignedRun memory s) internal view returns (bytes32) {
        return keccak256(abi.encode(wb.runDigest(poolId, epoch, s.firstCounter, s.count, s.leavesRoot), s.r, s.vs));
    }

    /// The leaf of counter `counter` in run `r`, with its proof in the run.
    function _leafOf(Run memory r, uint32 counter) internal pure returns (IWorkBatches.RunLeaf memory x) {
        uint256 i = counter - r.signed.firstCounter;
        x = IWorkBatches.RunLeaf(r.signed, r.leaves[i], _proof(r.hashes, i, 1));
    }

    // ---------------------------------------------------------------- batches

    struct Batch {
        IWorkBatches.BatchRef ref;
        Run[] runs;
        bytes32[] nodes;
    }

    /// A batch of the runs `runs` of epoch `epoch`, its list digest from `salt`.
    function _batchOf(uint32 epoch, Run[] memory runs, bytes32 salt) internal view returns (Batch memory b) {
        b.runs = runs;
        b.nodes = new bytes32[](runs.length);
        for (uint256 i; i < runs.length; ++i) {
            b.nodes[i] = _nodeOf(epoch, runs[i].signed);
        }
        b.ref = IWorkBatches.BatchRef({
            poolId: poolId,
            epoch: epoch,
            count: uint16(runs.length),
            root: _rootOf(b.nodes),
            listDigest: keccak256(abi.encode(salt))
        });
    }

    /// A batch of w1's run of `n1` leaves from counter `c1`, then (if `n2` > 0) w2's of `n2` from `c2`, epoch
    /// `epoch`, 5 samples each.
    function _batch(uint32 epoch, uint32 c1, uint256 n1, uint32 c2, uint256 n2, bytes32 salt)
        internal
        view
        returns (Batch memory)
    {
        Run[] memory runs = new Run[](n2 == 0 ? 1 : 2);
        runs[0] = _run(k1, epoch, c1, _leaves(w1, epoch, c1, n1, 5, 0));
        if (n2 != 0) runs[1] = _run(k2, epoch, c2, _leaves(w2, epoch, c2, n2, 5, 0));
        return _batchOf(epoch, runs, salt);
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

    /// The run at `at` of the batch's owner claims its counters `first`..`first + n − 1`.
    function _claim(Batch memory b, uint256 at, uint32 first, uint256 n) internal returns (uint256) {
        Run memory r = b.runs[at];
        uint256 i = first - r.signed.firstCounter;
        vm.prank(r.w);
        return wb.claim(
            b.ref, at, _proof(b.nodes, at, 1), r.signed, first, _slice(r.leaves, i, n), _proof(r.hashes, i, n)
        );
    }

    /// `caller` claims as `_claim`, expecting the revert `err`.
    function _claimReverts(address caller, Batch memory b, uint256 at, uint32 first, uint256 n, bytes memory err)
        internal
    {
        Run memory r = b.runs[at];
        uint256 i = first - r.signed.firstCounter;
        bytes32[] memory batchProof = _proof(b.nodes, at, 1);
        IWorkBatches.LeafBody[] memory leaves = _slice(r.leaves, i, n);
        bytes32[] memory runProof = _proof(r.hashes, i, n);
        vm.prank(caller);
        vm.expectRevert(err);
        wb.claim(b.ref, at, batchProof, r.signed, first, leaves, runProof);
    }

    /// The validator challenges counter `counter` of the batch's run at `at`, naming `worker`.
    function _challenge(Batch memory b, uint256 at, address worker, uint32 counter) internal {
        IWorkBatches.RunLeaf memory x = _leafOf(b.runs[at], counter);
        bytes32[] memory proof = _proof(b.nodes, at, 1);
        vm.prank(validator);
        wb.challenge(b.ref, at, proof, worker, counter, x, 7, keccak256("evidence"));
    }

    function _pastWindow() internal {
        vm.warp(block.timestamp + WINDOW + 1);
    }
}

contract WorkBatchesTest is BatchesBase {
    // ---------------------------------------------------------------- the path where nobody disputes

    /// Two workers' runs in one batch are accepted once its window closes; each claims its run by one signature
    /// and one range proof and is paid rewardPerSample × samples from the budget.
    function test_acceptedAfterTheWindowAndClaimedByOneRangeProofEach() public {
        Batch memory b = _batch(1, 0, 5, 0, 3, "a");
        _post(b);
        _pastWindow();
        uint256 before1 = token.balanceOf(w1);
        assertEq(_claim(b, 0, 0, 5), 25 ether);
        assertEq(_claim(b, 1, 0, 3), 15 ether);
        assertEq(token.balanceOf(w1) - before1, 25 ether);
        assertEq(wb.budget(poolId), FUNDED - 40 ether);
        (uint32 e, uint32 c) = wb.nextClaim(poolId, w1);
        assertEq(e, 1);
        assertEq(c, 5);
    }

    /// A worker claims its run in parts (partial claims), and its next run, in a later batch of the same epoch,
    /// from where it stopped.
    function test_partialClaimsRunOnAcrossRunsAndBatches() public {
        Batch memory b = _batch(1, 0, 6, 0, 0, "a");
        _post(b);
        Batch memory b2 = _batch(1, 6, 3, 0, 0, "b");
        _post(b2);
        _pastWindow();
        _claim(b, 0, 0, 2);
        _claim(b, 0, 2, 1);
        _claim(b, 0, 3, 3);
        assertEq(_claim(b2, 0, 6, 3), 15 ether);
    }

    /// A worker's leaves scattered over several runs of one batch (between another worker's) are claimed run by run.
    function test_scatteredRunsAreClaimedEach() public {
        Run[] memory runs = new Run[](5);
        runs[0] = _run(k1, 1, 0, _leaves(w1, 1, 0, 2, 5, 0));
        runs[1] = _run(k2, 1, 0, _leaves(w2, 1, 0, 3, 5, 0));
        runs[2] = _run(k1, 1, 2, _leaves(w1, 1, 2, 1, 5, 0));
        runs[3] = _run(k2, 1, 3, _leaves(w2, 1, 3, 1, 5, 0));
        runs[4] = _run(k1, 1, 3, _leaves(w1, 1, 3, 4, 5, 0));
        Batch memory b = _batchOf(1, runs, "s");
        _post(b);
        _pastWindow();
        assertEq(_claim(b, 0, 0, 2), 10 ether);
        assertEq(_claim(b, 1, 0, 3), 15 ether);
        assertEq(_claim(b, 2, 2, 1), 5 ether);
        assertEq(_claim(b, 3, 3, 1), 5 ether);
        assertEq(_claim(b, 4, 3, 4), 20 ether);
        (, uint32 c) = wb.nextClaim(poolId, w1);
        assertEq(c, 7);
    }

    function test_aClaimBeforeTheWindowClosesIsRefused() public {
        Batch memory b = _batch(1, 0, 4, 0, 0, "a");
        bytes32 id = _post(b);
        vm.warp(block.timestamp + WINDOW);
        _claimReverts(
            w1, b, 0, 0, 4, abi.encodeWithSelector(IWorkBatches.WindowOpen.selector, id, uint64(block.timestamp))
        );
    }

    /// No counter is paid twice: not by the same claim again, nor from another batch holding the same run, nor by
    /// another run the worker signed over the same counters.
    function test_aLeafIsNeverPaidTwice() public {
        Batch memory b = _batch(1, 0, 4, 0, 0, "a");
        _post(b);
        Batch memory again = _batch(1, 0, 4, 0, 0, "b"); // the same run, another list digest
        _post(again);
        Run[] memory runs = new Run[](1);
        runs[0] = _run(k1, 1, 2, _leaves(w1, 1, 2, 3, 5, 0)); // an overlapping run: counters 2..4
        Batch memory overlap = _batchOf(1, runs, "c");
        _post(overlap);
        _pastWindow();
        _claim(b, 0, 0, 4);
        _claimReverts(w1, b, 0, 0, 4, abi.encodeWithSelector(IWorkBatches.NotNextCounter.selector, 1, 0, 4));
        _claimReverts(w1, again, 0, 2, 2, abi.encodeWithSelector(IWorkBatches.NotNextCounter.selector, 1, 2, 4));
        _claimReverts(w1, overlap, 0, 2, 3, abi.encodeWithSelector(IWorkBatches.NotNextCounter.selector, 1, 2, 4));
        assertEq(_claim(overlap, 0, 4, 1), 5 ether); // its counter 4 is new
    }

    /// Counters are paid in order (R3.11): a claim that skips an unvoided counter, or goes back to an epoch before
    /// one already claimed, is refused.
    function test_aGapOrAnEarlierEpochIsRefused() public {
        Batch memory b = _batch(1, 0, 4, 0, 0, "a");
        _post(b);
        _pastWindow();
        _claimReverts(w1, b, 0, 1, 3, abi.encodeWithSelector(IWorkBatches.NotNextCounter.selector, 1, 1, 0));

        vm.warp(wb.genesisOf(poolId) + 2 * EPOCH);
        wb.openEpoch(poolId);
        Batch memory later = _batch(2, 0, 2, 0, 0, "b");
        _post(later);
        _pastWindow();
        _claim(later, 0, 0, 2);
        _claimReverts(
            w1, b, 0, 0, 4, abi.encodeWithSelector(IWorkBatches.NotNextCounter.selector, 1, 0, type(uint32).max)
        );
    }

    // ---------------------------------------------------------------- refusals of bad claims

    /// A tampered sibling (in the batch or in the run), a run at another position, leaves at other counters or with
    /// changed samples do not hash to the roots; a range outside the run is refused.
    function test_aBadProofIsRefused() public {
        Batch memory b = _batch(1, 0, 4, 0, 4, "a");
        _post(b);
        _pastWindow();
        Run memory r = b.runs[0];
        bytes32[] memory batchProof = _proof(b.nodes, 0, 1);
        bytes32[] memory runProof = _proof(r.hashes, 0, 4);
        batchProof[0] = bytes32(uint256(batchProof[0]) ^ 1);
        vm.prank(w1);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.claim(b.ref, 0, batchProof, r.signed, 0, r.leaves, runProof);

        batchProof = _proof(b.nodes, 0, 1);
        vm.prank(w1);
        vm.expectRevert(IWorkBatches.BadProof.selector); // the run at another position
        wb.claim(b.ref, 1, _proof(b.nodes, 1, 1), r.signed, 0, r.leaves, runProof);

        runProof = _proof(r.hashes, 0, 2);
        runProof[0] = bytes32(uint256(runProof[0]) ^ 1);
        IWorkBatches.LeafBody[] memory two = _slice(r.leaves, 0, 2);
        vm.prank(w1);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.claim(b.ref, 0, batchProof, r.signed, 0, two, runProof);

        two = _slice(r.leaves, 2, 2); // leaves 2, 3 claimed as counters 0, 1
        vm.prank(w1);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.claim(b.ref, 0, batchProof, r.signed, 0, two, _proof(r.hashes, 0, 2));

        two = _slice(r.leaves, 0, 2);
        vm.prank(w1);
        vm.expectRevert(IWorkBatches.BadProof.selector); // a proof of another range
        wb.claim(b.ref, 0, batchProof, r.signed, 0, two, _proof(r.hashes, 0, 3));

        two[1].samples = 6; // more samples than signed
        vm.prank(w1);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.claim(b.ref, 0, batchProof, r.signed, 0, two, _proof(r.hashes, 0, 2));

        two[1].samples = 5; // counters 3, 4: past the run's end
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadRun.selector, 0, 4));
        wb.claim(b.ref, 0, batchProof, r.signed, 3, two, _proof(r.hashes, 2, 2));
    }

    /// Another worker's run, a run signed by another key, or for another deployment (another domain).
    function test_aBadOrForeignSignatureIsRefused() public {
        Batch memory b = _batch(1, 0, 2, 0, 2, "a");
        _post(b);
        _pastWindow();
        // w1 claims w2's run: its signature is w2's
        _claimReverts(w1, b, 1, 0, 2, abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));

        // a run signed for another WorkBatches deployment on this chain, posted here under its node
        WorkBatches other = new WorkBatches(pools);
        Run[] memory runs = new Run[](1);
        runs[0] = _run(k1, 1, 0, _leaves(w1, 1, 0, 2, 5, "o"));
        IWorkBatches.SignedRun memory s = runs[0].signed;
        (s.r, s.vs) = _sign(k1, other.runDigest(poolId, 1, 0, 2, s.leavesRoot));
        runs[0].signed = s;
        Batch memory foreign = _batchOf(1, runs, "x");
        wb.postBatch(foreign.ref);
        _pastWindow();
        _claimReverts(w1, foreign, 0, 0, 2, abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));
    }

    /// A run signed for another pool, another epoch or another chain does not verify here.
    function test_aRunOfAnotherPoolEpochOrChainIsRefused() public {
        IWorkBatches.LeafBody[] memory leaves = _leaves(w1, 1, 0, 1, 5, 0);
        Run[] memory runs = new Run[](1);
        runs[0] = _run(k1, 1, 0, leaves);
        bytes32 root = runs[0].signed.leavesRoot;
        bytes32[3] memory foreign = [
            wb.runDigest(poolId + 1, 1, 0, 1, root), // another pool
            wb.runDigest(poolId, 2, 0, 1, root), // another epoch
            bytes32(0)
        ];
        uint256 chain = block.chainid;
        vm.chainId(chain + 1);
        foreign[2] = wb.runDigest(poolId, 1, 0, 1, root); // another chain
        vm.chainId(chain);
        for (uint256 i; i < 3; ++i) {
            (runs[0].signed.r, runs[0].signed.vs) = _sign(k1, foreign[i]);
            Batch memory b = _batchOf(1, runs, keccak256(abi.encode("list", i)));
            wb.postBatch(b.ref);
            vm.warp(block.timestamp + WINDOW + 1);
            _claimReverts(w1, b, 0, 0, 1, abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));
            vm.warp(block.timestamp - WINDOW - 1);
        }
    }

    /// A batcher cannot post leaves the worker never signed: a run under a forged signature (another key's, or
    /// the worker's signature of another run) is neither paid nor slashed.
    function test_aBatcherCannotPostLeavesTheWorkerNeverSigned() public {
        Batch memory b = _batch(1, 0, 3, 0, 0, "a");
        Run[] memory runs = new Run[](2);
        runs[0] = _run(k2, 1, 0, _leaves(w1, 1, 0, 3, 9, "forged")); // a stranger's key signs w1's counters
        runs[1] = runs[0];
        runs[1].signed.r = b.runs[0].signed.r; // w1's real signature, over another run
        runs[1].signed.vs = b.runs[0].signed.vs;
        Batch memory forged = _batchOf(1, runs, "f");
        _post(forged);
        for (uint256 at; at < 2; ++at) {
            IWorkBatches.RunLeaf memory x = _leafOf(forged.runs[at], 0);
            bytes32[] memory proof = _proof(forged.nodes, at, 1);
            vm.prank(validator);
            vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));
            wb.challenge(forged.ref, at, proof, w1, 0, x, 1, 0);
        }
        _pastWindow();
        for (uint256 at; at < 2; ++at) {
            _claimReverts(w1, forged, at, 0, 3, abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));
        }
        assertEq(wb.getBond(poolId, w1).locked, W_BOND);
    }

    /// A leaf whose `step` word has bits above its type is refused even when the worker signed a root over those
    /// bytes: the contract hashes only canonical leaves (what every off-chain reader of the list decodes).
    function test_aLeafWithADirtyWordIsRefused() public {
        bytes32 digest = keccak256("dirty");
        bytes32[] memory hashes = new bytes32[](1);
        hashes[0] = keccak256(abi.encode(digest, uint256(1) << 64 | 2, uint256(5)));
        Run[] memory runs = new Run[](1);
        runs[0].w = w1;
        runs[0].hashes = hashes;
        runs[0].leaves = new IWorkBatches.LeafBody[](1);
        runs[0].leaves[0] = IWorkBatches.LeafBody(digest, 2, 5);
        runs[0].signed = IWorkBatches.SignedRun(0, 1, hashes[0], 0, 0);
        (runs[0].signed.r, runs[0].signed.vs) = _sign(k1, wb.runDigest(poolId, 1, 0, 1, hashes[0]));
        Batch memory b = _batchOf(1, runs, "dirty");
        _post(b);
        _pastWindow();
        bytes memory data = abi.encodeCall(
            wb.claim, (b.ref, 0, _proof(b.nodes, 0, 1), runs[0].signed, 0, runs[0].leaves, new bytes32[](0))
        );
        // the leaf is the word after the one and only copy of its rollout digest: dirty its step there
        uint256 at;
        for (uint256 i = 4; i + 32 <= data.length; i += 32) {
            bytes32 word;
            assembly {
                word := mload(add(add(data, 0x20), i))
            }
            if (word == digest) at = i + 32;
        }
        assertGt(at, 0);
        data[at + 23] = 0x01; // bit 64 of the step word
        vm.prank(w1);
        (bool ok,) = address(wb).call(data);
        assertFalse(ok);
        // the canonical leaf does not hash to the signed root
        _claimReverts(w1, b, 0, 0, 1, abi.encodeWithSelector(IWorkBatches.BadProof.selector));
    }

    /// A run of no leaf or of more than MAX_LEAVES is refused, signed or not.
    function test_anEmptyOrOversizedRunIsRefused() public {
        Run[] memory runs = new Run[](1);
        runs[0] = _run(k1, 1, 0, _leaves(w1, 1, 0, 1, 5, 0));
        uint32[2] memory counts = [uint32(0), wb.MAX_LEAVES() + 1];
        for (uint256 i; i < 2; ++i) {
            IWorkBatches.SignedRun memory s = runs[0].signed;
            s.count = counts[i];
            (s.r, s.vs) = _sign(k1, wb.runDigest(poolId, 1, 0, s.count, s.leavesRoot));
            runs[0].signed = s;
            Batch memory b = _batchOf(1, runs, keccak256(abi.encode("size", i)));
            _post(b);
            vm.warp(block.timestamp + WINDOW + 1);
            _claimReverts(w1, b, 0, 0, 1, abi.encodeWithSelector(IWorkBatches.BadRun.selector, 0, counts[i]));
            vm.warp(block.timestamp - WINDOW - 1);
        }
    }

    /// Leaves of an address that is not a member of the pool, or a member without a bond here, are not paid.
    function test_nonMembersLeavesAreNotPaid() public {
        (address outsider, uint256 ko) = makeAddrAndKey("outsider");
        Run[] memory runs = new Run[](1);
        runs[0] = _run(ko, 1, 0, _leaves(outsider, 1, 0, 1, 5, 0));
        Batch memory b = _batchOf(1, runs, "l");
        wb.postBatch(b.ref);
        _pastWindow();
        _claimReverts(outsider, b, 0, 0, 1, abi.encodeWithSelector(IWorkBatches.NotMember.selector, poolId, outsider));

        // a member that never locked a bond here
        vm.prank(admin);
        token.mint(outsider, 1_000 ether);
        vm.startPrank(outsider);
        token.approve(address(stake), type(uint256).max);
        stake.bond(MIN_STAKE);
        pools.allocate(poolId, MIN_STAKE);
        pools.joinPool(poolId);
        vm.stopPrank();
        _claimReverts(outsider, b, 0, 0, 1, abi.encodeWithSelector(IWorkBatches.NotBonded.selector, outsider, 1));

        // a member ejected by the owner is not paid either
        vm.prank(owner);
        pools.ejectWorker(poolId, w1);
        Batch memory e = _batch(1, 0, 1, 0, 0, "e");
        _post(e);
        _pastWindow();
        _claimReverts(w1, e, 0, 0, 1, abi.encodeWithSelector(IWorkBatches.NotMember.selector, poolId, w1));
    }

    function test_budgetExhaustionRefusesTheClaimUntilFunded() public {
        Batch memory b = _batch(1, 0, 4, 0, 0, "a");
        _post(b);
        _pastWindow();
        assertEq(wb.budget(poolId), FUNDED);
        Batch memory big = _batch(1, 4, 60, 0, 0, "big"); // 60 × 5 samples = 300 tokens
        _post(big);
        _pastWindow();
        _claim(b, 0, 0, 4);
        // the owner takes what is left back after retiring; then a budget smaller than a claim refuses it
        vm.prank(owner);
        wb.retire(poolId);
        vm.warp(block.timestamp + WINDOW + wb.CLAIM_GRACE() + 1);
        vm.prank(owner);
        wb.reclaim(poolId);
        vm.prank(owner);
        wb.fund(poolId, 100 ether);
        _claimReverts(
            w1, big, 0, 4, 60, abi.encodeWithSelector(IWorkBatches.InsufficientBudget.selector, 300 ether, 100 ether)
        );
        assertEq(_claim(big, 0, 4, 20), 100 ether);
        assertEq(wb.budget(poolId), 0);
    }

    // ---------------------------------------------------------------- disputes

    /// A validator challenges one leaf inside the window by its proofs in the run and the batch: final, the run's
    /// signer loses slashAmount (the validator its bounty share), the leaf is never paid, and the worker's other
    /// leaves are (its claims skip the voided counter).
    function test_aChallengeInsideTheWindowExcludesTheLeafAndSettlesExactly() public {
        Batch memory b = _batch(1, 0, 4, 0, 2, "a");
        _post(b);
        uint256 vBefore = token.balanceOf(validator);
        uint256 tBefore = token.balanceOf(treasury);
        _challenge(b, 0, w1, 1);
        assertEq(wb.getBond(poolId, w1).locked, W_BOND - SLASH);
        assertEq(stake.lockedOf(address(wb), w1), W_BOND - SLASH);
        assertEq(token.balanceOf(validator) - vBefore, SLASH * BOUNTY_BPS / 10_000);
        assertEq(token.balanceOf(treasury) - tBefore, SLASH - SLASH * BOUNTY_BPS / 10_000);
        assertTrue(wb.isVoid(poolId, w1, 1, 1));
        // the same leaf again: once only
        IWorkBatches.RunLeaf memory x = _leafOf(b.runs[0], 1);
        bytes32[] memory proof = _proof(b.nodes, 0, 1);
        vm.prank(validator);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.AlreadyVoided.selector, 1));
        wb.challenge(b.ref, 0, proof, w1, 1, x, 7, keccak256("evidence"));

        _pastWindow();
        _claimReverts(w1, b, 0, 0, 4, abi.encodeWithSelector(IWorkBatches.NotPayable.selector, 1));
        assertEq(_claim(b, 0, 0, 1), 5 ether);
        _claimReverts(w1, b, 0, 1, 3, abi.encodeWithSelector(IWorkBatches.NotPayable.selector, 1));
        assertEq(_claim(b, 0, 2, 2), 10 ether); // counter 1 is skipped: it is void
        assertEq(_claim(b, 1, 0, 2), 10 ether);
        assertEq(wb.budget(poolId), FUNDED - 25 ether);
    }

    function test_challengesOutsideTheRulesAreRefused() public {
        Batch memory b = _batch(1, 0, 2, 0, 2, "a");
        _post(b);
        bytes32[] memory proof = _proof(b.nodes, 0, 1);
        IWorkBatches.RunLeaf memory x = _leafOf(b.runs[0], 0);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.NotPoolValidator.selector, poolId, stranger));
        wb.challenge(b.ref, 0, proof, w1, 0, x, 1, 0);
        // a leaf the worker never signed (not in its run): a validator cannot slash it for one
        IWorkBatches.RunLeaf memory forged = _leafOf(b.runs[0], 0);
        forged.leaf.rolloutDigest = keccak256("forged");
        vm.prank(validator);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.challenge(b.ref, 0, proof, w1, 0, forged, 1, 0);
        // the leaf at another counter of its run, or a counter outside the run
        vm.prank(validator);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.challenge(b.ref, 0, proof, w1, 1, x, 1, 0);
        vm.prank(validator);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadRun.selector, 0, 2));
        wb.challenge(b.ref, 0, proof, w1, 2, x, 1, 0);
        // w1's run blamed on w2, or w2's run at w1's position
        vm.prank(validator);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));
        wb.challenge(b.ref, 0, proof, w2, 0, x, 1, 0);
        IWorkBatches.RunLeaf memory theirs = _leafOf(b.runs[1], 0);
        vm.prank(validator);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.challenge(b.ref, 0, proof, w2, 0, theirs, 1, 0);
        // the owner may not challenge (a validator of its own pool)
        vm.prank(owner);
        pools.setValidator(poolId, owner, true);
        vm.prank(owner);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.ChallengerNotIndependent.selector, owner));
        wb.challenge(b.ref, 0, proof, w1, 0, x, 1, 0);
        // after the window
        _pastWindow();
        bytes32 id = wb.batchIdOf(b.ref);
        vm.prank(validator);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.WindowClosed.selector, id));
        wb.challenge(b.ref, 0, proof, w1, 0, x, 1, 0);
    }

    /// Two signed runs that give one (worker, epoch, counter) different leaves — overlapping runs, posted or not:
    /// anyone but the worker proves it; the worker loses slashAmount (the prover the bounty share) and the counter
    /// is never paid. Runs that agree on the counter, another worker's run, or a counter outside a run prove nothing.
    function test_aDuplicateCounterIsAFraudProofThatSlashes() public {
        Run memory a = _run(k1, 0, 0, _leaves(w1, 0, 0, 5, 5, "a")); // counters 0..4
        Run memory agree = _run(k1, 0, 3, _leaves(w1, 0, 3, 4, 5, "a")); // counters 3..6, agreeing on 3, 4
        IWorkBatches.LeafBody[] memory other = _leaves(w1, 0, 3, 4, 5, "a");
        other[0].samples = 6; // counter 3 given another leaf
        Run memory b = _run(k1, 0, 3, other);
        IWorkBatches.RunLeaf memory la = _leafOf(a, 3);
        IWorkBatches.RunLeaf memory lb = _leafOf(b, 3);
        vm.prank(w1);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.ChallengerNotIndependent.selector, w1));
        wb.proveDuplicate(poolId, w1, 0, 3, la, lb);
        vm.startPrank(stranger);
        vm.expectRevert(IWorkBatches.NotDuplicate.selector);
        wb.proveDuplicate(poolId, w1, 0, 3, la, _leafOf(agree, 3));
        vm.expectRevert(IWorkBatches.NotDuplicate.selector);
        wb.proveDuplicate(poolId, w1, 0, 3, la, la);
        Run memory theirs = _run(k2, 0, 3, other);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 3));
        wb.proveDuplicate(poolId, w1, 0, 3, la, _leafOf(theirs, 3));
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));
        wb.proveDuplicate(poolId, w1, 1, 3, la, lb); // signed for epoch 0, not 1
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.BadRun.selector, 3, 4));
        wb.proveDuplicate(poolId, w1, 0, 2, _leafOf(a, 2), lb); // counter 2 is not in run b
        vm.stopPrank();

        uint256 before = token.balanceOf(stranger);
        vm.prank(stranger);
        wb.proveDuplicate(poolId, w1, 0, 3, la, lb);
        assertEq(wb.getBond(poolId, w1).locked, W_BOND - SLASH);
        assertEq(token.balanceOf(stranger) - before, SLASH * BOUNTY_BPS / 10_000);
        assertTrue(wb.isVoid(poolId, w1, 0, 3));
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.AlreadyVoided.selector, 3));
        wb.proveDuplicate(poolId, w1, 0, 3, la, lb);
    }

    /// A validator voids a batch whose list is unavailable: nothing is paid from it; its runs, posted again, are.
    function test_aVoidedBatchPaysNothing() public {
        Batch memory b = _batch(1, 0, 2, 0, 0, "a");
        bytes32 id = _post(b);
        vm.prank(validator);
        wb.voidBatch(b.ref);
        Batch memory again = _batch(1, 0, 2, 0, 0, "b");
        _post(again);
        _pastWindow();
        _claimReverts(w1, b, 0, 0, 2, abi.encodeWithSelector(IWorkBatches.BatchIsVoid.selector, id));
        assertEq(_claim(again, 0, 0, 2), 10 ether);
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
        IWorkBatches.RunLeaf memory x = _leafOf(b.runs[0], 0);
        vm.prank(validator);
        vm.expectRevert(abi.encodeWithSelector(IWorkBatches.CourtPoolNotSupported.selector, poolId));
        wb.challenge(b.ref, 0, proof, w1, 0, x, 1, 0);
        _pastWindow();
        _claimReverts(w1, b, 0, 0, 1, abi.encodeWithSelector(IWorkBatches.CourtPoolNotSupported.selector, poolId));
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
        _claimReverts(w1, b, 0, 0, 1, abi.encodeWithSelector(IWorkBatches.NotBonded.selector, w1, 2));
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
        Run[] memory runs = new Run[](1);
        runs[0] = _run(kl, 1, 0, _leaves(late, 1, 0, 1, 5, 0));
        Batch memory b = _batchOf(1, runs, "l");
        wb.postBatch(b.ref);
        _pastWindow();
        _claimReverts(late, b, 0, 0, 1, abi.encodeWithSelector(IWorkBatches.NotBonded.selector, late, 1));
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

    /// Range proofs of parts of a 13-leaf run (odd levels, padding) verify at every offset, and each run of a
    /// batch of 7 (an odd batch tree) verifies at its position.
    function test_everyRangeOfAnOddRunAndEveryPositionOfAnOddBatchVerify() public {
        Run[] memory runs = new Run[](7);
        runs[0] = _run(k1, 1, 0, _leaves(w1, 1, 0, 13, 5, 0));
        for (uint256 i = 1; i < 7; ++i) {
            runs[i] = _run(k2, 1, uint32(i - 1), _leaves(w2, 1, uint32(i - 1), 1, 5, 0));
        }
        Batch memory b = _batchOf(1, runs, "odd");
        _post(b);
        _pastWindow();
        uint32 next;
        uint256[5] memory parts = [uint256(1), 4, 3, 2, 3];
        for (uint256 i; i < parts.length; ++i) {
            _claim(b, 0, next, parts[i]);
            next += uint32(parts[i]);
        }
        assertEq(next, 13);
        for (uint256 i = 1; i < 7; ++i) {
            _claim(b, i, uint32(i - 1), 1);
        }
        assertEq(wb.budget(poolId), FUNDED - 95 ether);
    }

    /// The signature's other form (s → N − s, v flipped: ECDSA's malleability) does not verify: a run has one node.
    /// EIP-2098's compact form keeps s in 255 bits, so N − s (≥ 2^255 but for a ~4e-39 sliver of low s) loses its top
    /// bit there and recovers another address; the sliver's high s would be refused as such (OpenZeppelin's ECDSA).
    function test_theMalleatedFormOfARunsSignatureIsRefused() public {
        Run[] memory runs = new Run[](1);
        runs[0] = _run(k1, 1, 0, _leaves(w1, 1, 0, 2, 5, "m"));
        IWorkBatches.SignedRun memory s = runs[0].signed;
        uint256 n = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141;
        uint256 low = uint256(s.vs) & ((1 << 255) - 1);
        uint256 flipped = (uint256(s.vs) >> 255) ^ 1;
        s.vs = bytes32((n - low) | (flipped << 255));
        runs[0].signed = s;
        Batch memory b = _batchOf(1, runs, "malleated");
        _post(b);
        _pastWindow();
        _claimReverts(w1, b, 0, 0, 2, abi.encodeWithSelector(IWorkBatches.BadSignature.selector, 0));
    }

    /// Fuzzed against the plain-Solidity trees above (BatchTrees): any run of 1..64 leaves (the pool's `maxLeaves`) at any position of a batch
    /// of 1..9 runs, claimed in two ranges cut anywhere, verifies — `_level`'s assembly hashes what the reference
    /// does — and a proof with one word changed, one word short or one word more is refused.
    function testFuzz_anyRangeOfAnyRunAtAnyPositionVerifiesAndABentProofIsRefused(uint256 seed) public {
        uint256 n = 1 + seed % MAX_LEAVES;
        uint256 m = 1 + (seed >> 16) % 9;
        uint256 at = (seed >> 24) % m;
        Run[] memory runs = new Run[](m);
        for (uint256 i; i < m; ++i) {
            runs[i] = i == at ? _run(k1, 1, 0, _leaves(w1, 1, 0, n, 5, bytes32(seed))) : _runOfOne(uint32(i), seed);
        }
        Batch memory b = _batchOf(1, runs, bytes32(seed));
        _post(b);
        _pastWindow();
        uint256 cut = (seed >> 8) % n; // the first claim takes counters 0..cut − 1, the second the rest
        if (cut > 0) _claim(b, at, 0, cut);
        bytes32[] memory good = _proof(b.runs[at].hashes, cut, n - cut);
        _claimWithProofReverts(b, at, cut, _copy(good, good.length + 1));
        if (good.length > 0) {
            _claimWithProofReverts(b, at, cut, _copy(good, good.length - 1));
            bytes32[] memory bent = _copy(good, good.length);
            bent[(seed >> 32) % bent.length] ^= bytes32(uint256(1) << ((seed >> 40) % 256));
            _claimWithProofReverts(b, at, cut, bent);
        }
        assertEq(_claim(b, at, uint32(cut), n - cut), (n - cut) * 5 ether);
    }

    /// w2's run of its one leaf of counter `counter`.
    function _runOfOne(uint32 counter, uint256 seed) internal view returns (Run memory) {
        return _run(k2, 1, counter, _leaves(w2, 1, counter, 1, 5, bytes32(seed)));
    }

    /// The batch's run at `at` claims its counters from `cut` to its end with `runProof`, refused as BadProof.
    function _claimWithProofReverts(Batch memory b, uint256 at, uint256 cut, bytes32[] memory runProof) internal {
        Run memory r = b.runs[at];
        IWorkBatches.LeafBody[] memory rest = _slice(r.leaves, cut, r.leaves.length - cut);
        bytes32[] memory batchProof = _proof(b.nodes, at, 1);
        vm.prank(r.w);
        vm.expectRevert(IWorkBatches.BadProof.selector);
        wb.claim(b.ref, at, batchProof, r.signed, uint32(cut), rest, runProof);
    }

    /// The first `len` words of `a`, zero-padded past its end.
    function _copy(bytes32[] memory a, uint256 len) internal pure returns (bytes32[] memory c) {
        c = new bytes32[](len);
        for (uint256 i; i < len && i < a.length; ++i) {
            c[i] = a[i];
        }
    }
}
