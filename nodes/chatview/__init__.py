"""The chat view of a run: ``messages`` as chat clients expect them, the streamed tokens' line
breaks, and what a human message asks."""
