"""The replay-decision engine (docs/concepts/replay-decisions.md): may this be applied or delivered
again? Pure: no ORM, no I/O."""
