"""The live view of a Tune run: the Tune callback (view.py) and the table it draws (table.py)."""
