"""Per-attempt telemetry: wall time, CPU time, and energy from NVML where a GPU exists.

pynvml (`nvidia-ml-py`) reports a GPU's cumulative energy in millijoules; the difference across an
attempt is its energy. Without a GPU, energy is None and CPU time is the cost figure.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class Measurement:
    seconds: float
    cpu_seconds: float
    energy_joules: float | None

    def split(self, n: int) -> Measurement:
        """One of n equal shares."""
        return Measurement(self.seconds / n, self.cpu_seconds / n,
                           None if self.energy_joules is None else self.energy_joules / n)

    def plus(self, other: Measurement) -> Measurement:
        energy = None if self.energy_joules is None and other.energy_joules is None else (
            (self.energy_joules or 0.0) + (other.energy_joules or 0.0))
        return Measurement(self.seconds + other.seconds, self.cpu_seconds + other.cpu_seconds, energy)


class EnergyMeter:
    """Reads NVML's total energy counter for one GPU; `available` is False on machines without one."""

    def __init__(self, gpu_index: int = 0):
        self.handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(gpu_index)
            self._read = lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1000.0
            self._read()
        except Exception:  # no driver, no GPU, or a GPU without the energy counter
            self.handle = None

    @property
    def available(self) -> bool:
        return self.handle is not None

    def joules(self) -> float | None:
        return self._read() if self.handle is not None else None


class Stopwatch:
    """Measures a block: `with Stopwatch(meter) as sw: ...; sw.result`."""

    def __init__(self, meter: EnergyMeter | None = None):
        self.meter = meter
        self.result: Measurement | None = None

    def __enter__(self) -> Stopwatch:
        self._t, self._c = time.perf_counter(), time.process_time()
        self._e = self.meter.joules() if self.meter else None
        return self

    def __exit__(self, *exc) -> None:
        e = self.meter.joules() if self.meter else None
        energy = (e - self._e) if (e is not None and self._e is not None) else None
        self.result = Measurement(time.perf_counter() - self._t, time.process_time() - self._c, energy)
