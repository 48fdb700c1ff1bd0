# Sourced by the benchmark drivers (bash benchmarks/*.sh).

# sample_load FILE: the machine's 1, 5 and 15-minute load averages, every minute, into FILE while the driver runs.
sample_load() {
  ( while true; do echo "$(date -u +%FT%TZ) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$1"; sleep 60; done ) &
  trap "kill $! 2>/dev/null" EXIT
}
