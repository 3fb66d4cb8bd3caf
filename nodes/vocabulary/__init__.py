"""The loop's vocabulary, at the bottom of the rooms: the state and how it is stored, the run's
settings, how a run ends and where a thread stands, the prompts, the model's view of the turns
(``view``), and the effects a node body yields. It imports no other room."""
