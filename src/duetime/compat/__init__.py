"""Drop-in replacements for standard-library scheduling APIs, built on duetime's core."""
