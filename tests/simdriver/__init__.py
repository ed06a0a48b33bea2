"""Simulated Level Zero driver (C sources) and its raw ctypes test harness."""
