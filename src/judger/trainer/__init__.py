"""The trainer side: verl-compatible validation metrics, train data, the agent loop, rollout files."""
