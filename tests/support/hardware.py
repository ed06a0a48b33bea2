"""Detect a real Intel GPU driven by Level Zero, for the ``hardware`` marker."""

from __future__ import annotations

import glob
import os


def intel_gpu_present() -> tuple[bool, str]:
    """Return (present, reason) for a real Intel GPU with a kernel driver and ze driver."""
    if os.environ.get("ZE_ENABLE_ALT_DRIVERS"):
        return False, "ZE_ENABLE_ALT_DRIVERS is set (simulated driver in use)"
    vendors = []
    for path in glob.glob("/sys/class/drm/card*/device/vendor"):
        try:
            with open(path) as f:
                vendors.append(f.read().strip())
        except OSError:
            continue
    if "0x8086" not in vendors:
        return False, "no Intel DRM device in /sys/class/drm"
    libs = ("libze_intel_gpu.so.1",)
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/lib", "/usr/lib"):
        if any(os.path.exists(os.path.join(d, lib)) for lib in libs):
            return True, "Intel DRM device and libze_intel_gpu found"
    return False, "Intel DRM device present but libze_intel_gpu.so.1 is not installed"
