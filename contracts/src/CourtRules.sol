// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IComputePool} from "./IComputePool.sol";
import {DisputeSettlement} from "./DisputeSettlement.sol";
import {IJudgedPool, IValidatorCourt} from "./IValidatorCourt.sol";

/// @title CourtRules — the bounds on a pool's court rules (`IValidatorCourt.BadCourtParams`)
/// @notice A linked library, so that the ValidatorCourt fits EIP-170. Why each bound: docs/protocol.md §1.2
/// (rule n is R1.(6 + n)).
library CourtRules {
    /// @notice Largest dispute committee.
    uint8 internal constant MAX_COMMITTEE = 15;
    /// @notice Smallest dispute committee (a majority of one is no court).
    uint8 internal constant MIN_COMMITTEE = 3;
    /// @notice Longest verdict window (periods are stored in 24 bits).
    uint24 internal constant MAX_PERIOD = 30 days;
    /// @notice Margin, in basis points of R, that a court pool's spot-check bound must clear (rule 9).
    uint256 internal constant SPOT_CHECK_MARGIN_BPS = 2_000;
    uint256 private constant MAX_BPS = 10_000;

    /// @notice The owner of pool `poolId`, once the court (`address(this)`: the library runs in its context)
    /// checked that it is the pool's only validator and judge with the validator set frozen, and that the
    /// rules `p` meet every bound (`check`).
    function checkPool(IJudgedPool pools, uint256 poolId, IValidatorCourt.CourtParams calldata p, uint256 least)
        external
        view
        returns (address owner)
    {
        IComputePool.PoolView memory pool = pools.getPool(poolId);
        if (
            !pool.validatorsFrozen || pool.validatorCount != 1 || !pools.isValidator(poolId, address(this))
                || pools.judgeOf(poolId) != address(this)
        ) {
            revert IValidatorCourt.CourtNotSoleValidator(poolId);
        }
        check(p, pool.params, least);
        return pool.owner;
    }

    /// @notice Whether pool `poolId` is closed.
    function isClosed(IJudgedPool pools, uint256 poolId) external view returns (bool) {
        return pools.getPool(poolId).status == IComputePool.PoolStatus.Closed;
    }

    /// @notice Revert with `IValidatorCourt.BadCourtParams(rule)` unless the court rules `p` meet every rule
    /// for a pool with parameters `pool`, on a chain whose shortest period is `least` seconds.
    function check(IValidatorCourt.CourtParams calldata p, IComputePool.PoolParams memory pool, uint256 least)
        public
        pure
    {
        if (p.committeeSize < MIN_COMMITTEE || p.committeeSize % 2 == 0 || p.committeeSize > MAX_COMMITTEE) {
            revert IValidatorCourt.BadCourtParams(1);
        }
        if (p.assignedWindow < least || uint256(p.assignedWindow) + least > p.verdictWindow) {
            revert IValidatorCourt.BadCourtParams(2);
        }
        // a registration counts (and an exit waits) at most one challenge window longer than the cases themselves
        if (
            p.disputeWindow < least || p.commitPeriod < 2 * least || p.revealPeriod < least || p.activationDelay < least
                || p.activationDelay > pool.challengeWindow
        ) revert IValidatorCourt.BadCourtParams(3);
        uint256 periods = uint256(p.verdictWindow) + p.disputeWindow + p.commitPeriod + p.revealPeriod;
        uint256 margin = periods / 4 > least ? periods / 4 : least;
        if (periods + margin > pool.challengeWindow) revert IValidatorCourt.BadCourtParams(4);
        if (p.wrongVerdictSlash == 0 || p.disputeBond == 0 || p.nonVoterPenalty == 0) revert IValidatorCourt.BadCourtParams(5);
        // silence costs at most a quarter of a wrong verdict: a missed window is not a bond's worth
        if (
            uint256(p.silencePenalty) * 4 > p.wrongVerdictSlash || p.wrongVerdictSlash > p.validatorBond
                || p.disputeBond > p.validatorBond || p.nonVoterPenalty > p.validatorBond
        ) revert IValidatorCourt.BadCourtParams(6);
        if (p.validatorBond > type(uint96).max || p.verdictWindow > MAX_PERIOD) revert IValidatorCourt.BadCourtParams(7);
        // a wrong challenge that nobody disputes earns its judge the bounty and the fee: it must risk more
        uint256 bounty = uint256(pool.slashAmount) * pool.bountyBps / MAX_BPS;
        if (p.wrongVerdictSlash < bounty + p.verdictFee) revert IValidatorCourt.BadCourtParams(8);
        // spot checks, with the worker's own validator as the challenger (bounty and fee recovered)
        uint256 loss = pool.slashAmount > bounty + p.verdictFee ? pool.slashAmount - bounty - p.verdictFee : 0;
        uint256 q = pool.spotCheckBps;
        uint256 gainIfMissed = (MAX_BPS - q) * uint256(pool.rewardPerSample) * pool.maxSamplesPerWork;
        if (q * loss * MAX_BPS < gainIfMissed * (MAX_BPS + SPOT_CHECK_MARGIN_BPS)) revert IValidatorCourt.BadCourtParams(9);
        // every majority voter is paid from the losing side's stake, even when the whole committee is the majority
        uint256 votersPay = uint256(p.committeeSize) * DisputeSettlement.votePay(p.nonVoterPenalty);
        if (votersPay > p.disputeBond || votersPay > p.wrongVerdictSlash) revert IValidatorCourt.BadCourtParams(10);
    }
}
