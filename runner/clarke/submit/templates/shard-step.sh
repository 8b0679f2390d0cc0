# The shard, the same step on every engine (clarke.submit.steps). Given:
# CAMPAIGN_FILE, CAMPAIGN_ID, SHARDS, RESULTS (storage every node reaches) and
# SHARD (1..SHARDS).
dir="$RESULTS/$CAMPAIGN_ID-shard${SHARD}of${SHARDS}"
set --
# A shard that ran before (a requeued task, a replaced pod) continues its own
# directory: the runs it recorded are skipped, so nothing is recorded twice.
if [ -f "$dir/meta.json" ]; then
  set -- --resume "$dir"
fi
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) shard $SHARD/$SHARDS of $CAMPAIGN_ID" \
  "on $(hostname)${1:+, resuming $dir}"
exec clarke run "$CAMPAIGN_FILE" --shard "$SHARD/$SHARDS" \
  --campaign-id "$CAMPAIGN_ID" --results "$RESULTS"{{ run_options }} "$@"
