"""App configuration for the console: its cross-ledger reads registered where they are read."""

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Console"

    def ready(self) -> None:
        from conduit.metrics import LEDGER_COLLECTORS
        from console.metrics import LedgerCollector

        # /metrics reads the ledgers' gauges through this collector (conduit imports no app).
        if not any(isinstance(c, LedgerCollector) for c in LEDGER_COLLECTORS):
            LEDGER_COLLECTORS.append(LedgerCollector())
