"""One package per platform: what the proof needs of each (its canary, its acceptance rows, its
field maps), registered into reconcile's registries when the app is ready. No app imports it."""
