"""Math scorers: pure functions (answer extraction, normalisation, equivalence)."""
