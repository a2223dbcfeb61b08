# Sourced by scripts/test: named phases with their wall times, and the table of them
# printed when the script exits (also when a phase fails: the failed phase is marked).
#
#   phase NAME       ends the running phase (if any) and starts NAME
#   phase_rows FILE CMD...  runs CMD, then adds FILE's rows (NAME<TAB>SECONDS<TAB>STATUS,
#                    written by CMD: scripts/run-test-binaries one per binary) under the
#                    running phase, indented; returns CMD's status
#   phase_table [RC] prints the table, the run marked failed unless RC (default: the last
#                    command's status) is 0; returns RC (the EXIT trap calls it)
#
# The table also goes to $PHASE_TABLE (default target/test-phases.txt).

phase_names=()
phase_secs=()
phase_status=()
phase_current=""
phase_started=0
phase_run_started=$EPOCHSECONDS

# The running phase's rows (phase_rows), listed under it when it ends.
phase_row_lines=()

# phase_add NAME SECONDS STATUS: a line of the table.
phase_add() {
    phase_names+=("$1")
    phase_secs+=("$2")
    phase_status+=("$3")
}

phase_end() {
    local row name secs status
    if [ -n "$phase_current" ]; then
        phase_add "$phase_current" $((EPOCHSECONDS - phase_started)) "${1:-ok}"
        phase_current=""
    fi
    for row in "${phase_row_lines[@]}"; do
        IFS=$'\t' read -r name secs status <<<"$row"
        phase_add "  $name" "$secs" "$status"
    done
    phase_row_lines=()
}

phase() {
    phase_end
    phase_current=$1
    phase_started=$EPOCHSECONDS
    printf '\n=== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"
}

phase_rows() {
    local file=$1 row status=0
    shift
    "$@" || status=$?
    if [ -f "$file" ]; then
        while IFS= read -r row; do
            phase_row_lines+=("$row")
        done <"$file"
    fi
    return $status
}

phase_fmt() {
    printf '%d:%02d' $(($1 / 60)) $(($1 % 60))
}

phase_table() {
    local rc=${1:-$?} i out="${PHASE_TABLE:-${CARGO_TARGET_DIR:-target}/test-phases.txt}"
    [ "$rc" = 0 ] && phase_end ok || phase_end "FAILED (exit $rc)"
    mkdir -p "$(dirname "$out")"
    {
        printf '\n%-48s %8s  %s\n' phase "m:ss" status
        for i in "${!phase_names[@]}"; do
            printf '%-48s %8s  %s\n' "${phase_names[$i]}" "$(phase_fmt "${phase_secs[$i]}")" \
                "${phase_status[$i]}"
        done
        printf '%-48s %8s  %s\n' "total (wall)" "$(phase_fmt $((EPOCHSECONDS - phase_run_started)))" \
            "$([ "$rc" = 0 ] && echo ok || echo FAILED)"
    } | tee "$out.partial"
    mv "$out.partial" "$out" 2>/dev/null || true
    return "$rc"
}
