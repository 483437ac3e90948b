"""A command timed as a whole process, from its start to its exit: what ``trainables/process_start.py``
(the garbage collector while it imports) and ``trainables/process_end.py`` (no finalization) save."""
