// Queue Manager nginx njs module: being written.
