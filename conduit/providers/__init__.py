"""The ground floor: one package per platform, speaking only that platform's protocol."""
