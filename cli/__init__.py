"""The command-line shell every proofswarm command shares; it sits below the roles and imports only
`ledger_client` and `protocol`. Library code never imports it: it raises its own errors (or
`protocol.errors.InvalidInput`), which the exit table here turns into exit codes.

- `console.py`: the console scripts' entry (`console_script`: Ctrl-C while a command imports exits 130 in one
  line) and a daemon's Ctrl-C/SIGTERM (`stop_on_signals`).
- `errors.py`: `UsageError` and the one error → exit-code table (`EXIT_CODES`), `one_line_errors`.
- `options.py`: chain options with devnet defaults, log options, amounts, settings from TOML + flags.
- `output.py`: results for people (amounts in tokens) and for scripts (`--json`, amounts in base units).
- `devnet.py`: devnet.json discovery (what `devnet up` and `trainer init` recorded).

Nothing is imported here: the role packages' `main` imports `cli.console` before anything heavy.
"""
