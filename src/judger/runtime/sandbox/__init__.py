"""Running untrusted, model-written programs."""
