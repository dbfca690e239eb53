"""`python -m ptc_emulator serve ...`: the same command line as `ptc-emulator`."""

from ptc_emulator.api.cli import main

if __name__ == "__main__":
    main()
