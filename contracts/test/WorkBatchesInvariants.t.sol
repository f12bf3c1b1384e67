// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IWorkBatches} from "../src/IWorkBatches.sol";
import {WorkBatches} from "../src/WorkBatches.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {BatchTrees, BatchesBase} from "./WorkBatches.t.sol";

/// Random batches of random signed runs (counters from a small range, each leaf's content one of two variants, so runs
/// that give one counter different leaves recur, and runs that agree), claims of random parts of runs, challenges,
/// duplicate proofs, funding and time. The handler records every counter a successful claim paid and everything
/// funded and paid.
contract BatchHandler is BatchTrees {
    WorkBatches internal immutable wb;
    IERC20 internal immutable token;
    uint256 internal immutable poolId;
    address internal immutable validator;
    uint256 internal immutable rewardPerSample;
    address[2] internal workers;
    uint256[2] internal keys;

    struct HRun {
        uint256 w;
        IWorkBatches.SignedRun signed;
        IWorkBatches.LeafBody[] leaves;
        bytes32[] hashes;
    }

    struct Posted {
        IWorkBatches.BatchRef ref;
        bytes32[] nodes;
        HRun[] runs;
    }

    Posted[] internal _posted;
    mapping(bytes32 leaf => uint256) public timesPaid;
    uint256 public funded;
    uint256 public paid;
    uint256 public paidTwice;
    uint256 public paidWrong;
    uint256 public claims;

    constructor(
        WorkBatches wb_,
        uint256 poolId_,
        address validator_,
        address[2] memory workers_,
        uint256[2] memory keys_,
        uint256 funded_,
        uint256 rewardPerSample_
    ) {
        wb = wb_;
        token = wb_.token();
        poolId = poolId_;
        validator = validator_;
        workers = workers_;
        keys = keys_;
        funded = funded_;
        rewardPerSample = rewardPerSample_;
    }

    /// A batch of 1..4 runs of the current epoch, each of a random worker, from a counter in 0..3, 1..4 leaves long.
    function post(uint256 seed, uint8 size) external {
        uint256 n = bound(size, 1, 4);
        wb.openEpoch(poolId);
        uint32 epoch = wb.epochOf(poolId, block.timestamp);
        Posted storage p = _posted.push();
        for (uint256 i; i < n; ++i) {
            uint256 r = uint256(keccak256(abi.encode(seed, i)));
            HRun storage run = p.runs.push();
            run.w = r & 1;
            uint32 first = uint32((r >> 8) % 4);
            uint256 len = (r >> 16) % 4 + 1;
            for (uint256 k; k < len; ++k) {
                // variant 0 or 1 of the leaf of (worker, epoch, counter): runs that pick the same agree on it
                uint256 c = uint256(keccak256(abi.encode(run.w, epoch, first + k, (r >> (32 + k)) & 1)));
                IWorkBatches.LeafBody memory l = IWorkBatches.LeafBody(bytes32(c), 0, uint32(c % 3 + 1));
                run.leaves.push(l);
                run.hashes.push(keccak256(abi.encode(l)));
            }
            bytes32 root = _rootOf(run.hashes);
            bytes32 d = wb.runDigest(poolId, epoch, first, uint32(len), root);
            (uint8 v, bytes32 rr, bytes32 s) = vm.sign(keys[run.w], d);
            run.signed = IWorkBatches.SignedRun(first, uint32(len), root, rr, bytes32(uint256(s) | (uint256(v - 27) << 255)));
            p.nodes.push(keccak256(abi.encode(d, run.signed.r, run.signed.vs)));
        }
        p.ref = IWorkBatches.BatchRef(poolId, epoch, uint16(n), _rootOf(p.nodes), keccak256(abi.encode(seed, n)));
        try wb.postBatch(p.ref) {}
        catch {
            _posted.pop();
        }
    }

    /// The worker of a posted run claims `len` of its leaves from index `from` (as many as the run holds).
    function claim(uint256 which, uint256 at, uint256 from, uint256 len) external {
        if (_posted.length == 0) return;
        Posted storage p = _posted[which % _posted.length];
        at = at % p.runs.length;
        HRun storage run = p.runs[at];
        from = bound(from, 0, run.leaves.length - 1);
        uint256 n = bound(len, 1, run.leaves.length - from);
        IWorkBatches.LeafBody[] memory leaves = new IWorkBatches.LeafBody[](n);
        uint256 samples;
        for (uint256 i; i < n; ++i) {
            leaves[i] = run.leaves[from + i];
            samples += leaves[i].samples;
        }
        uint32 first = run.signed.firstCounter + uint32(from);
        bytes32[] memory batchProof = _proof(p.nodes, at, 1);
        bytes32[] memory runProof = _proof(run.hashes, from, n);
        address w = workers[run.w];
        vm.prank(w);
        try wb.claim(p.ref, at, batchProof, run.signed, first, leaves, runProof) returns (uint256 amount) {
            ++claims;
            paid += amount;
            if (amount != samples * rewardPerSample) ++paidWrong;
            for (uint256 i; i < n; ++i) {
                bytes32 leaf = keccak256(abi.encode(w, p.ref.epoch, first + i));
                if (++timesPaid[leaf] > 1) ++paidTwice;
            }
        } catch {}
    }

    function challenge(uint256 which, uint256 at, uint256 index) external {
        if (_posted.length == 0) return;
        Posted storage p = _posted[which % _posted.length];
        at = at % p.runs.length;
        HRun storage run = p.runs[at];
        index = index % run.leaves.length;
        IWorkBatches.RunLeaf memory x = IWorkBatches.RunLeaf(run.signed, run.leaves[index], _proof(run.hashes, index, 1));
        bytes32[] memory proof = _proof(p.nodes, at, 1);
        vm.prank(validator);
        try wb.challenge(p.ref, at, proof, workers[run.w], run.signed.firstCounter + uint32(index), x, 1, 0) {}
        catch {}
    }

    /// Two posted runs of one worker and epoch that overlap, proven duplicate at their first common counter.
    function duplicate(uint256 a, uint256 b, uint256 ra, uint256 rb) external {
        if (_posted.length < 1) return;
        Posted storage pa = _posted[a % _posted.length];
        Posted storage pb = _posted[b % _posted.length];
        HRun storage x = pa.runs[ra % pa.runs.length];
        HRun storage y = pb.runs[rb % pb.runs.length];
        uint32 lo = x.signed.firstCounter > y.signed.firstCounter ? x.signed.firstCounter : y.signed.firstCounter;
        if (x.w != y.w || pa.ref.epoch != pb.ref.epoch) return;
        if (lo >= x.signed.firstCounter + x.signed.count || lo >= y.signed.firstCounter + y.signed.count) return;
        uint256 i = lo - x.signed.firstCounter;
        uint256 j = lo - y.signed.firstCounter;
        IWorkBatches.RunLeaf memory lx = IWorkBatches.RunLeaf(x.signed, x.leaves[i], _proof(x.hashes, i, 1));
        IWorkBatches.RunLeaf memory ly = IWorkBatches.RunLeaf(y.signed, y.leaves[j], _proof(y.hashes, j, 1));
        try wb.proveDuplicate(poolId, workers[x.w], pa.ref.epoch, lo, lx, ly) {} catch {}
    }

    function fund(uint96 amount) external {
        amount = uint96(bound(amount, 1, 50 ether));
        deal(address(token), address(this), amount);
        token.approve(address(wb), amount);
        wb.fund(poolId, amount);
        funded += amount;
    }

    function wait(uint32 dt) external {
        vm.warp(block.timestamp + bound(dt, 1, 2 hours));
    }
}

contract WorkBatchesInvariants is BatchesBase {
    BatchHandler internal handler;

    function setUp() public override {
        super.setUp();
        handler = new BatchHandler(wb, poolId, validator, [w1, w2], [k1, k2], FUNDED, REWARD_PER_SAMPLE);
        targetContract(address(handler));
    }

    /// The contract never pays more than it was funded, and holds exactly the difference.
    function invariant_paidNeverExceedsFunded() public view {
        assertLe(handler.paid(), handler.funded());
        assertEq(token.balanceOf(address(wb)), handler.funded() - handler.paid());
        assertEq(wb.budget(poolId), handler.funded() - handler.paid());
    }

    /// No (worker, epoch, counter) is ever paid twice, whichever batches held it.
    function invariant_noLeafPaidTwice() public view {
        assertEq(handler.paidTwice(), 0);
    }

    /// Every claim paid exactly rewardPerSample × the samples its worker signed in the leaves it claimed.
    function invariant_paidExactlyTheSignedSamples() public view {
        assertEq(handler.paidWrong(), 0);
    }
}
