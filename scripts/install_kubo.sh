#!/usr/bin/env bash
# Build the pinned Kubo (IPFS) binary from the Go module proxy and place it at $2.
# `go install pkg@version` refuses kubo (its go.mod has exclude directives), so we download the
# module and build its cmd/ipfs as the main module. The binary is cached per version in
# ~/.cache/proofswarm so fresh clones on the same machine do not rebuild it.
set -euo pipefail
version="$1"; dest="$2"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/proofswarm/kubo-$version/ipfs"
if [ ! -x "$cache" ]; then
  command -v go >/dev/null || { echo "error: Go is needed to build Kubo $version (install Go >= 1.26)" >&2; exit 1; }
  echo "building Kubo $version from the Go module proxy (first time only, a few minutes)…"
  dir=$(go mod download -json "github.com/ipfs/kubo@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  mkdir -p "$(dirname "$cache")"
  (cd "$dir" && go build -trimpath -o "$cache.tmp" ./cmd/ipfs)
  mv "$cache.tmp" "$cache"
fi
mkdir -p "$(dirname "$dest")"
cp "$cache" "$dest.tmp" && mv "$dest.tmp" "$dest"
ln -sf "$(basename "$dest")" "$(dirname "$dest")/ipfs"
"$dest" version
