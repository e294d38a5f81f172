"""Teaching a workshop: predict-then-reveal questions, rooms shared through a database, and the
roofline a room builds (``questions``, ``rooms`` + ``db``/``models``, ``roofline``)."""
