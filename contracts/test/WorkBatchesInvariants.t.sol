// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IWorkBatches} from "../src/IWorkBatches.sol";
import {WorkBatches} from "../src/WorkBatches.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {BatchTrees, BatchesBase} from "./WorkBatches.t.sol";

/// Random batches (counters from a small range, so leaves with one counter and different contents recur),
/// claims of random runs, challenges, duplicate proofs, funding and time. The handler records every counter a
/// successful claim paid and everything funded and paid.
contract BatchHandler is BatchTrees {
    WorkBatches internal immutable wb;
    IERC20 internal immutable token;
    uint256 internal immutable poolId;
    address internal immutable validator;
    address[2] internal workers;
    uint256[2] internal keys;

    struct Posted {
        IWorkBatches.BatchRef ref;
        address[] owners;
        uint32[] counters;
        IWorkBatches.LeafBody[] bodies;
        bytes32[] nodes;
    }

    Posted[] internal _posted;
    mapping(bytes32 leaf => uint256) public timesPaid;
    uint256 public funded;
    uint256 public paid;
    uint256 public paidTwice;
    uint256 public claims;

    constructor(
        WorkBatches wb_,
        uint256 poolId_,
        address validator_,
        address[2] memory workers_,
        uint256[2] memory keys_,
        uint256 funded_
    ) {
        wb = wb_;
        token = wb_.token();
        poolId = poolId_;
        validator = validator_;
        workers = workers_;
        keys = keys_;
        funded = funded_;
    }

    /// A batch of 1..12 leaves of the current epoch, each of a random worker, its counters consecutive.
    function post(uint256 seed, uint8 size) external {
        uint256 n = bound(size, 1, 12);
        wb.openEpoch(poolId);
        uint32 epoch = wb.epochOf(poolId, block.timestamp);
        Posted storage p = _posted.push();
        // each worker's leaves in the batch run on from a random counter in 0..3
        uint32[2] memory next = [uint32(seed % 4), uint32((seed >> 8) % 4)];
        for (uint256 i; i < n; ++i) {
            uint256 r = uint256(keccak256(abi.encode(seed, i)));
            uint256 w = r & 1;
            uint32 counter = next[w]++;
            uint32 samples = uint32((r >> 16) % 3 + 1);
            IWorkBatches.LeafBody memory l;
            l.rolloutDigest = keccak256(abi.encode(r));
            l.samples = samples;
            bytes32 d = wb.leafDigest(poolId, epoch, counter, workers[w], l.rolloutDigest, 0, samples);
            (uint8 v, bytes32 rr, bytes32 s) = vm.sign(keys[w], d);
            l.r = rr;
            l.vs = bytes32(uint256(s) | (uint256(v - 27) << 255));
            p.owners.push(workers[w]);
            p.counters.push(counter);
            p.bodies.push(l);
            p.nodes.push(keccak256(abi.encode(d, l.r, l.vs)));
        }
        p.ref = IWorkBatches.BatchRef(poolId, epoch, uint16(n), _rootOf(p.nodes), keccak256(abi.encode(seed, n)));
        try wb.postBatch(p.ref) {}
        catch {
            _posted.pop();
        }
    }

    /// The owner of position `from` claims the run from there (as far as it stays that worker's, up to `len`).
    function claim(uint256 which, uint256 from, uint256 len) external {
        if (_posted.length == 0) return;
        Posted storage p = _posted[which % _posted.length];
        from = bound(from, 0, p.nodes.length - 1);
        address w = p.owners[from];
        uint256 n = 1;
        while (n < bound(len, 1, 12) && from + n < p.nodes.length && p.owners[from + n] == w) ++n;
        IWorkBatches.LeafBody[] memory bodies = new IWorkBatches.LeafBody[](n);
        for (uint256 i; i < n; ++i) {
            bodies[i] = p.bodies[from + i];
        }
        bytes32[] memory proof = _proof(p.nodes, from, n);
        vm.prank(w);
        try wb.claim(p.ref, p.counters[from], from, bodies, proof) returns (uint256 amount) {
            ++claims;
            paid += amount;
            for (uint256 i; i < n; ++i) {
                bytes32 leaf = keccak256(abi.encode(w, p.ref.epoch, p.counters[from] + i));
                if (++timesPaid[leaf] > 1) ++paidTwice;
            }
        } catch {}
    }

    function challenge(uint256 which, uint256 at) external {
        if (_posted.length == 0) return;
        Posted storage p = _posted[which % _posted.length];
        at = bound(at, 0, p.nodes.length - 1);
        bytes32[] memory proof = _proof(p.nodes, at, 1);
        vm.prank(validator);
        try wb.challenge(p.ref, p.owners[at], p.counters[at], at, p.bodies[at], proof, 1, bytes32(0)) {} catch {}
    }

    /// Two posted leaves of one worker and counter, if they differ, proven duplicate.
    function duplicate(uint256 a, uint256 b) external {
        if (_posted.length < 2) return;
        Posted storage pa = _posted[a % _posted.length];
        Posted storage pb = _posted[b % _posted.length];
        uint256 i = a % pa.nodes.length;
        uint256 j = b % pb.nodes.length;
        if (pa.owners[i] != pb.owners[j] || pa.counters[i] != pb.counters[j] || pa.ref.epoch != pb.ref.epoch) return;
        try wb.proveDuplicate(poolId, pa.owners[i], pa.ref.epoch, pa.counters[i], pa.bodies[i], pb.bodies[j]) {} catch {}
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
        handler = new BatchHandler(wb, poolId, validator, [w1, w2], [k1, k2], FUNDED);
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
}
