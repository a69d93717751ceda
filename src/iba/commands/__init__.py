"""The `iba` subcommands, one module each (iba.cli names them and imports only the one that runs).

Each exposes `add_arguments(parser)` and `main(args) -> int` and stays thin: arguments, errors a
user can act on, exit status; the work lives in the packages below. The top layer of
docs/ARCHITECTURE.md (which lists the modules): a command may import any package, no package
imports a command.
"""

import sys


def fail(message: object, who: str = "error") -> int:
    """Say `WHO: MESSAGE` on stderr; returns 2, the status of a command whose input the user must fix."""
    print(f"{who}: {message}", file=sys.stderr)
    return 2
