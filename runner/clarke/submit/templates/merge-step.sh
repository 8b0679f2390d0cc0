# The merge, the same step on every engine (clarke.submit.steps). Given:
# CAMPAIGN_ID, SHARDS and RESULTS, as the shards had them.
set --
i=1
while [ "$i" -le "$SHARDS" ]; do
  # A shard that never started has no directory: the merge lists it as missing.
  d="$RESULTS/$CAMPAIGN_ID-shard${i}of${SHARDS}"
  if [ -d "$d" ]; then
    set -- "$@" "$d"
  fi
  i=$((i + 1))
done
if [ "$#" -eq 0 ]; then
  echo "no shard of $CAMPAIGN_ID has a results directory in $RESULTS" >&2
  exit 2
fi
merged="$RESULTS/$CAMPAIGN_ID"
rc=0
# Runs of the plan without a successful load are listed and fail the merge
# (exit 2), after the merged directory has been written.
clarke results merge "$@" --out "$merged" --require-complete || rc=$?
# The report shows what there is, also when runs are missing.
if [ -f "$merged/meta.json" ]; then
  clarke report "$merged" || { r=$?; [ "$rc" -ne 0 ] || rc=$r; }
fi
exit "$rc"
