#!/usr/bin/env bash
# Build the Pulumi CLI from its Go modules into a per-user cache keyed by version.
#
# Why: no Pulumi binary can be downloaded on our build machines, but the Go module proxy is
# reachable. Real users install the Pulumi CLI the usual way; this is how the repo's tests and
# demo get one. Idempotent: when the binary for the version is present, nothing is built.
#
# Usage: tools/build-pulumi-engine.sh VERSION   (prints the bin directory on stdout)
set -euo pipefail
version="${1:?usage: build-pulumi-engine.sh VERSION (e.g. 3.260.0)}"
cache="${METALFLEET_ENGINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metalfleet/pulumi-v${version}}"
bin="$cache/bin"
here=$(cd "$(dirname "$0")" && pwd)
install_launchers() {
  # The small launchers a CLI release ships beside the binaries (ours, not copied from Pulumi).
  mkdir -p "$bin"
  for f in "$here"/pulumi-launchers/*; do install -m 0755 "$f" "$bin/"; done
}
if [ -x "$bin/pulumi" ] && "$bin/pulumi" version 2>/dev/null | grep -qx "v${version}"; then
  install_launchers; echo "$bin"; exit 0
fi
mkdir -p "$bin"
if ! command -v go >/dev/null 2>&1; then
  [ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
  command -v go >/dev/null 2>&1 || { echo "build-pulumi-engine: Go is needed to build the Pulumi CLI (https://go.dev/dl/)" >&2; exit 1; }
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
modfile_dir=$(go env GOMODCACHE)/cache/download/github.com/pulumi/pulumi/pkg/v3/@v
# The pkg module's go.mod carries replace directives, so `go install mod@ver` refuses it: build
# from a throwaway wrapper module that requires pkg and sdk and copies the non-local replaces.
(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/pulumi/pulumi/pkg/v3@v${version}" >/dev/null)
cat > "$work/go.mod" <<MOD
module metalfleet.local/pulumi-engine

go 1.26

require (
	github.com/pulumi/pulumi/pkg/v3 v${version}
	github.com/pulumi/pulumi/sdk/v3 v${version}
)
MOD
# Non-local replaces (those pointing at a module version, not a ../path) are copied.
grep -E '^replace .* => [^.][^ ]* v[0-9]' "$modfile_dir/v${version}.mod" >> "$work/go.mod" || true
cat > "$work/tools.go" <<'GO'
//go:build tools

package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
GO
cd "$work"
echo "building pulumi v${version} into $bin (cold builds take 10-20 minutes)" >&2
GOFLAGS=-mod=mod go mod tidy -e >&2 2>&1 || true
GOFLAGS=-mod=mod go get "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi@v${version}" >&2
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$bin/pulumi" \
  -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v${version}" \
  github.com/pulumi/pulumi/pkg/v3/cmd/pulumi >&2
"$bin/pulumi" version >&2
install_launchers
echo "$bin"
