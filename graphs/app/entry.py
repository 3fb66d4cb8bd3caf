"""The ``reactgraph`` console script: ``--version`` answered at once, from the installed
package's metadata, before the command line's parser and its modules load
(``reactgraph.app.cli``, which runs every other command line)."""

from __future__ import annotations

import sys


def main() -> None:
    """Entry point of the console script."""
    if sys.argv[1:] == ["--version"]:
        from reactgraph import installed_version

        sys.stdout.write(f"reactgraph {installed_version()}\n")
        return
    from reactgraph.app.cli import main as run

    sys.exit(run())


if __name__ == "__main__":
    main()
