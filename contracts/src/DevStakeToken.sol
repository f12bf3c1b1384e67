// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

/// @title DevStakeToken — a mintable stake token for the local devnet and tests only
/// @notice On a real chain the StakeManager and ComputePool take any existing ERC-20.
contract DevStakeToken is ERC20, Ownable {
    constructor(address owner_) ERC20("proofswarm dev stake", "PSWD") Ownable(owner_) {}

    /// @notice Mint `amount` to `to` (owner only).
    function mint(address to, uint256 amount) external onlyOwner {
        _mint(to, amount);
    }
}
