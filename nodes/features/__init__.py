"""What some runs add to the loop: the notes and compaction variants' memory, the thread's earlier
runs (``history_runs``), run budgets, and OpenTelemetry traces."""
