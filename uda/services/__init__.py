"""Real database servers started from installed packages, on loopback, without Docker."""
