"""Compatibility with other frameworks' reward conventions (verl)."""
