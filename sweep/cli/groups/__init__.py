"""One module per ``mjp`` command group: each adds its parsers (``add(sub)``) and names each command's handler."""
