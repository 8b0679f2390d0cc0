"""Results: the record of one page load, the crash-safe journal, the results directory,
and sinks (InfluxDB)."""
