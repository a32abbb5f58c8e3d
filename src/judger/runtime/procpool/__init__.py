"""Killable worker processes: a deadline per call, a stuck worker SIGKILLed and replaced."""
