"""`python -m otel_loopguard.receiver.serve [-v] serve ...`: the serve command alone, as `serve`
re-executes itself under PYTHONMALLOC=malloc (command.py, prepare_process)."""

from .command import main

raise SystemExit(main())
