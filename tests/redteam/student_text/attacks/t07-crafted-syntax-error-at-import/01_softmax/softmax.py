"""Attack: raise SyntaxError by hand at import, with a crafted message,
line and text (the source itself parses)."""
raise SyntaxError("ZZLEAK07 crafted message", ("softmax.py", 4242, 7, "ZZLEAK07 crafted line\n"))
