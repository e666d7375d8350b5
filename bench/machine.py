"""What machine a benchmark ran on, recorded next to every table."""

from __future__ import annotations

import os
import platform
import time


def machine() -> dict[str, object]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
