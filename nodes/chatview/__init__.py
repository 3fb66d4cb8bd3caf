"""The chat view of a run: ``messages`` as chat clients expect them, and what a human message
asks."""
