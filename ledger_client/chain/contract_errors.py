"""One exception class per custom error of the proofswarm contracts (ours and OpenZeppelin's) — GENERATED
by ledger_client.chain.codegen, do not edit. Import them from ledger_client.chain.errors:
`except errors.StaleStep`.
"""

from __future__ import annotations

from typing import Final

from ledger_client.chain.error_bases import ContractRevert

__all__ = [
    "AccessControlBadConfirmation",
    "AccessControlUnauthorizedAccount",
    "AlreadyCommitted",
    "AlreadyConcurred",
    "AlreadyConfigured",
    "AlreadyJudged",
    "AlreadyMember",
    "AlreadyRegistered",
    "AlreadySettled",
    "AlreadyVoided",
    "AssignmentNotDrawn",
    "AssignmentRecorded",
    "BadBatch",
    "BadBatchParams",
    "BadChain",
    "BadCourtParams",
    "BadForcedErrorParams",
    "BadLink",
    "BadProof",
    "BadRun",
    "BadSamples",
    "BadSignature",
    "BatchExists",
    "BatchIsVoid",
    "BeaconAlreadyRecorded",
    "BeaconMissed",
    "BeaconPending",
    "BondStillLocked",
    "BountyBpsTooHigh",
    "CaseNotFinal",
    "CaseOpen",
    "ChallengeWindowClosed",
    "ChallengeWindowOpen",
    "ChallengeWindowOutOfRange",
    "ChallengerNotIndependent",
    "CommitteeNotDrawn",
    "CourtNotSoleValidator",
    "CourtPoolNotSupported",
    "ERC20InsufficientAllowance",
    "ERC20InsufficientBalance",
    "ERC20InvalidApprover",
    "ERC20InvalidReceiver",
    "ERC20InvalidSender",
    "ERC20InvalidSpender",
    "EpochNotPostable",
    "ExitAlreadyRequested",
    "FeesNotReclaimable",
    "InsufficientAllocation",
    "InsufficientBond",
    "InsufficientBonded",
    "InsufficientBudget",
    "InsufficientLocked",
    "InvalidBountyBps",
    "InvalidNonce",
    "NoValidators",
    "NotAssigned",
    "NotBonded",
    "NotChargeable",
    "NotClaimable",
    "NotCommitteeMember",
    "NotComputePool",
    "NotConfigured",
    "NotDuplicate",
    "NotEligible",
    "NotMember",
    "NotNextCounter",
    "NotParticipant",
    "NotPayable",
    "NotPoolOwner",
    "NotPoolTrainer",
    "NotPoolValidator",
    "NotRegistered",
    "NotRetired",
    "NotRevealed",
    "NotSilent",
    "NotWorkOwner",
    "NothingUnbonding",
    "OutsidePeriod",
    "OutsideRevealWindow",
    "OwnableInvalidOwner",
    "OwnableUnauthorizedAccount",
    "OwnerCannotValidate",
    "PinNotStale",
    "PoolNotActive",
    "PoolRetiredAlready",
    "ReentrancyGuardReentrantCall",
    "RevealMismatch",
    "RewardLockNotAfterWindow",
    "RewardLockTooLong",
    "RewardLocked",
    "SafeCastOverflowedUintDowncast",
    "SafeERC20FailedOperation",
    "SlashBelowSpotCheckBound",
    "SlasherNotContract",
    "SpotCheckBpsOutOfRange",
    "StaleStep",
    "StepNotContiguous",
    "StepNotPinned",
    "SubmissionNotPending",
    "TooManyPools",
    "TooManySamples",
    "TooManySteps",
    "TransferAmountMismatch",
    "UnbondingDelayOutOfRange",
    "UnbondingNotReady",
    "UnknownBatch",
    "UnknownPool",
    "UnknownStep",
    "UnknownWork",
    "ValidatorsAreFrozen",
    "WindowClosed",
    "WindowOpen",
    "WrongCaseState",
    "WrongParty",
    "ZeroAddress",
    "ZeroAmount",
    "ZeroDigest",
    "ZeroMaxSamples",
    "ZeroSlashAmount",
]


class AccessControlBadConfirmation(ContractRevert):
    """`AccessControlBadConfirmation()` of StakeManager."""

    error = "AccessControlBadConfirmation"


class AccessControlUnauthorizedAccount(ContractRevert):
    """`AccessControlUnauthorizedAccount(address account, bytes32 neededRole)` of StakeManager."""

    error = "AccessControlUnauthorizedAccount"


class AlreadyCommitted(ContractRevert):
    """`AlreadyCommitted(bytes32 workId, address voter)` of ValidatorCourt."""

    error = "AlreadyCommitted"


class AlreadyConcurred(ContractRevert):
    """`AlreadyConcurred(bytes32 workId, address validator)` of ValidatorCourt."""

    error = "AlreadyConcurred"


class AlreadyConfigured(ContractRevert):
    """`AlreadyConfigured(uint256 poolId)` of ForcedErrors, ValidatorCourt, WorkBatches."""

    error = "AlreadyConfigured"


class AlreadyJudged(ContractRevert):
    """`AlreadyJudged(bytes32 workId, uint8 status)` of ComputePool."""

    error = "AlreadyJudged"


class AlreadyMember(ContractRevert):
    """`AlreadyMember(uint256 poolId, address worker)` of ComputePool."""

    error = "AlreadyMember"


class AlreadyRegistered(ContractRevert):
    """`AlreadyRegistered(uint256 poolId, address validator)` of ValidatorCourt."""

    error = "AlreadyRegistered"


class AlreadySettled(ContractRevert):
    """`AlreadySettled(bytes32 workId)` of ForcedErrors."""

    error = "AlreadySettled"


class AlreadyVoided(ContractRevert):
    """`AlreadyVoided(uint32 counter)` of WorkBatches."""

    error = "AlreadyVoided"


class AssignmentNotDrawn(ContractRevert):
    """`AssignmentNotDrawn(bytes32 workId)` of ValidatorCourt."""

    error = "AssignmentNotDrawn"


class AssignmentRecorded(ContractRevert):
    """`AssignmentRecorded(bytes32 workId)` of ValidatorCourt."""

    error = "AssignmentRecorded"


class BadBatch(ContractRevert):
    """`BadBatch()` of WorkBatches."""

    error = "BadBatch"


class BadBatchParams(ContractRevert):
    """`BadBatchParams(uint8 rule)` of WorkBatches."""

    error = "BadBatchParams"


class BadChain(ContractRevert):
    """`BadChain(uint256 poolId, address account)` of ForcedErrors."""

    error = "BadChain"


class BadCourtParams(ContractRevert):
    """`BadCourtParams(uint8 rule)` of CourtRules, ValidatorCourt."""

    error = "BadCourtParams"


class BadForcedErrorParams(ContractRevert):
    """`BadForcedErrorParams(uint8 rule)` of ForcedErrors."""

    error = "BadForcedErrorParams"


class BadLink(ContractRevert):
    """`BadLink(uint32 epoch)` of ForcedErrors."""

    error = "BadLink"


class BadProof(ContractRevert):
    """`BadProof()` of WorkBatches."""

    error = "BadProof"


class BadRun(ContractRevert):
    """`BadRun(uint32 firstCounter, uint32 count)` of WorkBatches."""

    error = "BadRun"


class BadSamples(ContractRevert):
    """`BadSamples(uint32 counter, uint32 samples)` of WorkBatches."""

    error = "BadSamples"


class BadSignature(ContractRevert):
    """`BadSignature(uint32 firstCounter)` of WorkBatches."""

    error = "BadSignature"


class BatchExists(ContractRevert):
    """`BatchExists(bytes32 batchId)` of WorkBatches."""

    error = "BatchExists"


class BatchIsVoid(ContractRevert):
    """`BatchIsVoid(bytes32 batchId)` of WorkBatches."""

    error = "BatchIsVoid"


class BeaconAlreadyRecorded(ContractRevert):
    """`BeaconAlreadyRecorded(uint32 epoch)` of ForcedErrors."""

    error = "BeaconAlreadyRecorded"


class BeaconMissed(ContractRevert):
    """`BeaconMissed(uint32 epoch)` of ForcedErrors."""

    error = "BeaconMissed"


class BeaconPending(ContractRevert):
    """`BeaconPending(uint32 epoch)` of ForcedErrors."""

    error = "BeaconPending"


class BondStillLocked(ContractRevert):
    """`BondStillLocked(uint64 exitAt, uint256 reserved)` of ForcedErrors, ValidatorCourt, WorkBatches."""

    error = "BondStillLocked"


class BountyBpsTooHigh(ContractRevert):
    """`BountyBpsTooHigh(uint16 bountyBps, uint16 maxBps)` of ComputePool."""

    error = "BountyBpsTooHigh"


class CaseNotFinal(ContractRevert):
    """`CaseNotFinal(bytes32 workId)` of ForcedErrors."""

    error = "CaseNotFinal"


class CaseOpen(ContractRevert):
    """`CaseOpen(bytes32 workId)` of ComputePool."""

    error = "CaseOpen"


class ChallengeWindowClosed(ContractRevert):
    """`ChallengeWindowClosed(bytes32 workId)` of ComputePool."""

    error = "ChallengeWindowClosed"


class ChallengeWindowOpen(ContractRevert):
    """`ChallengeWindowOpen(bytes32 workId)` of ComputePool."""

    error = "ChallengeWindowOpen"


class ChallengeWindowOutOfRange(ContractRevert):
    """`ChallengeWindowOutOfRange(uint32 challengeWindow, uint32 max)` of ComputePool."""

    error = "ChallengeWindowOutOfRange"


class ChallengerNotIndependent(ContractRevert):
    """`ChallengerNotIndependent(bytes32 workId, address challenger)` of ComputePool, WorkBatches."""

    error = "ChallengerNotIndependent"


class CommitteeNotDrawn(ContractRevert):
    """`CommitteeNotDrawn(bytes32 workId)` of ValidatorCourt."""

    error = "CommitteeNotDrawn"


class CourtNotSoleValidator(ContractRevert):
    """`CourtNotSoleValidator(uint256 poolId)` of CourtRules, ValidatorCourt."""

    error = "CourtNotSoleValidator"


class CourtPoolNotSupported(ContractRevert):
    """`CourtPoolNotSupported(uint256 poolId)` of WorkBatches."""

    error = "CourtPoolNotSupported"


class ERC20InsufficientAllowance(ContractRevert):
    """`ERC20InsufficientAllowance(address spender, uint256 allowance, uint256 needed)` of DevStakeToken."""

    error = "ERC20InsufficientAllowance"


class ERC20InsufficientBalance(ContractRevert):
    """`ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed)` of DevStakeToken."""

    error = "ERC20InsufficientBalance"


class ERC20InvalidApprover(ContractRevert):
    """`ERC20InvalidApprover(address approver)` of DevStakeToken."""

    error = "ERC20InvalidApprover"


class ERC20InvalidReceiver(ContractRevert):
    """`ERC20InvalidReceiver(address receiver)` of DevStakeToken."""

    error = "ERC20InvalidReceiver"


class ERC20InvalidSender(ContractRevert):
    """`ERC20InvalidSender(address sender)` of DevStakeToken."""

    error = "ERC20InvalidSender"


class ERC20InvalidSpender(ContractRevert):
    """`ERC20InvalidSpender(address spender)` of DevStakeToken."""

    error = "ERC20InvalidSpender"


class EpochNotPostable(ContractRevert):
    """`EpochNotPostable(uint32 epoch)` of WorkBatches."""

    error = "EpochNotPostable"


class ExitAlreadyRequested(ContractRevert):
    """`ExitAlreadyRequested()` of WorkBatches."""

    error = "ExitAlreadyRequested"


class FeesNotReclaimable(ContractRevert):
    """`FeesNotReclaimable(uint256 poolId, uint64 at)` of ValidatorCourt."""

    error = "FeesNotReclaimable"


class InsufficientAllocation(ContractRevert):
    """`InsufficientAllocation(uint256 allocation, uint256 required)` of ComputePool."""

    error = "InsufficientAllocation"


class InsufficientBond(ContractRevert):
    """`InsufficientBond(uint256 available, uint256 needed)` of ValidatorCourt."""

    error = "InsufficientBond"


class InsufficientBonded(ContractRevert):
    """`InsufficientBonded(uint256 requested, uint256 bonded)` of StakeManager."""

    error = "InsufficientBonded"


class InsufficientBudget(ContractRevert):
    """`InsufficientBudget(uint256 needed, uint256 budget)` of ComputePool, WorkBatches."""

    error = "InsufficientBudget"


class InsufficientLocked(ContractRevert):
    """`InsufficientLocked(uint256 requested, uint256 locked)` of StakeManager."""

    error = "InsufficientLocked"


class InvalidBountyBps(ContractRevert):
    """`InvalidBountyBps(uint16 bountyBps)` of StakeManager."""

    error = "InvalidBountyBps"


class InvalidNonce(ContractRevert):
    """`InvalidNonce(uint64 nonce, uint64 expected)` of ComputePool."""

    error = "InvalidNonce"


class NoValidators(ContractRevert):
    """`NoValidators()` of ComputePool."""

    error = "NoValidators"


class NotAssigned(ContractRevert):
    """`NotAssigned(bytes32 workId, address assigned)` of ValidatorCourt."""

    error = "NotAssigned"


class NotBonded(ContractRevert):
    """`NotBonded(address worker, uint32 epoch)` of WorkBatches."""

    error = "NotBonded"


class NotChargeable(ContractRevert):
    """`NotChargeable(bytes32 workId, address auditor)` of ForcedErrors."""

    error = "NotChargeable"


class NotClaimable(ContractRevert):
    """`NotClaimable(bytes32 workId, uint8 status)` of ComputePool."""

    error = "NotClaimable"


class NotCommitteeMember(ContractRevert):
    """`NotCommitteeMember(bytes32 workId, address caller)` of ValidatorCourt."""

    error = "NotCommitteeMember"


class NotComputePool(ContractRevert):
    """`NotComputePool(address caller)` of ValidatorCourt."""

    error = "NotComputePool"


class NotConfigured(ContractRevert):
    """`NotConfigured(uint256 poolId)` of ForcedErrors, ValidatorCourt, WorkBatches."""

    error = "NotConfigured"


class NotDuplicate(ContractRevert):
    """`NotDuplicate()` of WorkBatches."""

    error = "NotDuplicate"


class NotEligible(ContractRevert):
    """`NotEligible(bytes32 workId, address caller)` of ValidatorCourt."""

    error = "NotEligible"


class NotMember(ContractRevert):
    """`NotMember(uint256 poolId, address worker)` of ComputePool, WorkBatches."""

    error = "NotMember"


class NotNextCounter(ContractRevert):
    """`NotNextCounter(uint32 epoch, uint32 first, uint32 expected)` of WorkBatches."""

    error = "NotNextCounter"


class NotParticipant(ContractRevert):
    """`NotParticipant(uint256 poolId, uint8 role, address account)` of ForcedErrors."""

    error = "NotParticipant"


class NotPayable(ContractRevert):
    """`NotPayable(uint32 counter)` of WorkBatches."""

    error = "NotPayable"


class NotPoolOwner(ContractRevert):
    """`NotPoolOwner(uint256 poolId, address caller)` of ComputePool, ForcedErrors, ValidatorCourt, WorkBatches."""

    error = "NotPoolOwner"


class NotPoolTrainer(ContractRevert):
    """`NotPoolTrainer(uint256 poolId, address caller)` of ComputePool."""

    error = "NotPoolTrainer"


class NotPoolValidator(ContractRevert):
    """`NotPoolValidator(uint256 poolId, address caller)` of ComputePool, WorkBatches."""

    error = "NotPoolValidator"


class NotRegistered(ContractRevert):
    """`NotRegistered(uint256 poolId, address validator)` of ValidatorCourt."""

    error = "NotRegistered"


class NotRetired(ContractRevert):
    """`NotRetired(uint256 poolId, uint64 reclaimableAt)` of WorkBatches."""

    error = "NotRetired"


class NotRevealed(ContractRevert):
    """`NotRevealed(address account, uint32 epoch)` of ForcedErrors."""

    error = "NotRevealed"


class NotSilent(ContractRevert):
    """`NotSilent(address account, uint32 epoch)` of ForcedErrors."""

    error = "NotSilent"


class NotWorkOwner(ContractRevert):
    """`NotWorkOwner(bytes32 workId, address caller)` of ComputePool."""

    error = "NotWorkOwner"


class NothingUnbonding(ContractRevert):
    """`NothingUnbonding()` of StakeManager."""

    error = "NothingUnbonding"


class OutsidePeriod(ContractRevert):
    """`OutsidePeriod(bytes32 workId, uint64 from, uint64 until)` of ValidatorCourt."""

    error = "OutsidePeriod"


class OutsideRevealWindow(ContractRevert):
    """`OutsideRevealWindow(uint32 epoch, uint64 from, uint64 until)` of ForcedErrors."""

    error = "OutsideRevealWindow"


class OwnableInvalidOwner(ContractRevert):
    """`OwnableInvalidOwner(address owner)` of DevStakeToken."""

    error = "OwnableInvalidOwner"


class OwnableUnauthorizedAccount(ContractRevert):
    """`OwnableUnauthorizedAccount(address account)` of DevStakeToken."""

    error = "OwnableUnauthorizedAccount"


class OwnerCannotValidate(ContractRevert):
    """`OwnerCannotValidate(uint256 poolId)` of ValidatorCourt."""

    error = "OwnerCannotValidate"


class PinNotStale(ContractRevert):
    """`PinNotStale(uint64 pinnedStep, uint64 latestStep)` of ComputePool."""

    error = "PinNotStale"


class PoolNotActive(ContractRevert):
    """`PoolNotActive(uint256 poolId)` of ComputePool."""

    error = "PoolNotActive"


class PoolRetiredAlready(ContractRevert):
    """`PoolRetiredAlready(uint256 poolId)` of WorkBatches."""

    error = "PoolRetiredAlready"


class ReentrancyGuardReentrantCall(ContractRevert):
    """`ReentrancyGuardReentrantCall()` of ComputePool, ForcedErrors, StakeManager, ValidatorCourt."""

    error = "ReentrancyGuardReentrantCall"


class RevealMismatch(ContractRevert):
    """`RevealMismatch(bytes32 workId, address voter)` of ValidatorCourt."""

    error = "RevealMismatch"


class RewardLockNotAfterWindow(ContractRevert):
    """`RewardLockNotAfterWindow(uint32 rewardLock, uint32 challengeWindow)` of ComputePool."""

    error = "RewardLockNotAfterWindow"


class RewardLockTooLong(ContractRevert):
    """`RewardLockTooLong(uint32 rewardLock, uint32 max)` of ComputePool."""

    error = "RewardLockTooLong"


class RewardLocked(ContractRevert):
    """`RewardLocked(bytes32 workId, uint64 unlockAt)` of ComputePool."""

    error = "RewardLocked"


class SafeCastOverflowedUintDowncast(ContractRevert):
    """`SafeCastOverflowedUintDowncast(uint8 bits, uint256 value)` of ComputePool."""

    error = "SafeCastOverflowedUintDowncast"


class SafeERC20FailedOperation(ContractRevert):
    """`SafeERC20FailedOperation(address token)` of ComputePool, ForcedErrors, StakeManager, ValidatorCourt, WorkBatches."""

    error = "SafeERC20FailedOperation"


class SlashBelowSpotCheckBound(ContractRevert):
    """`SlashBelowSpotCheckBound(uint128 slashAmount, uint256 minSlash)` of ComputePool."""

    error = "SlashBelowSpotCheckBound"


class SlasherNotContract(ContractRevert):
    """`SlasherNotContract(address account)` of StakeManager."""

    error = "SlasherNotContract"


class SpotCheckBpsOutOfRange(ContractRevert):
    """`SpotCheckBpsOutOfRange(uint16 spotCheckBps, uint16 maxBps)` of ComputePool."""

    error = "SpotCheckBpsOutOfRange"


class StaleStep(ContractRevert):
    """`StaleStep(uint64 step, uint64 latestStep, uint32 maxStaleness)` of ComputePool."""

    error = "StaleStep"


class StepNotContiguous(ContractRevert):
    """`StepNotContiguous(uint64 step, uint64 expected)` of ComputePool."""

    error = "StepNotContiguous"


class StepNotPinned(ContractRevert):
    """`StepNotPinned(uint64 step, uint64 pinnedStep)` of ComputePool."""

    error = "StepNotPinned"


class SubmissionNotPending(ContractRevert):
    """`SubmissionNotPending(bytes32 workId)` of ValidatorCourt."""

    error = "SubmissionNotPending"


class TooManyPools(ContractRevert):
    """`TooManyPools(uint256 poolId)` of ComputePool."""

    error = "TooManyPools"


class TooManySamples(ContractRevert):
    """`TooManySamples(uint32 nSamples, uint32 maxSamplesPerWork)` of ComputePool."""

    error = "TooManySamples"


class TooManySteps(ContractRevert):
    """`TooManySteps(uint64 step)` of ComputePool."""

    error = "TooManySteps"


class TransferAmountMismatch(ContractRevert):
    """`TransferAmountMismatch(uint256 expected, uint256 received)` of ComputePool, StakeManager, ValidatorCourt, WorkBatches."""

    error = "TransferAmountMismatch"


class UnbondingDelayOutOfRange(ContractRevert):
    """`UnbondingDelayOutOfRange(uint64 delay, uint64 min, uint64 max)` of StakeManager."""

    error = "UnbondingDelayOutOfRange"


class UnbondingNotReady(ContractRevert):
    """`UnbondingNotReady(uint64 readyAt)` of StakeManager."""

    error = "UnbondingNotReady"


class UnknownBatch(ContractRevert):
    """`UnknownBatch(bytes32 batchId)` of WorkBatches."""

    error = "UnknownBatch"


class UnknownPool(ContractRevert):
    """`UnknownPool(uint256 poolId)` of ComputePool, ForcedErrors, ValidatorCourt."""

    error = "UnknownPool"


class UnknownStep(ContractRevert):
    """`UnknownStep(uint64 step)` of ComputePool."""

    error = "UnknownStep"


class UnknownWork(ContractRevert):
    """`UnknownWork(bytes32 workId)` of ComputePool."""

    error = "UnknownWork"


class ValidatorsAreFrozen(ContractRevert):
    """`ValidatorsAreFrozen(uint256 poolId)` of ComputePool."""

    error = "ValidatorsAreFrozen"


class WindowClosed(ContractRevert):
    """`WindowClosed(bytes32 batchId)` of WorkBatches."""

    error = "WindowClosed"


class WindowOpen(ContractRevert):
    """`WindowOpen(bytes32 batchId, uint64 closesAt)` of WorkBatches."""

    error = "WindowOpen"


class WrongCaseState(ContractRevert):
    """`WrongCaseState(bytes32 workId, uint8 state)` of ValidatorCourt."""

    error = "WrongCaseState"


class WrongParty(ContractRevert):
    """`WrongParty(bytes32 workId, address given)` of ForcedErrors."""

    error = "WrongParty"


class ZeroAddress(ContractRevert):
    """`ZeroAddress()` of ComputePool, StakeManager, ValidatorCourt."""

    error = "ZeroAddress"


class ZeroAmount(ContractRevert):
    """`ZeroAmount()` of ComputePool, ForcedErrors, StakeManager, ValidatorCourt, WorkBatches."""

    error = "ZeroAmount"


class ZeroDigest(ContractRevert):
    """`ZeroDigest()` of ComputePool."""

    error = "ZeroDigest"


class ZeroMaxSamples(ContractRevert):
    """`ZeroMaxSamples()` of ComputePool."""

    error = "ZeroMaxSamples"


class ZeroSlashAmount(ContractRevert):
    """`ZeroSlashAmount()` of ComputePool."""

    error = "ZeroSlashAmount"


SELECTORS: Final[dict[bytes, tuple[type[ContractRevert], tuple[tuple[str, str], ...]]]] = {
    bytes.fromhex("6697b232"): (AccessControlBadConfirmation, ()),
    bytes.fromhex("e2517d3f"): (AccessControlUnauthorizedAccount, (("account", "address"), ("neededRole", "bytes32"))),
    bytes.fromhex("83850ec6"): (AlreadyCommitted, (("workId", "bytes32"), ("voter", "address"))),
    bytes.fromhex("4fca20d5"): (AlreadyConcurred, (("workId", "bytes32"), ("validator", "address"))),
    bytes.fromhex("33896607"): (AlreadyConfigured, (("poolId", "uint256"),)),
    bytes.fromhex("ae2e80f7"): (AlreadyJudged, (("workId", "bytes32"), ("status", "uint8"))),
    bytes.fromhex("bdc60857"): (AlreadyMember, (("poolId", "uint256"), ("worker", "address"))),
    bytes.fromhex("8015494f"): (AlreadyRegistered, (("poolId", "uint256"), ("validator", "address"))),
    bytes.fromhex("b196a44a"): (AlreadySettled, (("workId", "bytes32"),)),
    bytes.fromhex("1cd23a5d"): (AlreadyVoided, (("counter", "uint32"),)),
    bytes.fromhex("496c8031"): (AssignmentNotDrawn, (("workId", "bytes32"),)),
    bytes.fromhex("68b7b940"): (AssignmentRecorded, (("workId", "bytes32"),)),
    bytes.fromhex("86bdc25c"): (BadBatch, ()),
    bytes.fromhex("01eb3693"): (BadBatchParams, (("rule", "uint8"),)),
    bytes.fromhex("95b6255e"): (BadChain, (("poolId", "uint256"), ("account", "address"))),
    bytes.fromhex("a7fd805c"): (BadCourtParams, (("rule", "uint8"),)),
    bytes.fromhex("31488084"): (BadForcedErrorParams, (("rule", "uint8"),)),
    bytes.fromhex("384ebb08"): (BadLink, (("epoch", "uint32"),)),
    bytes.fromhex("7ca55c77"): (BadProof, ()),
    bytes.fromhex("a89ab3a8"): (BadRun, (("firstCounter", "uint32"), ("count", "uint32"))),
    bytes.fromhex("d63c638e"): (BadSamples, (("counter", "uint32"), ("samples", "uint32"))),
    bytes.fromhex("0e18219b"): (BadSignature, (("firstCounter", "uint32"),)),
    bytes.fromhex("8367361d"): (BatchExists, (("batchId", "bytes32"),)),
    bytes.fromhex("7bacb184"): (BatchIsVoid, (("batchId", "bytes32"),)),
    bytes.fromhex("0cf7a55b"): (BeaconAlreadyRecorded, (("epoch", "uint32"),)),
    bytes.fromhex("5bca539a"): (BeaconMissed, (("epoch", "uint32"),)),
    bytes.fromhex("b66c4e6e"): (BeaconPending, (("epoch", "uint32"),)),
    bytes.fromhex("0c32bf06"): (BondStillLocked, (("until", "uint64"),)),
    bytes.fromhex("5abfccfe"): (BondStillLocked, (("exitAt", "uint64"), ("reserved", "uint256"))),
    bytes.fromhex("55dd302a"): (BountyBpsTooHigh, (("bountyBps", "uint16"), ("maxBps", "uint16"))),
    bytes.fromhex("45e669e8"): (CaseNotFinal, (("workId", "bytes32"),)),
    bytes.fromhex("557b18d4"): (CaseOpen, (("workId", "bytes32"),)),
    bytes.fromhex("8da5bdf5"): (ChallengeWindowClosed, (("workId", "bytes32"),)),
    bytes.fromhex("4976d519"): (ChallengeWindowOpen, (("workId", "bytes32"),)),
    bytes.fromhex("17f862be"): (ChallengeWindowOutOfRange, (("challengeWindow", "uint32"), ("max", "uint32"))),
    bytes.fromhex("53d7f82f"): (ChallengerNotIndependent, (("challenger", "address"),)),
    bytes.fromhex("fa0dce51"): (ChallengerNotIndependent, (("workId", "bytes32"), ("challenger", "address"))),
    bytes.fromhex("110a84e5"): (CommitteeNotDrawn, (("workId", "bytes32"),)),
    bytes.fromhex("aa621a68"): (CourtNotSoleValidator, (("poolId", "uint256"),)),
    bytes.fromhex("65f142d1"): (CourtPoolNotSupported, (("poolId", "uint256"),)),
    bytes.fromhex("fb8f41b2"): (ERC20InsufficientAllowance,
                                (("spender", "address"), ("allowance", "uint256"), ("needed", "uint256"))),
    bytes.fromhex("e450d38c"): (ERC20InsufficientBalance,
                                (("sender", "address"), ("balance", "uint256"), ("needed", "uint256"))),
    bytes.fromhex("e602df05"): (ERC20InvalidApprover, (("approver", "address"),)),
    bytes.fromhex("ec442f05"): (ERC20InvalidReceiver, (("receiver", "address"),)),
    bytes.fromhex("96c6fd1e"): (ERC20InvalidSender, (("sender", "address"),)),
    bytes.fromhex("94280d62"): (ERC20InvalidSpender, (("spender", "address"),)),
    bytes.fromhex("0006a317"): (EpochNotPostable, (("epoch", "uint32"),)),
    bytes.fromhex("e7f70e65"): (ExitAlreadyRequested, ()),
    bytes.fromhex("bf1b25fe"): (FeesNotReclaimable, (("poolId", "uint256"), ("at", "uint64"))),
    bytes.fromhex("af4956d0"): (InsufficientAllocation, (("allocation", "uint256"), ("required", "uint256"))),
    bytes.fromhex("44d4caf7"): (InsufficientBond, (("available", "uint256"), ("needed", "uint256"))),
    bytes.fromhex("f3d71954"): (InsufficientBonded, (("requested", "uint256"), ("bonded", "uint256"))),
    bytes.fromhex("a9a711d0"): (InsufficientBudget, (("needed", "uint256"), ("budget", "uint256"))),
    bytes.fromhex("6ccf73e9"): (InsufficientLocked, (("requested", "uint256"), ("locked", "uint256"))),
    bytes.fromhex("1a4e858a"): (InvalidBountyBps, (("bountyBps", "uint16"),)),
    bytes.fromhex("f917ffea"): (InvalidNonce, (("nonce", "uint64"), ("expected", "uint64"))),
    bytes.fromhex("9fc51d38"): (NoValidators, ()),
    bytes.fromhex("df2c830c"): (NotAssigned, (("workId", "bytes32"), ("assigned", "address"))),
    bytes.fromhex("54d95fe7"): (NotBonded, (("worker", "address"), ("epoch", "uint32"))),
    bytes.fromhex("d2af3ad4"): (NotChargeable, (("workId", "bytes32"), ("auditor", "address"))),
    bytes.fromhex("10002c93"): (NotClaimable, (("workId", "bytes32"), ("status", "uint8"))),
    bytes.fromhex("5ada619c"): (NotCommitteeMember, (("workId", "bytes32"), ("caller", "address"))),
    bytes.fromhex("ffee2ded"): (NotComputePool, (("caller", "address"),)),
    bytes.fromhex("9b04588d"): (NotConfigured, (("poolId", "uint256"),)),
    bytes.fromhex("d7400027"): (NotDuplicate, ()),
    bytes.fromhex("21836768"): (NotEligible, (("workId", "bytes32"), ("caller", "address"))),
    bytes.fromhex("019b63f8"): (NotMember, (("poolId", "uint256"), ("worker", "address"))),
    bytes.fromhex("cc217df9"): (NotNextCounter, (("epoch", "uint32"), ("first", "uint32"), ("expected", "uint32"))),
    bytes.fromhex("02745035"): (NotParticipant, (("poolId", "uint256"), ("role", "uint8"), ("account", "address"))),
    bytes.fromhex("4d0ee6f8"): (NotPayable, (("counter", "uint32"),)),
    bytes.fromhex("e484f51e"): (NotPoolOwner, (("poolId", "uint256"), ("caller", "address"))),
    bytes.fromhex("059386ef"): (NotPoolTrainer, (("poolId", "uint256"), ("caller", "address"))),
    bytes.fromhex("a63bc391"): (NotPoolValidator, (("poolId", "uint256"), ("caller", "address"))),
    bytes.fromhex("e4e1e6e2"): (NotRegistered, (("poolId", "uint256"), ("validator", "address"))),
    bytes.fromhex("33a005cb"): (NotRetired, (("poolId", "uint256"), ("reclaimableAt", "uint64"))),
    bytes.fromhex("8d6abe9f"): (NotRevealed, (("account", "address"), ("epoch", "uint32"))),
    bytes.fromhex("94adeaf3"): (NotSilent, (("account", "address"), ("epoch", "uint32"))),
    bytes.fromhex("c4a43ed6"): (NotWorkOwner, (("workId", "bytes32"), ("caller", "address"))),
    bytes.fromhex("262b9d74"): (NothingUnbonding, ()),
    bytes.fromhex("41511824"): (OutsidePeriod, (("workId", "bytes32"), ("from", "uint64"), ("until", "uint64"))),
    bytes.fromhex("2acb9190"): (OutsideRevealWindow, (("epoch", "uint32"), ("from", "uint64"), ("until", "uint64"))),
    bytes.fromhex("1e4fbdf7"): (OwnableInvalidOwner, (("owner", "address"),)),
    bytes.fromhex("118cdaa7"): (OwnableUnauthorizedAccount, (("account", "address"),)),
    bytes.fromhex("cea82abd"): (OwnerCannotValidate, (("poolId", "uint256"),)),
    bytes.fromhex("63543243"): (PinNotStale, (("pinnedStep", "uint64"), ("latestStep", "uint64"))),
    bytes.fromhex("01a358cc"): (PoolNotActive, (("poolId", "uint256"),)),
    bytes.fromhex("f7f8b499"): (PoolRetiredAlready, (("poolId", "uint256"),)),
    bytes.fromhex("3ee5aeb5"): (ReentrancyGuardReentrantCall, ()),
    bytes.fromhex("e856d9ff"): (RevealMismatch, (("workId", "bytes32"), ("voter", "address"))),
    bytes.fromhex("da72312d"): (RewardLockNotAfterWindow, (("rewardLock", "uint32"), ("challengeWindow", "uint32"))),
    bytes.fromhex("0b0da876"): (RewardLockTooLong, (("rewardLock", "uint32"), ("max", "uint32"))),
    bytes.fromhex("ba411bb8"): (RewardLocked, (("workId", "bytes32"), ("unlockAt", "uint64"))),
    bytes.fromhex("6dfcc650"): (SafeCastOverflowedUintDowncast, (("bits", "uint8"), ("value", "uint256"))),
    bytes.fromhex("5274afe7"): (SafeERC20FailedOperation, (("token", "address"),)),
    bytes.fromhex("03ecabe9"): (SlashBelowSpotCheckBound, (("slashAmount", "uint128"), ("minSlash", "uint256"))),
    bytes.fromhex("f83be7b1"): (SlasherNotContract, (("account", "address"),)),
    bytes.fromhex("285525d9"): (SpotCheckBpsOutOfRange, (("spotCheckBps", "uint16"), ("maxBps", "uint16"))),
    bytes.fromhex("42e77312"): (StaleStep, (("step", "uint64"), ("latestStep", "uint64"), ("maxStaleness", "uint32"))),
    bytes.fromhex("07360e17"): (StepNotContiguous, (("step", "uint64"), ("expected", "uint64"))),
    bytes.fromhex("33879fa9"): (StepNotPinned, (("step", "uint64"), ("pinnedStep", "uint64"))),
    bytes.fromhex("e29d73ff"): (SubmissionNotPending, (("workId", "bytes32"),)),
    bytes.fromhex("040fdddd"): (TooManyPools, (("poolId", "uint256"),)),
    bytes.fromhex("ee0ffa50"): (TooManySamples, (("nSamples", "uint32"), ("maxSamplesPerWork", "uint32"))),
    bytes.fromhex("9339861c"): (TooManySteps, (("step", "uint64"),)),
    bytes.fromhex("60cb8da6"): (TransferAmountMismatch, (("amount", "uint256"),)),
    bytes.fromhex("b6a9b654"): (TransferAmountMismatch, (("expected", "uint256"), ("received", "uint256"))),
    bytes.fromhex("e22c089d"): (UnbondingDelayOutOfRange, (("delay", "uint64"), ("min", "uint64"), ("max", "uint64"))),
    bytes.fromhex("bdeb7900"): (UnbondingNotReady, (("readyAt", "uint64"),)),
    bytes.fromhex("877402b0"): (UnknownBatch, (("batchId", "bytes32"),)),
    bytes.fromhex("4fd97f14"): (UnknownPool, (("poolId", "uint256"),)),
    bytes.fromhex("ab37368d"): (UnknownStep, (("step", "uint64"),)),
    bytes.fromhex("9c81b58a"): (UnknownWork, (("workId", "bytes32"),)),
    bytes.fromhex("37140475"): (ValidatorsAreFrozen, (("poolId", "uint256"),)),
    bytes.fromhex("613ac8e3"): (WindowClosed, (("batchId", "bytes32"),)),
    bytes.fromhex("d5566f66"): (WindowOpen, (("batchId", "bytes32"), ("closesAt", "uint64"))),
    bytes.fromhex("8410903b"): (WrongCaseState, (("workId", "bytes32"), ("state", "uint8"))),
    bytes.fromhex("a267db42"): (WrongParty, (("workId", "bytes32"), ("given", "address"))),
    bytes.fromhex("d92e233d"): (ZeroAddress, ()),
    bytes.fromhex("1f2a2005"): (ZeroAmount, ()),
    bytes.fromhex("506f3a1b"): (ZeroDigest, ()),
    bytes.fromhex("74da1b1c"): (ZeroMaxSamples, ()),
    bytes.fromhex("06a4dd40"): (ZeroSlashAmount, ()),
}
"""Each custom error's 4-byte selector: its class and its arguments (name, ABI type)."""
