"""``python -m agentlog.cli``."""

from . import main

main()
