#!/bin/sh
# A git commit-msg hook: the subject at most 72 characters, then a blank line before any body,
# so that `git log --oneline` stays readable. Install it once per clone:
#   ln -s ../../scripts/check_commit_msg.sh .git/hooks/commit-msg
# Run by hand on a message file, or with --range REV..REV on existing commits.
set -eu

check() {  # $1: the message's text
  subject=$(printf '%s\n' "$1" | sed -n 1p)
  second=$(printf '%s\n' "$1" | sed -n 2p)
  length=$(printf '%s' "$subject" | wc -m)
  if [ "$length" -gt 72 ]; then
    echo "commit message: the subject has $length characters, at most 72: '$subject'" >&2
    return 1
  fi
  if [ -n "$second" ]; then
    echo "commit message: the line after the subject must be blank (details go in the body)" >&2
    return 1
  fi
}

if [ "${1:-}" = "--range" ]; then
  status=0
  for rev in $(git rev-list "$2"); do
    check "$(git log -1 --format=%B "$rev")" || { echo "  in $rev" >&2; status=1; }
  done
  exit $status
fi
# A hook gets the message file; comment lines (git's template) are not part of the message.
check "$(grep -v '^#' "$1")"
