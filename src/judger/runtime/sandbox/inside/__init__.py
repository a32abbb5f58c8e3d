"""What runs inside the sandbox: standard-library scripts, mounted read-only, never importing judger."""
