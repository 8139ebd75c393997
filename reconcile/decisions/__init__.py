"""The replay-decision engine (seed 003): may this be applied or delivered again? Pure: no ORM, no I/O."""
