"""GPU and host telemetry of a run: samplers, the recording process, nvidia-smi/DCGM parsing."""

from diagnostic.measure.telemetry.recorder import Recording, TelemetrySettings, recording
from diagnostic.measure.telemetry.server import server_pid

__all__ = ["Recording", "TelemetrySettings", "recording", "server_pid"]
