#!/usr/bin/env bash
# Build the OpenTelemetry Collector described by collector_config/builder.yaml, once.
#
#   bash scripts/otelcol.sh          build it if missing (with progress), then print its path
#   bash scripts/otelcol.sh --path   print its path if it is built; exit 3 if it is not
#
# The binary is kept outside the checkout, in a folder keyed by the manifest's content and the
# builder's version, so a fresh clone on the same machine (CI) reuses it, and a changed
# manifest builds a new one: ${OTEL_LOOPGUARD_CACHE:-~/.cache/otel-loopguard}/otelcol/<key>/.
# Go's own module and build caches make a rebuild after a small manifest change quick.
# Exit status: 0 built, 2 build failed, 3 not built (--path) or Go missing.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILDER_VERSION=v0.161.0  # the release of every module in the manifest
manifest=collector_config/builder.yaml
cache="${OTEL_LOOPGUARD_CACHE:-$HOME/.cache/otel-loopguard}/otelcol"
key=$( { cat "$manifest"; echo "$BUILDER_VERSION"; } | sha256sum | cut -c1-16)
dir="$cache/$key"
bin="$dir/otelcol-loopguard"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
if [ "${1:-}" = "--path" ]; then
  echo "the Collector is not built yet: run bash scripts/otelcol.sh" >&2
  exit 3
fi
if ! command -v go >/dev/null 2>&1; then
  echo "otelcol.sh: 'go' not found; the Collector tests need Go 1.24 or later" \
       "(Debian: apt-get install golang-go; or a release from go.dev) to build the Collector" >&2
  exit 3
fi

say() { printf '[otelcol %3ds] %s\n' "$SECONDS" "$*" >&2; }

# progress(): a line at least every 10 s while go works (shared with the other Go build).
source scripts/go_progress.sh
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
work="$dir.partial"
rm -rf "$work"
mkdir -p "$work"
say "building the Collector of $manifest with $(go version | cut -d' ' -f3) into $dir"

builder="$cache/builder-$BUILDER_VERSION/builder"
if [ ! -x "$builder" ]; then
  say "installing the Collector Builder $BUILDER_VERSION (go install)"
  GOBIN="$(dirname "$builder")" go install -v "go.opentelemetry.io/collector/cmd/builder@$BUILDER_VERSION" 2>&1 \
    | progress "installing the builder"
  [ -x "$builder" ] || { say "installing the Collector Builder failed"; exit 2; }
fi

# The builder writes the sources and fetches the modules ("go: downloading ..." lines are the
# progress); the compile step is ours, so that it can report as it goes.
say "generating sources and fetching modules"
sed "s|^\(  output_path:\).*|\1 $work/src|" "$manifest" > "$work/builder.yaml"
if ! "$builder" --config "$work/builder.yaml" --skip-compilation 2>&1 \
    | grep -E --line-buffered 'downloading|Generating|Getting|ERROR|error' | sed 's/^/  /' >&2; then
  : # grep finds nothing when every module is cached already; the status is checked below
fi
[ -f "$work/src/go.mod" ] || { say "the builder failed (rerun with --verbose: $builder --config $manifest)"; exit 2; }

say "compiling (about 1,250 packages from scratch, 5-6 minutes on 2 cores; far fewer with Go's build cache)"
status_file="$work/status"
( cd "$work/src" && go build -v -trimpath -ldflags='-s -w' -o "$work/otelcol-loopguard" . 2>&1; echo $? > "$status_file" ) |
  progress "compiling"
if [ "$(cat "$status_file")" != 0 ]; then
  say "compiling failed"
  exit 2
fi
"$work/otelcol-loopguard" --version >&2
mkdir -p "$dir"
mv "$work/otelcol-loopguard" "$bin"
rm -rf "$work"
say "done"
echo "$bin"
