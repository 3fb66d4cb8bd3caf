"""The loop's nodes and their routing, at the top of the rooms: starting a run and reading each
reply (``control``), the model's turn and the forced answer (``model``), running a tool, a
person's approval, the notes and compaction steps, what the model sees of the turns
(``transcript``), and what every node needs (``deps``)."""
