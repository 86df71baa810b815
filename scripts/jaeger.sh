#!/usr/bin/env bash
# Build Jaeger (its `cmd/jaeger` program: the all-in-one, with in-memory storage and OTLP
# receivers) from the Go module proxy, once.
#
#   bash scripts/jaeger.sh          build it if missing (with progress), then print its path
#   bash scripts/jaeger.sh --path   print its path if it is built; exit 3 if it is not
#
# Like scripts/otelcol.sh, the binary is kept outside the checkout, in a folder keyed by this
# script's content (the version and the build recipe below), so a fresh clone on the same
# machine (CI) reuses it: ${OTEL_LOOPGUARD_CACHE:-~/.cache/otel-loopguard}/jaeger/<key>/.
# The build uses a small wrapper module, not `go install module@version`, because Jaeger's own
# go.mod has a replace directive (sarama), which `go install ...@version` refuses; the wrapper
# repeats that replace so the build resolves the same versions Jaeger's release does.
# The binary is built without the UI's web assets (they are not Go code; the query API, which the
# tests read, is complete without them): this build serves NO UI (its UI page says the assets
# are missing); for the UI run Jaeger's released all-in-one (docs/deployment.md, "Jaeger").
# Exit status: 0 built, 2 build failed, 3 not built (--path) or Go missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned to an approved Jaeger release: v1.75.0. The Go module proxy also serves v1.76.0, which is
# not an approved release: do not move this pin without the release being approved (issue 29).
JAEGER_VERSION=v1.75.0  # the Go module's version; the program reports itself as Jaeger v2
module=github.com/jaegertracing/jaeger
cache="${OTEL_LOOPGUARD_CACHE:-$HOME/.cache/otel-loopguard}/jaeger"
key=$(sha256sum "$0" | cut -c1-16)
dir="$cache/$key"
bin="$dir/jaeger"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
if [ "${1:-}" = "--path" ]; then
  echo "Jaeger is not built yet: run bash scripts/jaeger.sh" >&2
  exit 3
fi
if ! command -v go >/dev/null 2>&1; then
  echo "jaeger.sh: 'go' not found; the Jaeger test needs Go 1.24 or later" \
       "(Debian: apt-get install golang-go; or a release from go.dev) to build Jaeger" >&2
  exit 3
fi

say() { printf '[jaeger %3ds] %s\n' "$SECONDS" "$*" >&2; }

# progress(): a line at least every 10 s while go works (shared with the other Go build).
source scripts/go_progress.sh
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
work="$dir.partial"
rm -rf "$work"
mkdir -p "$work/src"
say "building Jaeger ($module $JAEGER_VERSION, cmd/jaeger) with $(go version | cut -d' ' -f3) into $dir"

# The wrapper module: Jaeger's program as a tool dependency, with Jaeger's own replace.
cat > "$work/src/go.mod" <<EOF
module otel-loopguard/jaeger-build

go 1.24.6

replace github.com/Shopify/sarama => github.com/Shopify/sarama v1.33.0
EOF
# Every module is the version Jaeger's release requires: the proxy serves all of them (go says
# that klauspost/compress v1.18.1 was retracted by its author; it is the one Jaeger was tested with).
say "fetching modules (go get -tool $module/cmd/jaeger@$JAEGER_VERSION)"
status_file="$work/status"
( cd "$work/src" && go get -tool "$module/cmd/jaeger@$JAEGER_VERSION" 2>&1; echo $? > "$status_file" ) |
  progress "fetching"
[ "$(cat "$status_file")" = 0 ] || { say "fetching the modules failed"; exit 2; }

say "compiling (about 2,070 packages from scratch: 20 minutes on 2 busy cores; a minute with Go's build cache)"
ldflags="-s -w -X $module/internal/version.latestVersion=$JAEGER_VERSION"
( cd "$work/src" && go build -v -trimpath -ldflags="$ldflags" -o "$work/jaeger" "$module/cmd/jaeger" 2>&1
  echo $? > "$status_file" ) | progress "compiling"
if [ "$(cat "$status_file")" != 0 ]; then
  say "compiling failed"
  exit 2
fi
"$work/jaeger" version >&2 || true
echo >&2  # the version is printed without a line end
mkdir -p "$dir"
mv "$work/jaeger" "$bin"
rm -rf "$work"
say "done"
echo "$bin"
