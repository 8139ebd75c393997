"""SimulatorState: everything the simulator knows, composed of its parts."""

from __future__ import annotations

from simulators.meta.content import Content
from simulators.meta.faults import FaultLog
from simulators.meta.login import Logins
from simulators.meta.notifications import Notifications
from simulators.meta.reads import Reads
from simulators.meta.store import Store
from simulators.meta.tokens import Tokens
from simulators.meta.whatsapp import WhatsApp
from simulators.meta.whatsapp_send import WhatsAppSends
from simulators.meta.writes import Writes


class SimulatorState(
    Content, Reads, Writes, WhatsApp, WhatsAppSends, Notifications, FaultLog, Logins, Tokens, Store
):
    """Everything the simulator knows, in one SQLite database behind one lock."""
