"""The validator role: check every submission and attest or challenge it."""
