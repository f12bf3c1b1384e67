// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title ValidatorSet — a court pool's validators: the registry, and the active set over time
/// @notice The registry is append-only (a validator keeps its 1-based index for good); the active set is
/// compact (deregistering moves the last member into the leaver's place) and every change of it is
/// recorded with its time, so that the set at any past time is read back in O(1) reads when it has not
/// changed since, else by binary search. The ValidatorCourt judges a case by the set as it was a fixed
/// delay before the submission: nothing done after that moment changes who may be drawn.
/// A linked library (`drawCommittee`), so that the ValidatorCourt fits EIP-170.
library ValidatorSet {
    /// @dev One slot: what a verdict needs to read and reserve.
    struct Validator {
        uint24 index;
        uint40 deregisteredAt;
        uint96 locked;
        uint96 reserved;
    }

    /// @dev `position`: 1-based place in the active set (0 = not active).
    struct Entry {
        address validator;
        uint40 registeredAt;
        uint24 position;
    }

    /// @dev A value from time `at` on.
    struct Point {
        uint40 at;
        uint216 value;
    }

    /// @dev A value and its history: `since`/`value` (one slot) answer every lookup at or after the last
    /// change; `past` (every change, in time order) answers older ones by binary search.
    struct History {
        uint40 since;
        uint216 value;
        Point[] past;
    }

    /// @dev The active set over time: its size, and the registry index at each 0-based position.
    struct Set {
        History count;
        mapping(uint256 position => History) at;
    }

    /// @dev What a committee draw needs besides storage: the time of the case's set, the seed, the seats,
    /// the stake each seat reserves, and the registry indices that may not sit (judge, disputer, worker).
    struct Draw {
        uint256 key;
        bytes32 seed;
        uint256 size;
        uint256 penalty;
        uint256 judge;
        uint256 disputer;
        uint256 worker;
    }

    /// @notice Add registry `index` at the end of the active set; returns its 1-based position.
    function add(Set storage s, uint256 index) external returns (uint24 position) {
        uint256 n = s.count.value;
        record(s.at[n], index);
        record(s.count, n + 1);
        return uint24(n + 1);
    }

    /// @notice Remove the member at 1-based `position`; returns the registry index of the member moved
    /// into its place (0 if it was the last).
    function remove(Set storage s, uint256 position) external returns (uint256 moved) {
        uint256 last = s.count.value - 1;
        if (position - 1 != last) {
            moved = s.at[last].value;
            record(s.at[position - 1], moved);
        }
        record(s.count, last);
    }

    /// @notice Free `amount` of `who`'s reserved stake; when that lifts its unreserved stake from below
    /// `exposure` (what a verdict reserves) to at least it, record the time in `freedAt` (the silence rule).
    function release(
        mapping(address => Validator) storage validators,
        mapping(address => uint40) storage freedAt,
        address who,
        uint256 amount,
        uint256 exposure
    ) internal {
        Validator storage v = validators[who];
        uint256 before = v.locked - v.reserved;
        v.reserved -= uint96(amount);
        if (before < exposure && before + amount >= exposure) freedAt[who] = uint40(block.timestamp);
    }

    /// @notice The set's size at time `key`.
    function sizeAt(Set storage s, uint256 key) internal view returns (uint256) {
        return valueAt(s.count, key);
    }

    /// @notice The registry index at 0-based `position` at time `key`.
    function indexAt(Set storage s, uint256 position, uint256 key) internal view returns (uint256) {
        return valueAt(s.at[position], key);
    }

    /// @dev Record `value` as the value from now on (a second change in the same second replaces the first).
    function record(History storage h, uint256 value) internal {
        uint40 now_ = uint40(block.timestamp);
        Point[] storage past = h.past;
        uint256 n = past.length;
        if (n != 0 && past[n - 1].at == now_) past[n - 1].value = uint216(value);
        else past.push(Point({at: now_, value: uint216(value)}));
        h.since = now_;
        h.value = uint216(value);
    }

    /// @dev The value at time `key` (the last recorded at or before it; 0 before the first).
    function valueAt(History storage h, uint256 key) internal view returns (uint256) {
        if (h.since <= key) return h.value;
        Point[] storage past = h.past;
        uint256 low;
        uint256 high = past.length;
        while (low < high) {
            uint256 mid = (low + high) / 2;
            if (past[mid].at > key) high = mid;
            else low = mid + 1;
        }
        return low == 0 ? 0 : past[low - 1].value;
    }

    /// @notice Seat up to `d.size` members of the set at `d.key` on `committee` — fewer only when fewer are
    /// eligible (not judge, disputer or worker, not seated, with `d.penalty` of unreserved stake, which the
    /// seat reserves). First `2·size` uniform draws from the seed; if they miss, a walk that visits every
    /// position once (a random start, a random step coprime to the size) fills the rest.
    function drawCommittee(
        Set storage s,
        Entry[] storage entries,
        mapping(address => Validator) storage validators,
        address[] storage committee,
        Draw memory d
    ) external {
        uint256 n = sizeAt(s, d.key);
        if (n == 0) return;
        for (uint256 j; j < 2 * d.size && committee.length < d.size; ++j) {
            // slither-disable-next-line weak-prng (block-hash randomness by design: docs/protocol.md, its bias)
            uint256 position = uint256(keccak256(abi.encode(d.seed, j))) % n;
            _seat(entries, validators, committee, indexAt(s, position, d.key), d);
        }
        if (committee.length == d.size) return;
        // slither-disable-next-line weak-prng (block-hash randomness by design: docs/protocol.md, its bias)
        uint256 at = uint256(d.seed) % n;
        uint256 step = _coprimeStep(uint256(keccak256(abi.encode(d.seed, n))), n);
        for (uint256 j; j < n && committee.length < d.size; ++j) {
            _seat(entries, validators, committee, indexAt(s, at, d.key), d);
            at = (at + step) % n;
        }
    }

    function _seat(
        Entry[] storage entries,
        mapping(address => Validator) storage validators,
        address[] storage committee,
        uint256 index,
        Draw memory d
    ) private {
        if (index == d.judge || index == d.disputer || index == d.worker) return;
        address who = entries[index - 1].validator;
        Validator storage v = validators[who];
        if (v.locked - v.reserved < d.penalty) return;
        for (uint256 i; i < committee.length; ++i) {
            if (committee[i] == who) return;
        }
        v.reserved += uint96(d.penalty);
        committee.push(who);
    }

    /// @dev A step in [1, n) coprime to n (1 when n ≤ 2): stepping by it visits every position of [0, n) once.
    function _coprimeStep(uint256 r, uint256 n) private pure returns (uint256 step) {
        if (n <= 2) return 1;
        step = r % (n - 1) + 1;
        while (_gcd(step, n) != 1) step = step % (n - 1) + 1;
    }

    function _gcd(uint256 a, uint256 b) private pure returns (uint256) {
        while (b != 0) (a, b) = (b, a % b);
        return a;
    }
}
