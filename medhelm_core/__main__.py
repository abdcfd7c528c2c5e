"""``python -m medhelm_core`` is the same as the ``medhelm`` command."""

from medhelm_core.cli import main

main()
