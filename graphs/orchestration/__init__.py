"""Starting and resuming runs whatever their host: the runner (thread lock, queue, settlement) and
the resume worker."""
