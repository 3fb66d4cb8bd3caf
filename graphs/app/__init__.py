"""What a person runs: the command line, batch files, the worker pool, eval."""
