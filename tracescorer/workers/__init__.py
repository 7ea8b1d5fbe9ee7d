"""The stages after the segment log, in the daemon's process or in worker processes partitioned by
trace id (``workers.count``): :mod:`.pipeline` builds them, :mod:`.pool` runs the workers from the
main process, :mod:`.child` is a worker's entry point, :mod:`.messages` what they tell each other."""
