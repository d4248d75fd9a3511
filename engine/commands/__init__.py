"""One module per `loopproof` subcommand. Each defines `add_arguments(parser)` and `main(args)`."""
