"""The README's and the guide's code is real: it runs."""
