"""make soak: several Conduit nodes under signed traffic and kills, then checked."""
