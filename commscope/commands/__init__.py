"""The command line, one module per command group: a command parses its arguments, calls a stage and prints.
commscope/cli.py joins them into the `commscope` command; nothing else imports click."""
