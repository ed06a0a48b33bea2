"""l0mem's benchmarks: scripts run as ``python -m benchmarks.<name>`` from the repository."""
