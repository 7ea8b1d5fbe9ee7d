"""The segment log's feed: acknowledged requests become span rows and assembly's input, off the
acknowledgement's path (:mod:`tracescorer.feed.stage`)."""
