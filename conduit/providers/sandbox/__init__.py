"""The synthetic sandbox platform: webhook proof and field map, page reader, transport, simulator."""
