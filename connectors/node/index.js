// Queue Manager Node middleware: being written.
