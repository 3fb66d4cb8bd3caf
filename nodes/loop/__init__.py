"""The loop itself: the state and how it is stored, the run's settings, starting a run and the
routers' decisions, how a run ends, one body per node (effects) and what every node needs (deps),
the prompts, and what the model sees of the turns (the transcript)."""
