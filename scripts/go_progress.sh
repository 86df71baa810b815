# Sourced by scripts/otelcol.sh and scripts/jaeger.sh (each defines `say`): reads `go ... -v`
# output (one line a package) and says how far it is at least every 10 s, so a long build is
# never silent; compiler errors (file.go:line:) and go's own messages are shown whole, the
# line a module of `go get` is only counted.
progress() {
  local what=$1 count=0 last=$SECONDS line
  while :; do
    if IFS= read -r -t 10 line; then
      count=$((count + 1))
      case "$line" in
        "go: added "*|"go: upgraded "*|"go: finding "*) ;;
        *.go:*|go:*) printf '  %s\n' "$line" >&2 ;;
      esac
    elif [ $? -le 128 ]; then
      break
    fi
    if [ $((SECONDS - last)) -ge 10 ]; then
      say "$what: $count lines of go output so far"
      last=$SECONDS
    fi
  done
  say "$what: done ($count lines of go output)"
}
