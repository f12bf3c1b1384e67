"""The pool explorer: a chain + IPFS index in SQLite, a JSON API, /metrics and a web page."""
