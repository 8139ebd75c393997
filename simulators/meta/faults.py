"""Planted Graph failures (`/_sim/faults`) and the log of every call and fault that fired."""

from __future__ import annotations

import time

from simulators.meta.errors import GraphError
from simulators.meta.whatsapp_errors import WHATSAPP_CODES, WhatsAppError

READ_MODES = ("error", "timeout", "drop", "latency", "usage")
WRITE_MODES = ("apply_then_error", "apply_then_timeout", "apply_then_drop")
FAULT_MODES = READ_MODES + WRITE_MODES + ("expire_cursors", "clear")


class Fault:
    def __init__(self, data: dict, default_hang: float) -> None:
        self.mode = str(data.get("mode", "error"))
        if self.mode not in FAULT_MODES:
            raise ValueError(f"mode is one of {FAULT_MODES}")
        self.count = int(data.get("count", 1))
        self.code = int(data.get("code", 2))
        self.subcode = int(data["subcode"]) if data.get("subcode") is not None else None
        self.status = int(data["status"]) if data.get("status") is not None else None
        self.message = data.get("message")
        self.user_title, self.user_msg = data.get("user_title"), data.get("user_msg")
        self.latency = float(data.get("latency_ms", 0)) / 1000
        self.retry_minutes = data.get("retry_minutes")
        # mode "usage": answer normally, with X-Business-Use-Case-Usage at this call_count (percent).
        self.call_count = int(data.get("call_count", 95))
        self.hang = float(data.get("hang_seconds", default_hang))
        self.path_contains = str(data.get("path_contains") or "")
        self.method = str(data.get("method") or "").upper()

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method != method:
            return False
        # apply_then_* only make sense where something is applied: writes.
        if self.mode in WRITE_MODES and method != "POST":
            return False
        return self.path_contains in path

    def error(self, *, whatsapp: bool = False) -> GraphError:
        """The planted answer; on a Cloud API send a WhatsApp code carries WhatsApp's `error_data`."""
        if whatsapp and self.code in WHATSAPP_CODES:
            return WhatsAppError(self.code, subcode=self.subcode, status=self.status, message=self.message)
        return GraphError(
            self.code,
            subcode=self.subcode,
            status=self.status,
            message=self.message,
            user_title=self.user_title,
            user_msg=self.user_msg,
        )


class FaultLog:
    """SimulatorState's faults and calls (the state's lock guards them)."""

    def fault_add(self, data: dict) -> dict:
        fault = Fault(data, self.hang_seconds)
        if fault.mode == "expire_cursors":
            self.expire_cursors()
        elif fault.mode == "clear":
            with self.lock:
                self.faults.clear()
        else:
            with self.lock:
                self.faults.append(fault)
        return {"mode": fault.mode, "count": fault.count}

    def fault_next(self, method: str, path: str, target: str = "") -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.count > 0 and fault.matches(method, path):
                    fault.count -= 1
                    if fault.count <= 0:
                        self.faults.remove(fault)
                    self.fault_log.append(
                        {
                            "at": time.time(),
                            "mode": fault.mode,
                            "code": fault.code,
                            "subcode": fault.subcode,
                            "status": fault.status,
                            "method": method,
                            "path": path,
                            "target": target,
                        }
                    )
                    return fault
        return None

    def faults_pending(self) -> int:
        with self.lock:
            return sum(f.count for f in self.faults)

    def call_record(self, method: str, path: str) -> None:
        with self.lock:
            self.calls[path] += 1
            self.call_log.append({"at": time.time(), "method": method, "path": path})
