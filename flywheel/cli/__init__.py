"""The `galahad` console script: the entry point and one module per subcommand."""
