#!/usr/bin/env bash
# A filter that keeps a long command talking: its lines pass through (indented), and when it
# has printed nothing for TALK_EVERY seconds (default 8) a line says it is still at work, with
# the partial line it is on (pytest -v: the name of the test still running).
#
#   some command 2>&1 | bash scripts/talk.sh LABEL WHAT [INDENT]
#   e.g. ... | bash scripts/talk.sh setup "installing" "  "  ->  [setup  42s] still installing ...
# TALK_SINCE: the epoch second the caller's clock started, so the times match its own lines.
label="$1"; what="$2"; indent="${3:-}"; every="${TALK_EVERY:-8}"; since="${TALK_SINCE:-$(date +%s)}"
pending=""
while :; do
  if IFS= read -r -t "$every" line; then
    printf '%s%s%s\n' "$indent" "$pending" "$line"
    pending=""
  elif [ $? -gt 128 ]; then  # timed out: what was read of the line so far is in $line
    pending="$pending$line"
    printf '[%s %3ds] still %s%s\n' "$label" "$(( $(date +%s) - since ))" "$what" "${pending:+: ${pending% }}"
  else  # end of input; a last line without a newline is still shown
    [ -n "$pending$line" ] && printf '%s%s%s\n' "$indent" "$pending" "$line"
    break
  fi
done
exit 0
