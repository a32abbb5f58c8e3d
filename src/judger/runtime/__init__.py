"""Mechanisms that run work and know nothing of judgers: worker processes, the code sandbox, HTTP."""
