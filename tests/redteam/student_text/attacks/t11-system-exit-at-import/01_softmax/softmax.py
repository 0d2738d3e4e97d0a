"""Attack: SystemExit with a message, at import."""
raise SystemExit("ZZLEAK11 leaving with a message")
