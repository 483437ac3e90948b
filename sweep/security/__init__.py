"""Sign what Tune will unpickle on a resume, and refuse a sweep directory whose signatures do not match."""
