"""One run's parts that every host shares: the engine's bookkeeping in its config, its admitted
input, and the outcome and step events it settles into."""
