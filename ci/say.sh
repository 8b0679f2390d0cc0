# shellcheck shell=bash
# The ci/ scripts' progress lines, "==> [+M:SS] what": the time since the outermost of
# them started (CLARKE_CI_T0, inherited by the scripts it runs), so that a run's output
# says where its time went.
export CLARKE_CI_T0=${CLARKE_CI_T0:-$(date +%s)}
say() {
  local s=$(($(date +%s) - CLARKE_CI_T0))
  printf '==> [+%d:%02d] %s\n' $((s / 60)) $((s % 60)) "$*" >&2
}
