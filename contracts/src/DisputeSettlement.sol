// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IStakeManager} from "./IStakeManager.sol";
import {IValidatorCourt} from "./IValidatorCourt.sol";
import {ValidatorSet} from "./ValidatorSet.sol";

/// @title DisputeSettlement — who pays and who is paid when a ValidatorCourt dispute is resolved
/// @notice A linked library (it runs in the court's context), so that the ValidatorCourt fits EIP-170.
library DisputeSettlement {
    uint8 internal constant WHY_WRONG_VERDICT = 1;
    uint8 internal constant WHY_LOST_DISPUTE = 2;
    uint8 internal constant WHY_NO_VOTE = 3;
    uint8 internal constant WHY_MINORITY = 5;
    bytes32 internal constant REVEALED_VALID = bytes32(uint256(1));
    bytes32 internal constant REVEALED_INVALID = bytes32(uint256(2));

    /// @dev One resolved dispute: the parties, the votes, the court's amounts.
    struct Outcome {
        uint256 poolId;
        bytes32 workId;
        address judge;
        address disputer;
        bool overturned;
        bool workValid;
        uint256 votesValid;
        uint256 votesInvalid;
        uint256 wrongVerdictSlash;
        uint256 disputeBond;
        uint256 nonVoterPenalty;
        bool reopen;
    }

    /// @notice Then (their reservations freed by `release`) take the losing side's stake (none when no vote was
    /// revealed) and every non-voter's penalty (and, unless the votes tied, the minority's): each majority voter is
    /// paid `votePay(nonVoterPenalty)` — the same whichever side wins, and below what a silent or minority seat
    /// loses, so a vote cast without checking loses on average — and the winning party takes the rest; returns
    /// the winning party and what is left for the pool's fee budget (all of it when the votes tied or no vote
    /// was revealed). `o.reopen` (no vote, and another committee will be drawn): only the committee pays, its
    /// seats and votes are cleared, the parties stay reserved, and everything taken goes to the fee budget.
    function settle(
        mapping(address => ValidatorSet.Validator) storage validators,
        address[] storage committee,
        mapping(address => bytes32) storage votes,
        mapping(address => uint256) storage credits,
        IStakeManager stakeManager,
        Outcome memory o
    ) external returns (address winner, uint256 remainder) {
        uint256 pot;
        if (o.overturned) {
            pot = _penalize(validators, stakeManager, o, o.judge, WHY_WRONG_VERDICT, o.wrongVerdictSlash);
        } else if (o.votesValid + o.votesInvalid > 0) {
            pot = _penalize(validators, stakeManager, o, o.disputer, WHY_LOST_DISPUTE, o.disputeBond);
        }
        bool tie = o.votesValid == o.votesInvalid;
        bytes32 winning = o.workValid ? REVEALED_VALID : REVEALED_INVALID;
        for (uint256 i; i < committee.length; ++i) {
            address member = committee[i];
            bytes32 vote = votes[member];
            bool revealed = vote == REVEALED_VALID || vote == REVEALED_INVALID;
            if (!revealed || (!tie && vote != winning)) {
                pot += _penalize(
                    validators, stakeManager, o, member, revealed ? WHY_MINORITY : WHY_NO_VOTE, o.nonVoterPenalty
                );
            }
            if (o.reopen) delete votes[member];
        }
        if (o.reopen) {
            while (committee.length != 0) committee.pop();
            return (address(0), pot);
        }
        winner = o.overturned ? o.disputer : o.judge;
        if (tie) return (winner, pot);
        uint256 majority = o.workValid ? o.votesValid : o.votesInvalid;
        // CourtRules bounds committeeSize × votePay by the losing side's stake, which its reservation holds
        uint256 pay = votePay(o.nonVoterPenalty);
        if (pay * majority > pot) pay = pot / majority;
        for (uint256 i; i < committee.length; ++i) {
            if (votes[committee[i]] == winning) _credit(credits, committee[i], pay);
        }
        uint256 rest = pot - pay * majority;
        if (rest != 0) _credit(credits, winner, rest);
    }

    /// @notice What a majority voter is paid: half a seat's penalty, whichever side wins (docs/protocol.md R9.13).
    function votePay(uint256 nonVoterPenalty) internal pure returns (uint256) {
        return nonVoterPenalty / 2;
    }

    /// @notice First step of a resolved dispute: free the reservations of the committee and (unless the dispute
    /// is reopened) of the parties, noting in `freedAt` who can reserve a verdict again.
    function release(
        mapping(address => ValidatorSet.Validator) storage validators,
        mapping(address => uint40) storage freedAt,
        address[] storage committee,
        Outcome memory o
    ) external {
        uint256 exposure = o.wrongVerdictSlash;
        if (!o.reopen) {
            ValidatorSet.release(validators, freedAt, o.judge, exposure, exposure);
            ValidatorSet.release(validators, freedAt, o.disputer, o.disputeBond, exposure);
        }
        for (uint256 i; i < committee.length; ++i) {
            ValidatorSet.release(validators, freedAt, committee[i], o.nonVoterPenalty, exposure);
        }
    }

    function _penalize(
        mapping(address => ValidatorSet.Validator) storage validators,
        IStakeManager stakeManager,
        Outcome memory o,
        address party,
        uint8 why,
        uint256 amount
    ) private returns (uint256 taken) {
        ValidatorSet.Validator storage v = validators[party];
        taken = amount < v.locked ? amount : v.locked;
        if (taken == 0) return 0;
        v.locked -= uint96(taken);
        emit IValidatorCourt.ValidatorPenalized(o.poolId, o.workId, party, why, taken);
        stakeManager.slash(party, taken, address(this), 10_000);
    }

    function _credit(mapping(address => uint256) storage credits, address to, uint256 amount) private {
        credits[to] += amount;
        emit IValidatorCourt.Credited(to, amount);
    }
}
