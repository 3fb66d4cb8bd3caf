"""The loop, at the top of the rooms, in three parts bottom to top: its action formats
(``formats``), its middleware (``middleware``: the extension seam and the features that join the
loop through it), and its own modules: the nodes and their routing, starting a run and reading
each reply (``control``), the model's turn and the forced answer (``model``), running a tool, the
notes and compaction steps, what the model sees of the turns (``transcript``), and what every
node needs (``deps``). A part imports only the parts below it (``tests/test_layout.py``)."""
