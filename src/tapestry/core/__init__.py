"""The engine: tape, traced array, backward sweep, API, custom rules."""
