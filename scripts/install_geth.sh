#!/usr/bin/env bash
# Build the pinned geth (go-ethereum) binary from the Go module proxy and place it at $2: the production client the
# suite runs the protocol on besides anvil (tests/e2e/test_geth.py). The binary is cached per version in
# ~/.cache/proofswarm so fresh clones on the same machine do not rebuild it (the first build takes minutes).
set -euo pipefail
version="$1"; dest="$2"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/proofswarm/geth-$version/geth"
if [ ! -x "$cache" ]; then
  command -v go >/dev/null || { echo "error: Go is needed to build geth $version (install Go >= 1.24)" >&2; exit 1; }
  echo "building geth $version from the Go module proxy (first time only, several minutes)…"
  build=$(mktemp -d)
  trap 'rm -rf "$build"' EXIT
  GOBIN="$build" GOFLAGS=-trimpath go install "github.com/ethereum/go-ethereum/cmd/geth@$version"
  mkdir -p "$(dirname "$cache")"
  mv "$build/geth" "$cache"
fi
mkdir -p "$(dirname "$dest")"
cp "$cache" "$dest.tmp" && mv "$dest.tmp" "$dest"
"$dest" version | head -n 2
