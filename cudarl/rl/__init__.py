"""The RL phase: advantages and the policy loss on verl's ``core_algos`` (``advantages``, ``loss``).
Heavy modules (torch, verl) load when a function needs them, so reading a config stays light."""
