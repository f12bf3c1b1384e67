// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IComputePool} from "./IComputePool.sol";
import {ComputePool} from "./ComputePool.sol";
import {IStakeManager} from "./IStakeManager.sol";
import {IValidatorCourt} from "./IValidatorCourt.sol";
import {ValidatorCourt} from "./ValidatorCourt.sol";
import {IForcedErrors} from "./IForcedErrors.sol";

/// @title ForcedErrors — committed hash chains that draw audits nobody can predict, and forced errors that make
/// checking pay when nobody cheats (decision 0009 §1, §2)
/// @notice Beside a ValidatorCourt, reading its public state; a slasher of its own (its stake is locked here).
/// Each validator and each worker of a court pool commits the head `keccak^N(s)` of a hash chain before the
/// epochs it covers and reveals one link a epoch, `σ_e` with `keccak(σ_e)` = the link revealed before, once every
/// file of the epoch has passed its challenge window. Each epoch has a beacon `β_e`, the hash of a block of the epoch
/// (`recordBeacon`: after every chain covering it was committed). A validator is drawn to audit file `w` of epoch e iff
/// `keccak(σ_e ‖ β_e ‖ w) < auditBps/10000`; a worker owes a forced error in `w` iff `keccak(τ_e ‖ β_e ‖ w) <
/// forcedBps/10000` (τ: its own chain) — a completion whose claimed reward is flipped and first sampled token
/// replaced, which every check flags. Nobody else can compute either before the reveal; neither holder can choose it
/// (its chain committed before the beacon was known, the beacon after: no secret can be ground against it).
/// After the reveal and the court's final verdict, `settle`: a forced error judged valid costs that validator
/// `wrongVerdictSlash`, whoever judged it invalid takes the jackpot J from the pool's verification budget, and the
/// owed file is paid as an honest one (so holding it for another epoch's draw gains nothing): caught, the worker is
/// refunded its slash and paid the file's reward; accepted (the pool paid the reward), it loses `slashAmount`;
/// `chargeAuditor`: a drawn auditor that let an accepted forced error stand undisputed loses `wrongVerdictSlash`; `reportSilence`: a validator that withheld a link loses `silencePenalty` (and counts as drawn
/// for every file of that epoch); a worker that withheld one is settled as owing every file of that epoch.
/// Rules and numbers: docs/protocol.md R9.25–R9.29; the bounds on its parameters R1.17–R1.22.
contract ForcedErrors is IForcedErrors, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    /// @notice Largest ρ: a forced error is a file the pool does not train on (10 %).
    uint16 public constant MAX_FORCED_BPS = 1_000;
    /// @notice Longest epoch and reveal window.
    uint32 public constant MAX_PERIOD = 7 days;
    /// @notice Longest chain (epochs): bounds the keccaks a reveal after skipped epochs iterates.
    uint32 public constant MAX_CHAIN_LENGTH = 1_024;
    uint256 private constant BPS = 10_000;
    uint8 private constant WHY_JUDGED_VALID = 1;
    uint8 private constant WHY_LET_STAND = 2;
    uint8 private constant WHY_ACCEPTED = 3;
    uint8 private constant WHY_WORKER_WITHHELD = 4;
    uint8 private constant WHY_VALIDATOR_WITHHELD = 5;

    ValidatorCourt public immutable court;
    ComputePool public immutable pools;
    IStakeManager public immutable stakeManager;
    IERC20 public immutable token;

    mapping(uint256 poolId => Params) private _params;
    /// @notice When epoch 0 of a pool began (its `configure`).
    mapping(uint256 poolId => uint64) public genesis;
    /// @dev The pool's challenge window, fixed at its creation (copied at `configure`: a reveal reads one slot).
    mapping(uint256 poolId => uint64) private _challengeWindow;
    /// @notice What pays jackpots and refunds; penalties taken here feed it.
    mapping(uint256 poolId => uint256) public budget;
    mapping(uint256 poolId => mapping(Role => mapping(address => Chain))) private _chains;
    mapping(uint256 poolId => mapping(Role => mapping(address => mapping(uint32 epoch => bytes32)))) private _links;
    /// @notice Each file's settlement (`Outcome.None`: not settled).
    mapping(bytes32 workId => Outcome) public outcomeOf;
    mapping(bytes32 workId => mapping(address auditor => bool)) private _charged;
    mapping(uint256 poolId => mapping(address validator => mapping(uint32 epoch => bool))) private _silenceCharged;
    /// @notice Jackpots and refunds owed to each address (`withdraw`).
    mapping(address => uint256) public credits;
    mapping(uint256 poolId => mapping(uint32 epoch => Beacon)) private _beacons;

    constructor(ValidatorCourt court_) {
        court = court_;
        pools = ComputePool(address(court_.pools()));
        stakeManager = court_.stakeManager();
        token = court_.token();
    }

    // ------------------------------------------------------------------ pool owner

    /// @notice Set a court pool's forced-error rules (its owner, once); epoch 0 begins now.
    function configure(uint256 poolId, Params calldata p) external {
        if (_params[poolId].forcedBps != 0) revert AlreadyConfigured(poolId);
        address owner_ = court.poolOwner(poolId);
        if (owner_ == address(0)) revert UnknownPool(poolId);
        if (msg.sender != owner_) revert NotPoolOwner(poolId, msg.sender);
        IComputePool.PoolParams memory pool = pools.getPool(poolId).params;
        check(p, court.getParams(poolId), pool, court.minPeriod());
        _params[poolId] = p;
        genesis[poolId] = uint64(block.timestamp);
        _challengeWindow[poolId] = pool.challengeWindow;
        emit ForcedErrorsConfigured(poolId, p, uint64(block.timestamp));
    }

    /// @notice Revert `BadForcedErrorParams(rule)` unless `p` meets every bound for a court pool with rules `c` and
    /// pool parameters `pool` on a chain whose shortest period is `least` seconds.
    function check(
        Params calldata p,
        IValidatorCourt.CourtParams memory c,
        IComputePool.PoolParams memory pool,
        uint256 least
    ) public pure {
        if (p.forcedBps == 0 || p.forcedBps > MAX_FORCED_BPS) revert BadForcedErrorParams(1);
        if (p.auditBps == 0 || p.auditBps > BPS) revert BadForcedErrorParams(2);
        if (p.epochLength < least || p.epochLength > MAX_PERIOD || p.revealWindow < least || p.revealWindow > MAX_PERIOD)
        {
            revert BadForcedErrorParams(3);
        }
        uint256 largestReward = uint256(pool.rewardPerSample) * pool.maxSamplesPerWork;
        // a lazy verdict's loss and an accepted forced error's (its slash and the reward it was paid) are covered
        if (p.validatorBond < c.wrongVerdictSlash || p.workerBond < uint256(pool.slashAmount) + largestReward) {
            revert BadForcedErrorParams(4);
        }
        // a withheld link costs at most a quarter of a wrong verdict, as a missed assigned window does (rule 6)
        if (p.silencePenalty == 0 || uint256(p.silencePenalty) * 4 > c.wrongVerdictSlash) revert BadForcedErrorParams(5);
        // verification pays at most what the work does: ρ·J ≤ R
        if (p.jackpot == 0 || uint256(p.forcedBps) * p.jackpot > BPS * largestReward) revert BadForcedErrorParams(6);
    }

    /// @notice Add `amount` to the pool's verification budget (anyone; needs approval).
    function fundBudget(uint256 poolId, uint256 amount) external nonReentrant {
        _configured(poolId);
        if (amount == 0) revert ZeroAmount();
        uint256 total = budget[poolId] + amount;
        budget[poolId] = total;
        emit BudgetFunded(poolId, msg.sender, amount, total);
        token.safeTransferFrom(msg.sender, address(this), amount);
    }

    // ------------------------------------------------------------------ chains

    /// @notice Commit the head `keccak^length(s)` of a hash chain from a secret `s`, covering the `length` epochs
    /// after the current one (epoch e's link is `keccak^(endEpoch − e)(s)`), and lock what the caller's stake here
    /// lacks of the role's bond. A validator of the pool's court or a member of the pool; a new chain only once the
    /// previous one is settled (`settledBy` its last epoch): its files are settled against the chain that covered them.
    function commitChain(uint256 poolId, Role role, bytes32 head, uint32 length) external {
        Params storage p = _configured(poolId);
        if (role == Role.Validator ? !_isCourtValidator(poolId, msg.sender) : !pools.isMember(poolId, msg.sender)) {
            revert NotParticipant(poolId, role, msg.sender);
        }
        Chain storage chain = _chains[poolId][role][msg.sender];
        uint32 current = epochOf(poolId, block.timestamp);
        if (
            head == bytes32(0) || length == 0 || length > MAX_CHAIN_LENGTH
                || (chain.endEpoch != 0 && block.timestamp <= settledBy(poolId, chain.endEpoch))
        ) revert BadChain(poolId, msg.sender);
        chain.last = head;
        chain.firstEpoch = current + 1;
        chain.lastEpoch = current;
        chain.endEpoch = current + length;
        uint96 bond = role == Role.Validator ? p.validatorBond : p.workerBond;
        if (chain.locked < bond) {
            uint96 more = bond - chain.locked;
            chain.locked = bond;
            stakeManager.lock(msg.sender, more);
        }
        emit ChainCommitted(poolId, role, msg.sender, head, current + 1, current + length);
    }

    /// @notice Reveal the caller's link of `epoch` within that epoch's reveal window: it must hash, once per epoch
    /// since, to the chain's last revealed link (a skipped epoch stays unrevealed: silent).
    function revealLink(uint256 poolId, Role role, uint32 epoch, bytes32 link) external {
        (uint64 from, uint64 until) = revealWindowOf(poolId, epoch);
        if (block.timestamp < from || block.timestamp > until) revert OutsideRevealWindow(epoch, from, until);
        Chain storage chain = _chains[poolId][role][msg.sender];
        if (epoch <= chain.lastEpoch || epoch > chain.endEpoch) revert BadLink(epoch);
        bytes32 h = link;
        for (uint256 i = chain.lastEpoch; i < epoch; ++i) {
            h = keccak256(abi.encode(h));
        }
        if (h != chain.last) revert BadLink(epoch);
        chain.last = link;
        chain.lastEpoch = epoch;
        _links[poolId][role][msg.sender][epoch] = link;
        emit LinkRevealed(poolId, role, msg.sender, epoch, link);
    }

    /// @notice Anchor or record epoch `epoch`'s beacon (anyone; R9.29). The first call in the epoch anchors it to its
    /// own block — every chain covering the epoch was committed in an earlier block (`commitChain` covers the epochs
    /// after the current one) — and a call from the next block on records that block's hash, once (another call in
    /// the anchor's block changes nothing, so that one sent on the anchor's state is estimated and mined after it).
    /// An anchor whose hash is no longer readable (256 blocks) is replaced by the next call while the epoch lasts;
    /// after it, the epoch keeps the fallback beacon, zero.
    function recordBeacon(uint256 poolId, uint32 epoch) external {
        _configured(poolId);
        Beacon storage b = _beacons[poolId][epoch];
        if (b.value != 0) revert BeaconAlreadyRecorded(epoch);
        bytes32 h = b.anchor == 0 ? bytes32(0) : blockhash(b.anchor); // zero in the anchor's block or past 256
        if (h != 0) {
            b.value = h;
            emit BeaconRecorded(poolId, epoch, h);
            return;
        }
        if (b.anchor == block.number) return;
        uint32 current = epochOf(poolId, block.timestamp);
        if (current < epoch) revert BeaconPending(epoch);
        if (current > epoch) revert BeaconMissed(epoch);
        b.anchor = uint64(block.number);
        emit BeaconAnchored(poolId, epoch, uint64(block.number));
    }

    // ------------------------------------------------------------------ settlement

    /// @notice Settle a file's forced error once its case is final and its epoch's reveal window has closed
    /// (anyone; `judge` and `disputer`, the case's parties — zero for no dispute —, checked against the court's
    /// indices). Not forced: nothing. Forced: each party that judged it valid loses `wrongVerdictSlash`, the party
    /// that judged it invalid takes the jackpot; rejected (the worker was slashed for it), the worker is refunded
    /// `slashAmount` and paid the file's reward; accepted, the worker loses `slashAmount` (it omitted the error, or
    /// nobody caught it). Withheld (the worker did not reveal the link that decides it): the worker loses
    /// `slashAmount` + the file's reward.
    /// A judge challenges with a validator's reason code, never `REASON_DISPUTE`, which marks an overturn.
    function settle(bytes32 workId, address judge, address disputer) external nonReentrant {
        if (outcomeOf[workId] != Outcome.None) revert AlreadySettled(workId);
        (uint256 poolId, uint32 epoch, bool accepted, bool judgeSaidValid) = _settleable(workId, judge, disputer);
        IComputePool.WorkView memory w = pools.getWork(workId);
        Outcome outcome = _forced(poolId, epoch, w.worker, workId);
        outcomeOf[workId] = outcome;
        if (outcome == Outcome.Forced) {
            _settleForced(poolId, workId, accepted, judgeSaidValid ? disputer : judge, judgeSaidValid ? judge : disputer, w);
            return;
        }
        if (outcome == Outcome.Withheld) {
            // withholding must cost more than any owed file's outcome: the slash and the reward the pool paid
            uint256 loss = uint256(pools.getPool(poolId).params.slashAmount) + w.reward;
            _penalize(poolId, workId, Role.Worker, w.worker, WHY_WORKER_WITHHELD, loss);
        }
        emit WorkSettled(poolId, workId, outcome, address(0), 0, 0);
    }

    /// @notice Charge a validator drawn to audit a forced error that was accepted undisputed (anyone): it loses
    /// `wrongVerdictSlash`. Drawn: of the case's set, neither judge nor worker, and its revealed link of the
    /// file's epoch selects the file — or it withheld that link (a withheld link is drawn for every file).
    function chargeAuditor(bytes32 workId, address auditor) external {
        (uint256 poolId, uint32 epoch, bool accepted,, uint24 judgeIndex) = _finalCase(workId);
        if (outcomeOf[workId] != Outcome.Forced || !accepted || _disputer(workId) != 0 || _charged[workId][auditor]) {
            revert NotChargeable(workId, auditor);
        }
        (,,, uint24 workerIndex,,,,,,) = court.cases(workId);
        Chain storage chain = _chains[poolId][Role.Validator][auditor];
        uint32 index = court.getValidator(poolId, auditor).index;
        if (
            index == 0 || index == judgeIndex || index == workerIndex || !_inCaseSet(poolId, workId, auditor)
                || epoch < chain.firstEpoch || epoch > chain.endEpoch
        ) revert NotChargeable(workId, auditor);
        bytes32 link = _links[poolId][Role.Validator][auditor][epoch];
        if (link != bytes32(0) && !_below(link, beaconOf(poolId, epoch), workId, _params[poolId].auditBps)) {
            revert NotChargeable(workId, auditor);
        }
        _charged[workId][auditor] = true;
        _penalize(poolId, workId, Role.Validator, auditor, WHY_LET_STAND, court.getParams(poolId).wrongVerdictSlash);
    }

    /// @notice Charge a validator whose chain covers `epoch` and who did not reveal its link before the epoch's
    /// reveal window closed (anyone, once an epoch): it loses `silencePenalty` to the verification budget.
    function reportSilence(uint256 poolId, address validator, uint32 epoch) external {
        Params storage p = _configured(poolId);
        Chain storage chain = _chains[poolId][Role.Validator][validator];
        (, uint64 closes) = revealWindowOf(poolId, epoch);
        if (
            block.timestamp <= closes || epoch < chain.firstEpoch || epoch > chain.endEpoch
                || _links[poolId][Role.Validator][validator][epoch] != bytes32(0) || _silenceCharged[poolId][validator][epoch]
        ) revert NotSilent(validator, epoch);
        _silenceCharged[poolId][validator][epoch] = true;
        _penalize(poolId, bytes32(0), Role.Validator, validator, WHY_VALIDATOR_WITHHELD, p.silencePenalty);
    }

    /// @notice Return the caller's stake locked here once its chain's last epoch is settled (`settledBy`).
    function withdrawBond(uint256 poolId, Role role) external {
        _configured(poolId);
        Chain storage chain = _chains[poolId][role][msg.sender];
        uint64 until = settledBy(poolId, chain.endEpoch);
        if (block.timestamp <= until) revert BondStillLocked(until);
        uint96 amount = chain.locked;
        if (amount == 0) revert ZeroAmount();
        chain.locked = 0;
        emit BondWithdrawn(poolId, role, msg.sender, amount);
        stakeManager.unlock(msg.sender, amount);
    }

    /// @notice Withdraw everything credited to the caller.
    function withdraw() external nonReentrant {
        uint256 amount = credits[msg.sender];
        if (amount == 0) revert ZeroAmount();
        credits[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        token.safeTransfer(msg.sender, amount);
    }

    // ------------------------------------------------------------------ views

    function getParams(uint256 poolId) external view returns (Params memory) {
        return _params[poolId];
    }

    function getChain(uint256 poolId, Role role, address account) external view returns (Chain memory) {
        return _chains[poolId][role][account];
    }

    /// @notice Epoch `epoch`'s beacon as recorded (`value` zero: not recorded) and its anchor block.
    function getBeacon(uint256 poolId, uint32 epoch) external view returns (Beacon memory) {
        return _beacons[poolId][epoch];
    }

    /// @notice The beacon the draws of epoch `epoch` use: the recorded one, or zero once none can be any more (the
    /// epoch over and no anchor's hash readable: R9.29's fallback); reverts `BeaconPending` while one still can.
    function beaconOf(uint256 poolId, uint32 epoch) public view returns (bytes32) {
        Beacon storage b = _beacons[poolId][epoch];
        if (b.value != 0) return b.value;
        if (epochOf(poolId, block.timestamp) <= epoch || (b.anchor != 0 && block.number <= uint256(b.anchor) + 256)) {
            revert BeaconPending(epoch);
        }
        return 0;
    }

    /// @notice The revealed link of `epoch` (zero: not revealed).
    function linkOf(uint256 poolId, Role role, address account, uint32 epoch) external view returns (bytes32) {
        return _links[poolId][role][account][epoch];
    }

    /// @notice The epoch of time `t` in pool `poolId` (0 before its `configure`: no chain covers epoch 0).
    function epochOf(uint256 poolId, uint256 t) public view returns (uint32) {
        uint256 start = genesis[poolId];
        return t <= start ? 0 : uint32((t - start) / _configured(poolId).epochLength);
    }

    /// @notice Until when epoch `epoch`'s files are settled against the chains that covered it: its reveal window
    /// closed and every case of it decided (the court's exit delay later). A bond returns, and a chain is replaced, after.
    function settledBy(uint256 poolId, uint32 epoch) public view returns (uint64) {
        (, uint64 closes) = revealWindowOf(poolId, epoch);
        return closes + court.exitDelay(poolId);
    }

    /// @notice When epoch `epoch`'s links may be revealed: from the epoch's end plus the pool's challenge window
    /// (every file of it judged, every undisputed verdict final) for `revealWindow` seconds.
    function revealWindowOf(uint256 poolId, uint32 epoch) public view returns (uint64 from, uint64 until) {
        Params storage p = _configured(poolId);
        from = genesis[poolId] + (uint64(epoch) + 1) * p.epochLength + _challengeWindow[poolId];
        until = from + p.revealWindow;
    }

    /// @notice Whether `validator` was drawn to audit `workId` (reverts `NotRevealed` until its link of the file's
    /// epoch is revealed: before that nobody, the validator aside, can compute it; `BeaconPending` until the epoch's
    /// beacon is settled).
    function isAudited(bytes32 workId, address validator) external view returns (bool) {
        (uint256 poolId, uint32 epoch) = _epochOfWork(workId);
        bytes32 link = _revealed(poolId, Role.Validator, validator, epoch);
        return _below(link, beaconOf(poolId, epoch), workId, _params[poolId].auditBps);
    }

    /// @notice Whether the worker of `workId` owed a forced error in it (reverts `NotRevealed` until its link of the
    /// file's epoch is revealed, `BeaconPending` until the epoch's beacon is settled).
    function isForced(bytes32 workId) external view returns (bool) {
        (uint256 poolId, uint32 epoch) = _epochOfWork(workId);
        bytes32 link = _revealed(poolId, Role.Worker, pools.getWork(workId).worker, epoch);
        return _below(link, beaconOf(poolId, epoch), workId, _params[poolId].forcedBps);
    }

    /// @notice The draw both chains use: `keccak(link ‖ beacon ‖ workId) < bps/10000` (of 2^256).
    function drawn(bytes32 link, bytes32 beacon, bytes32 workId, uint16 bps) external pure returns (bool) {
        return _below(link, beacon, workId, bps);
    }

    // ------------------------------------------------------------------ internal

    /// @dev The final case's pool, epoch and verdict, and whether its judge said the work valid, once the parties
    /// given are the case's and the epoch's reveal window has closed.
    function _settleable(bytes32 workId, address judge, address disputer)
        private
        view
        returns (uint256 poolId, uint32 epoch, bool accepted, bool judgeSaidValid)
    {
        uint16 reasonCode;
        uint24 judgeIndex;
        (poolId, epoch, accepted, reasonCode, judgeIndex) = _finalCase(workId);
        uint24 disputerIndex = _disputer(workId);
        _checkParty(poolId, workId, judge, judgeIndex);
        _checkParty(poolId, workId, disputer, disputerIndex);
        (, uint64 closes) = revealWindowOf(poolId, epoch);
        if (block.timestamp <= closes) revert OutsideRevealWindow(epoch, closes + 1, type(uint64).max);
        // the final verdict is the judge's unless a dispute overturned it (the court's reason code then says so)
        judgeSaidValid = accepted != (disputerIndex != 0 && reasonCode == court.REASON_DISPUTE());
    }

    /// @dev A forced error: `lazy` (it said valid) loses `wrongVerdictSlash`, `catcher` (it said invalid) takes the
    /// jackpot. The owed file is paid as an honest one (docs/protocol.md R9.28 (7)): rejected, the worker is refunded
    /// its slash and paid the file's reward; accepted (the pool paid the reward), it loses the slash.
    function _settleForced(
        uint256 poolId,
        bytes32 workId,
        bool accepted,
        address catcher,
        address lazy,
        IComputePool.WorkView memory w
    ) private {
        if (lazy != address(0)) {
            _penalize(poolId, workId, Role.Validator, lazy, WHY_JUDGED_VALID, court.getParams(poolId).wrongVerdictSlash);
        }
        uint256 refund;
        if (accepted) _penalize(poolId, workId, Role.Worker, w.worker, WHY_ACCEPTED, pools.getPool(poolId).params.slashAmount);
        else refund = _pay(poolId, w.worker, uint256(pools.getPool(poolId).params.slashAmount) + w.reward);
        uint256 jackpot = catcher != address(0) ? _pay(poolId, catcher, _params[poolId].jackpot) : 0;
        emit WorkSettled(poolId, workId, Outcome.Forced, catcher, jackpot, refund);
    }

    function _below(bytes32 link, bytes32 beacon, bytes32 workId, uint16 bps) private pure returns (bool) {
        return uint256(keccak256(abi.encode(link, beacon, workId))) < (type(uint256).max / BPS) * bps;
    }

    function _revealed(uint256 poolId, Role role, address account, uint32 epoch) private view returns (bytes32 link) {
        link = _links[poolId][role][account][epoch];
        if (link == bytes32(0)) revert NotRevealed(account, epoch);
    }

    function _epochOfWork(bytes32 workId) private view returns (uint256 poolId, uint32 epoch) {
        (uint32 pool, uint40 submittedAt,,,,,,,,) = court.cases(workId);
        poolId = pool;
        epoch = epochOf(poolId, submittedAt);
    }

    /// @dev The worker's forced-error outcome for the file: its chain does not cover the epoch (not forced), its link
    /// of the epoch was withheld, or the link decides.
    function _forced(uint256 poolId, uint32 epoch, address worker, bytes32 workId) private view returns (Outcome) {
        Chain storage chain = _chains[poolId][Role.Worker][worker];
        if (epoch < chain.firstEpoch || epoch > chain.endEpoch) return Outcome.NotForced;
        bytes32 link = _links[poolId][Role.Worker][worker][epoch];
        if (link == bytes32(0)) return Outcome.Withheld;
        return _below(link, beaconOf(poolId, epoch), workId, _params[poolId].forcedBps) ? Outcome.Forced : Outcome.NotForced;
    }

    /// @dev A final case's pool, epoch, verdict, reason code and judge index (reverts unless final here).
    function _finalCase(bytes32 workId)
        private
        view
        returns (uint256 poolId, uint32 epoch, bool accepted, uint16 reasonCode, uint24 judge)
    {
        (uint32 pool, uint40 submittedAt,,, IValidatorCourt.CaseState state, bool accepted_, uint24 judge_,, uint16 reason,)
        = court.cases(workId);
        if (state != IValidatorCourt.CaseState.Final) revert CaseNotFinal(workId);
        poolId = pool;
        _configured(poolId);
        return (poolId, epochOf(poolId, submittedAt), accepted_, reason, judge_);
    }

    function _disputer(bytes32 workId) private view returns (uint24 disputer) {
        (disputer,,,,,,,) = court.disputes(workId);
    }

    function _checkParty(uint256 poolId, bytes32 workId, address given, uint24 index) private view {
        bool ok = index == 0 ? given == address(0) : given != address(0) && court.getValidator(poolId, given).index == index;
        if (!ok) revert WrongParty(workId, given);
    }

    function _isCourtValidator(uint256 poolId, address account) private view returns (bool) {
        IValidatorCourt.ValidatorView memory v = court.getValidator(poolId, account);
        return v.index != 0 && v.deregisteredAt == 0;
    }

    /// @dev Whether `v` was in the case's set (the court's rule: registered by `submittedAt − activationDelay`, not
    /// deregistered by then, judged by its current stint).
    function _inCaseSet(uint256 poolId, bytes32 workId, address account) private view returns (bool) {
        (, uint40 submittedAt,,,,,,,,) = court.cases(workId);
        uint256 key = uint256(submittedAt) - court.getParams(poolId).activationDelay;
        IValidatorCourt.ValidatorView memory v = court.getValidator(poolId, account);
        return v.registeredAt <= key && (v.deregisteredAt == 0 || v.deregisteredAt > key);
    }

    /// @dev Take up to `amount` of `account`'s stake locked here into the verification budget.
    function _penalize(uint256 poolId, bytes32 workId, Role role, address account, uint8 why, uint256 amount) private {
        Chain storage chain = _chains[poolId][role][account];
        uint256 taken = amount < chain.locked ? amount : chain.locked;
        if (taken == 0) return;
        chain.locked -= uint96(taken);
        budget[poolId] += taken;
        emit Penalized(poolId, workId, account, why, taken);
        stakeManager.slash(account, taken, address(this), uint16(BPS));
    }

    /// @dev Credit `to` up to `amount` from the verification budget; returns what was credited.
    function _pay(uint256 poolId, address to, uint256 amount) private returns (uint256 paid) {
        uint256 left = budget[poolId];
        paid = amount < left ? amount : left;
        if (paid == 0) return 0;
        budget[poolId] = left - paid;
        credits[to] += paid;
        emit Credited(to, paid);
    }

    function _configured(uint256 poolId) private view returns (Params storage p) {
        p = _params[poolId];
        if (p.forcedBps == 0) revert NotConfigured(poolId);
    }
}
