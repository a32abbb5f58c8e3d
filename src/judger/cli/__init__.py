"""The `judger` command line."""
