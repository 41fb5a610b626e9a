package linux

// The shell functions linux.sh and a reload's rule script (RuleScript)
// share, written once: each is the function with its comment.
const (
	// shQ quotes a value as one shell word.
	shQ = `# q quotes a value as one shell word.
q() {
    case "$1" in
    '' | *[!A-Za-z0-9_./:=,@%+-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
    *) printf '%s' "$1" ;;
    esac
}

`
	// shRun runs a step's command (printed under --dry-run), keeping why
	// it failed; run_failed fails the step with that.
	shRun = `# run prints a command under --dry-run, else runs it with its errors kept
# (reason: why it failed, where ethtool said).
run() {
    if [ "$dry" = 1 ]; then
        line=''
        for a in "$@"; do line="$line${line:+ }$(q "$a")"; done
        printf '%s\n' "$line"
        return 0
    fi
    reason=''
    "$@" 2>"$state.err" >/dev/null
    rc=$?
    if grep -q 'Operation not supported' "$state.err" 2>/dev/null; then
        reason='the interface has no such feature (Operation not supported)'
    elif [ -s "$state.err" ]; then
        reason=$(head -n 1 "$state.err")
    fi
    return "$rc"
}

# run_failed fails the step with what its command's errors said.
run_failed() {
    fail "${reason:-the command failed}"
}

`
	// shRecord appends to the undo record.
	shRecord = `# record appends a command that reverts a step to the run's record.
record() {
    [ "$dry" = 1 ] || printf '%s\n' "$1" >>"$state"
}

`
	// shSkip ends a step this kernel has nothing for.
	shSkip = `# skip ends a step this kernel has nothing to set for (it was built
# without the setting): a note, not a failure.
skip() {
    skipped=$((skipped + 1))
    [ "$keep" = 1 ] && printf 'skipped %s: %s\n' "$num" "$1"
    echo "linux.sh: step $cur skipped: $1" >&2
    return 0
}

`
	// shBegin starts a step: its number and description.
	shBegin = `# begin starts step number $1, which does $2.
begin() {
    num=$1
    cur="$1/$total: $2"
    [ "$dry" = 1 ] && printf '# step %s\n' "$cur"
    return 0
}

`
	// shFeature reads an ethtool -k feature back.
	shFeature = `feature() {
    ethtool -k "$ifc" 2>/dev/null | awk -v f="$1:" '$1 == f { print $2; exit }'
}
`
	// shRuleAction reads the action of the ntuple rule at a location.
	shRuleAction = `rule_action() {
    ethtool -n "$ifc" rule "$1" 2>/dev/null | sed -n 's/^[[:space:]]*Action: //p'
}
`
)
