"""`python -m fusegen ARGS` and the wheel's `fusegen` command: run the fusegen executable
(fusegen.binary(): the wheel's), as the cmake and ninja wheels run theirs."""
import os
import sys

import fusegen


def main() -> None:
    try:
        program = fusegen.binary()
    except fusegen.BuildError as e:
        sys.exit(str(e))
    os.execv(program, [program, *sys.argv[1:]])


if __name__ == "__main__":
    main()
