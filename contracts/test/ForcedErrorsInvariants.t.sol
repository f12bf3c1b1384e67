// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {IForcedErrors} from "../src/IForcedErrors.sol";
import {ForcedErrors} from "../src/ForcedErrors.sol";
import {ForcedErrorsBase} from "./ForcedErrors.t.sol";

/// Random sequences of chain commitments, reveals (some epochs skipped), beacon anchors and records, and time (each
/// call in a block of its own): the handler keeps each chain's secret and commit block, the first value recorded for
/// each epoch's beacon, and every storage slot the ForcedErrors contract wrote.
contract ChainHandler is Test {
    ForcedErrors internal immutable fe;
    uint256 internal immutable poolId;
    address[] public validators;
    mapping(address => bytes32) public secretOf;
    bytes32[] public written;
    mapping(bytes32 slot => bool) internal _seen;
    uint256 public reveals;
    mapping(address => uint256) public committedAt;
    mapping(uint32 epoch => bytes32) public firstBeacon;
    uint32 public lastBeaconEpoch;

    constructor(ForcedErrors fe_, uint256 poolId_, address[] memory validators_) {
        fe = fe_;
        poolId = poolId_;
        validators = validators_;
    }

    function writtenCount() external view returns (uint256) {
        return written.length;
    }

    /// Commit a new chain of 1..8 epochs from a fresh secret (refused until the last one is settled: then nothing).
    function commit(uint256 who, uint256 seed, uint32 length) external recorded {
        address v = validators[who % validators.length];
        length = uint32(bound(length, 1, 8));
        // a fresh secret for every chain (one reused across chains would publish a later chain's links as heads)
        bytes32 s = keccak256(abi.encode("inv", v, seed, written.length));
        IForcedErrors.Chain memory c = fe.getChain(poolId, IForcedErrors.Role.Validator, v);
        if (c.endEpoch != 0 && block.timestamp <= fe.settledBy(poolId, c.endEpoch)) return; // not settled yet
        vm.prank(v);
        fe.commitChain(poolId, IForcedErrors.Role.Validator, _hashes(s, length), length);
        secretOf[v] = s;
        committedAt[v] = block.number;
    }

    /// Reveal the next (or the one after: a skipped epoch) link in its window, waiting for it if need be.
    function reveal(uint256 who, bool skip) external recorded {
        address v = validators[who % validators.length];
        IForcedErrors.Chain memory c = fe.getChain(poolId, IForcedErrors.Role.Validator, v);
        if (c.endEpoch == 0) return;
        uint32 epoch = c.lastEpoch + (skip ? 2 : 1);
        if (epoch > c.endEpoch) return;
        (uint64 from, uint64 until) = fe.revealWindowOf(poolId, epoch);
        if (block.timestamp > until) return; // missed: that epoch stays silent
        if (block.timestamp < from) vm.warp(from);
        vm.prank(v);
        fe.revealLink(poolId, IForcedErrors.Role.Validator, epoch, _hashes(secretOf[v], c.endEpoch - epoch));
        ++reveals;
    }

    /// Anchor or record the current epoch's beacon (or an earlier one's: refused once missed or recorded).
    function beacon(uint8 back) external recorded {
        uint32 current = fe.epochOf(poolId, block.timestamp);
        uint32 epoch = current > back % 3 ? current - back % 3 : 0;
        vm.setBlockhash(block.number - 1, keccak256(abi.encode("block", block.number - 1)));
        try fe.recordBeacon(poolId, epoch) {} catch {}
        bytes32 value = fe.getBeacon(poolId, epoch).value;
        if (value != 0 && firstBeacon[epoch] == 0) firstBeacon[epoch] = value;
        if (epoch > lastBeaconEpoch) lastBeaconEpoch = epoch;
    }

    function wait(uint32 dt, uint16 blocks) external {
        vm.warp(block.timestamp + bound(dt, 1, 6 hours));
        vm.roll(block.number + bound(blocks, 0, 400));
    }

    modifier recorded() {
        vm.roll(block.number + 1);
        vm.record();
        _;
        (, bytes32[] memory writes) = vm.accesses(address(fe));
        for (uint256 i; i < writes.length; ++i) {
            if (_seen[writes[i]]) continue;
            _seen[writes[i]] = true;
            written.push(writes[i]);
        }
    }

    function _hashes(bytes32 s, uint256 n) internal pure returns (bytes32 h) {
        h = s;
        for (uint256 i; i < n; ++i) {
            h = keccak256(abi.encode(h));
        }
    }
}

/// Issue 43's item 1 as an invariant: whatever was committed, revealed, skipped or waited, a selection cannot be
/// recomputed from public state before its reveal — no slot the contract ever wrote holds a link not yet revealed,
/// and `isAudited`'s input (`linkOf`) is zero for each such epoch.
contract ForcedErrorsInvariantTest is ForcedErrorsBase {
    ChainHandler internal handler;

    function setUp() public override {
        super.setUp();
        address[] memory three = new address[](3);
        for (uint256 i; i < 3; ++i) {
            three[i] = vals[i];
        }
        handler = new ChainHandler(fe, poolId, three);
        targetContract(address(handler));
    }

    /// forge-config: default.invariant.runs = 64
    /// forge-config: default.invariant.depth = 40
    function invariant_item1_noUnrevealedLinkIsInPublicState() public view {
        uint256 n = handler.writtenCount();
        for (uint256 i; i < 3; ++i) {
            address v = vals[i];
            IForcedErrors.Chain memory c = fe.getChain(poolId, VALIDATOR, v);
            for (uint32 e = c.lastEpoch + 1; c.endEpoch != 0 && e <= c.endEpoch; ++e) {
                bytes32 link = _hashes(handler.secretOf(v), c.endEpoch - e);
                assertEq(fe.linkOf(poolId, VALIDATOR, v, e), bytes32(0), "an unrevealed epoch has no link");
                for (uint256 j; j < n; ++j) {
                    assertTrue(vm.load(address(fe), handler.written(j)) != link, "an unrevealed link is in storage");
                }
            }
        }
    }

    /// R9.29: no chain covers an epoch whose beacon was anchored at or before its commit (the beacon, that block's
    /// hash, was unknown to every chain it mixes into), and a recorded beacon never changes.
    /// forge-config: default.invariant.runs = 64
    /// forge-config: default.invariant.depth = 40
    function invariant_beaconIsUnknownToEveryChainItDrawsFor() public view {
        for (uint256 i; i < 3; ++i) {
            address v = vals[i];
            IForcedErrors.Chain memory c = fe.getChain(poolId, VALIDATOR, v);
            for (uint32 e = c.firstEpoch; c.endEpoch != 0 && e <= c.endEpoch; ++e) {
                uint64 anchor = fe.getBeacon(poolId, e).anchor;
                if (anchor != 0) assertGt(anchor, handler.committedAt(v), "a beacon anchored at or before the commit");
            }
        }
        for (uint32 e; e <= handler.lastBeaconEpoch(); ++e) {
            bytes32 first = handler.firstBeacon(e);
            if (first != 0) assertEq(fe.getBeacon(poolId, e).value, first, "a recorded beacon changed");
        }
    }
}
